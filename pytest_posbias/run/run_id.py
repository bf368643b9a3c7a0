"""The id of a run: its folder under ``<cache>/runs/`` (kept light: the plugin makes one per run)."""

from __future__ import annotations

import datetime as _dt
import os


def new_run_id() -> str:
    """UTC timestamp plus a short random suffix: sortable and unique."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{os.urandom(6).hex()}"  # 48 random bits: runs started in one second never collide
