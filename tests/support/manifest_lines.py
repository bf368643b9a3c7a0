"""Reading back a manifest an importer wrote: its lines, and each checked against the shipped JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_posbias.data.manifest import SCHEMA_PATH


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def check_schema(path: Path) -> None:
    """Every line of the manifest at ``path`` validates against the schema (skipped without jsonschema)."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text())
    for line in lines_of(path):
        jsonschema.validate(line, schema)
