"""Frame thumbnails of a minimal counterexample, recorded when the search gate decides, as the
report reads the run log alone (docs/search.md): only the minimal counterexample of each broken
item, at most :data:`MAX_WITH_THUMBNAILS` per gate; an unreadable clip gives no image (the report
still lists the frame indices).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .thumbnails import frame_thumbnails, video_thumbnails

if TYPE_CHECKING:
    from ..gate_context import ProbeContext

THUMB_WIDTH = 64
MAX_WITH_THUMBNAILS = 24  # counterexamples per gate that carry thumbnails (the suites search 24 items)


def strip_thumbnails(ctx: ProbeContext, minimal: Mapping[str, Any], *, width: int = THUMB_WIDTH) -> dict[str, str]:
    """``{"<source>:<frame index>" | "video:<id>": JPEG data URI}`` (``width`` px on the long side) for
    ``minimal``, a ``describe()`` record of :mod:`.search_mcq`, :mod:`.search_stressor` or
    :mod:`.search_coverage`: one per distinct frame of its original and perturbed strip (``source``:
    ``clip``, the item's own video, or ``foreign``, the video a ``foreign`` edit draws from), and the
    middle frame of each video of a slot-coverage group."""
    out: dict[str, str] = {}
    frames = minimal.get("frames")
    if isinstance(frames, Mapping):
        wanted: dict[str, set[int]] = {}
        for f in [*frames.get("original", []), *frames.get("perturbed", [])]:
            wanted.setdefault(str(f.get("source", "clip")), set()).add(int(f["index"]))
        paths = {"clip": minimal.get("video_path"), "foreign": minimal.get("foreign_path")}
        for source, idx in sorted(wanted.items()):
            if path := paths.get(source):
                out.update({f"{source}:{i}": uri for i, uri in frame_thumbnails(ctx, str(path), sorted(idx),
                                                                                 width=width).items()})
    for vid in minimal.get("videos") or []:
        if uri := video_thumbnails(ctx, str(vid), (0.5,), width=width)[0]:
            out[f"video:{vid}"] = uri
    return out


__all__ = ["MAX_WITH_THUMBNAILS", "THUMB_WIDTH", "strip_thumbnails"]
