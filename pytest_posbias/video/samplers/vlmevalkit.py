"""The ``vlmevalkit`` preset: VLMEvalKit's ``VideoBaseDataset.save_video_frames``.

Follows :data:`UPSTREAM`. Not on PyPI: ``scripts/upstream_sampler_data.py`` ran it for
``tests/data/upstream/vlmevalkit.json.gz``.
"""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from .base import Knob, SampledIndices, window

NAME = "vlmevalkit"
COMMIT = "e8e78f05f3080fe28154f2130321f17951c3be94"
UPSTREAM = f"open-compass/VLMEvalKit@{COMMIT}, vlmeval/dataset/video_base.py: VideoBaseDataset.save_video_frames"
KNOBS = {
    "nframe": Knob("nframe", "int", None,
                   "upstream `nframe`: frames i·T/(nframe+1), i = 1..nframe; default: the budget"),
    "fps": Knob("fps", "float", None, "upstream `fps` mode: int(duration·fps) frames every clip_fps/fps frames"),
}


def vlmevalkit_indices(T: int, b: int, *, fps: float | None, start: float | None, end: float | None,
                       knobs: dict[str, Any]) -> SampledIndices:
    """Frame indices VLMEvalKit's ``save_video_frames`` reads from a ``T``-frame clip.

    * nframe mode (default, nframe = the budget ``b`` unless the knob is set):
      step = T/(nframe + 1) first, then ``int(i·step)`` for i = 1..nframe (float64, in
      that order: ``int(i·T/(n+1))`` differs by one frame in some cases).
    * fps mode (knob ``fps``): step = clip_fps/fps, ``int(i·step)`` for
      i < int(T/clip_fps·fps). Upstream returns no frames when that count is 0; the
      preset raises instead (a request without frames is a lost unit).

    VLMEvalKit has no seconds window: a ``start``/``end`` window is cut first (MVBench
    bounds, :func:`window`) and the sampler runs on the cut clip; indices stay absolute.
    """
    if "nframe" in knobs and "fps" in knobs:
        raise ConfigError(f"sampler {NAME!r}: knobs `nframe` and `fps` cannot both be set "
                          f"(upstream: 'fps and nframe should not be set at the same time')")
    lo, hi = window(T, fps, start, end)
    n = hi - lo + 1
    if "fps" in knobs:
        if fps is None or fps <= 0:
            raise ConfigError(f"sampler {NAME!r}: knob `fps` needs the clip's `fps` (> 0)")
        required = int(n / fps * knobs["fps"])  # int(total_duration·fps)
        step = fps / knobs["fps"]
        rel = [int(i * step) for i in range(required)]
        if not rel:
            raise ConfigError(f"sampler {NAME!r}: fps mode gives no frames for a {n}-frame clip at {fps} fps "
                              f"with knob fps={knobs['fps']} (int(duration·fps) = 0)")
    else:
        nframe = knobs.get("nframe", b)
        step = n / (nframe + 1)
        rel = [int(i * step) for i in range(1, nframe + 1)]
    return SampledIndices([lo + r for r in rel], {"sampler": NAME, "knobs": dict(knobs), "upstream": UPSTREAM})
