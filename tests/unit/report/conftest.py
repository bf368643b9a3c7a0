"""Fixtures of the report tests: run logs written record by record, as a run writes them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def write_run_log(tmp_path) -> Callable[..., Path]:
    """``write_run_log(name, header=..., records=[...])``: a run log of this schema under tmp_path; the header
    gets a run id, start time and alpha unless given."""
    from pytest_posbias.engine import SCHEMA_VERSION

    def write(name: str, *, header: Mapping[str, Any], records: Sequence[Mapping[str, Any]] = ()) -> Path:
        head = {"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": name, "alpha": 0.05,
                "started": "2026-01-01T00:00:00+0000", **header}
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in [head, *records]), encoding="utf-8")
        return path

    return write
