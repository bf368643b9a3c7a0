"""Recorded pixel operations (video.pixel_ops): each touches only its positions, is the same every
time it is applied, keeps the input array unchanged, and round-trips through its record; cutout
blanks a square of ``fraction`` of the short side; an unknown operation is a named error."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_posbias.errors import ConfigError
from pytest_posbias.video.pixel_ops import PixelOp, apply_pixel_op

OPS = [PixelOp("blur", (1, 3), (("sigma", 2.0),)), PixelOp("noise", (0, 2), (("seed", 7), ("std", 25.0))),
       PixelOp("jpeg", (2,), (("quality", 10),)), PixelOp("cutout", (1,), (("fraction", 0.25), ("seed", 3)))]


def _frames() -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(4, 32, 48, 3), dtype=np.uint8)


@pytest.mark.parametrize("op", OPS, ids=[o.name for o in OPS])
def test_an_operation_changes_its_positions_only_and_the_same_way_each_time(op):
    frames = _frames()
    before = frames.copy()
    out = apply_pixel_op(frames, op)
    assert np.array_equal(frames, before)  # the input is not written
    assert out.shape == frames.shape and out.dtype == np.uint8
    for t in range(len(frames)):
        assert np.array_equal(out[t], frames[t]) == (t not in op.positions), (op.name, t)
    assert np.array_equal(apply_pixel_op(frames, op), out)
    assert PixelOp.from_dict(op.to_dict()) == op


@pytest.mark.parametrize("name", ["noise", "cutout"])
def test_the_seeded_operations_differ_by_seed_and_by_position(name):
    frames = np.full((3, 32, 48, 3), 128, np.uint8)
    a = apply_pixel_op(frames, PixelOp(name, (0, 1), (("seed", 1),)))
    b = apply_pixel_op(frames, PixelOp(name, (0, 1), (("seed", 2),)))
    assert not np.array_equal(a[0], b[0])
    assert not np.array_equal(a[0], a[1])  # the same seed draws another pattern at another position


def test_cutout_blanks_one_square_of_the_fraction_of_the_short_side():
    frames = np.full((1, 40, 64, 3), 200, np.uint8)
    out = apply_pixel_op(frames, PixelOp("cutout", (0,), (("fraction", 0.25), ("seed", 5))))
    ys, xs = np.nonzero((out[0] == 0).all(axis=2))
    assert ys.max() - ys.min() + 1 == xs.max() - xs.min() + 1 == 10  # round(0.25 · 40)
    assert len(ys) == 100 and (out[0] != 0).all(axis=2).sum() == 40 * 64 - 100


def test_an_unknown_operation_is_a_config_error_naming_it():
    with pytest.raises(ConfigError, match="unknown pixel operation 'sharpen'"):
        apply_pixel_op(_frames(), PixelOp("sharpen", (0,)))
