"""pytest-posbias: gate video LLM releases on positional, phase/order and temporal robustness.

Importing the package is light: it never imports torch or transformers (the ``hf``
backend imports them lazily when a model is loaded).
"""

from __future__ import annotations

__version__ = "0.1.0"
SCHEMA_VERSION = 1  # run-log schema version

__all__ = ["SCHEMA_VERSION", "__version__"]
