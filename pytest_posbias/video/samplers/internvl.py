"""The ``internvl`` preset: InternVL's ``get_index`` (the model cards' ``load_video``).

Follows ``get_index`` at :data:`UPSTREAM` (the same body as ``internvl_chat/eval/mvbench/evaluate_mvbench.py``).
Not on PyPI: ``scripts/upstream_sampler_data.py`` ran it for ``tests/data/upstream/internvl.json.gz``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import ConfigError, FrameRangeError
from .base import SampledIndices

NAME = "internvl"
COMMIT = "2410d1dbf208f0e799459aff9376e5747dbf41a2"
UPSTREAM = f"OpenGVLab/InternVL@{COMMIT}, README.md: get_index(bound, fps, max_frame, first_idx=0, num_segments)"
KNOBS: dict[str, Any] = {}
_NO_BOUND = 100000  # upstream's start/end when no bound is given


def internvl_indices(T: int, b: int, *, fps: float | None, start: float | None, end: float | None,
                     knobs: dict[str, Any]) -> SampledIndices:
    """InternVL ``get_index`` with ``num_segments = b``, ``max_frame = T − 1``, ``first_idx = 0``.

    start_idx = max(0, round(start·fps)), end_idx = min(round(end·fps), T − 1) (Python
    round, half to even; no bound: ±100000 s, so 0 and T − 1); seg = (end_idx − start_idx)/b;
    index i = int(start_idx + seg/2 + np.round(seg·i)). A missing ``start`` or ``end`` takes
    upstream's no-bound value. Every window upstream maps to frames inside the clip gives
    upstream's indices (reversed windows included); one that yields an index outside
    [0, T − 1] (a window past the clip) raises :class:`FrameRangeError`.
    """
    if start is None and end is None:
        s_idx, e_idx = 0, T - 1
    else:
        if fps is None or fps <= 0:
            raise ConfigError(f"sampler {NAME!r}: the clip's `fps` (> 0) is required for a start/end window")
        s = -_NO_BOUND if start is None else start
        e = _NO_BOUND if end is None else end
        s_idx = max(0, round(s * fps))
        e_idx = min(round(e * fps), T - 1)
    seg = float(e_idx - s_idx) / b
    idx = [int(s_idx + seg / 2 + np.round(seg * i)) for i in range(b)]
    if bad := [i for i in idx if not 0 <= i <= T - 1]:
        raise FrameRangeError("<clip>", f"sampler {NAME!r}: window start={start}, end={end} s gives frame "
                                        f"{bad[0]} outside the clip's 0..{T - 1} (upstream get_index would read past "
                                        "the clip)")
    return SampledIndices(idx, {"sampler": NAME, "knobs": {}, "upstream": UPSTREAM})
