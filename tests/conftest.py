"""Test configuration: offline Hugging Face hub, pytester, shared helpers."""

from __future__ import annotations

import os

# Must be set before huggingface_hub is imported anywhere, or a missing hub id
# costs ~20 s of retries.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

pytest_plugins = ["pytester"]
