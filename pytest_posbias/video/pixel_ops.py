"""Recorded pixel operations (blur, noise, jpeg, cutout), created by :mod:`.stressors` and applied
deterministically by :mod:`.frames` when it materialises a spec.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError


@dataclass(frozen=True)
class PixelOp:
    """A pixel operation applied at output positions (blur, noise, jpeg, cutout)."""

    name: str
    positions: tuple[int, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "positions": list(self.positions), "params": dict(self.params)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PixelOp:
        return cls(str(d["name"]), tuple(int(p) for p in d["positions"]),
                   tuple(sorted(dict(d.get("params", {})).items())))


def apply_pixel_op(frames: NDArray[np.uint8], op: PixelOp) -> NDArray[np.uint8]:
    """Apply a recorded pixel operation to a (T, H, W, 3) uint8 array (deterministic)."""
    from PIL import Image, ImageFilter

    out = frames.copy()
    for p in op.positions:
        f = out[p]
        if op.name == "blur":
            out[p] = np.asarray(Image.fromarray(f).filter(ImageFilter.GaussianBlur(op.param("sigma", 2.0))))
        elif op.name == "noise":
            r = np.random.default_rng([int(op.param("seed", 0)), p])
            out[p] = np.clip(f.astype(np.float32) + r.normal(0, op.param("std", 25.0), f.shape), 0,
                             255).astype(np.uint8)
        elif op.name == "jpeg":
            buf = io.BytesIO()
            Image.fromarray(f).save(buf, format="JPEG", quality=int(op.param("quality", 10)))
            out[p] = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
        elif op.name == "cutout":
            r = np.random.default_rng([int(op.param("seed", 0)), p])
            h, w = f.shape[:2]
            side = max(1, round(op.param("fraction", 0.25) * min(h, w)))
            y = int(r.integers(0, h - side + 1))
            x = int(r.integers(0, w - side + 1))
            out[p, y : y + side, x : x + side] = 0
        else:
            raise ConfigError(f"unknown pixel operation {op.name!r}")
    return out
