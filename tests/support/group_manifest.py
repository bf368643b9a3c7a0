"""A manifest of groups without video files, for the simulated models' slot draws, which need only
the videos' paths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def group_manifest(folder: Path, groups: Sequence[Sequence[str]]) -> list[list[str]]:
    """Write ``manifest.jsonl`` of one leisure-short configuration's ``groups`` (video ids) beside an
    empty ``videos`` folder; return each group's video paths."""
    (folder / "videos").mkdir(exist_ok=True)
    rows = [{"type": "group", "id": f"syn-leisure-short-P{len(g)}-g{k:02d}", "domain": "leisure", "bucket": "short",
             "P": len(g), "videos": list(g)} for k, g in enumerate(groups)]
    (folder / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [[str(folder / "videos" / f"{v}.mp4") for v in g] for g in groups]
