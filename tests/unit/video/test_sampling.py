"""Frame samplers against independently written formulas and deployed harness examples."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pytest_posbias.errors import ConfigError, FrameRangeError
from pytest_posbias.video.sampling import frame_indices, polyphase_grids

TS = range(1, 3001)
BS = range(1, 65)


def _left_float(T, b, phase):
    # independent: float arithmetic (exact here: T, b <= 3000 keep every value far from
    # an integer unless it is one) and Python's floor
    return [math.floor((i + phase) * T / b) for i in range(b)]


@pytest.mark.parametrize(("phase", "t_step"), [(0.0, 1), (0.25, 7), (0.75, 7)])
def test_left_equals_formula_on_full_range(phase, t_step):
    for T in range(1, 3001, t_step):
        for b in BS:
            assert frame_indices(T, b, convention="left", phase=phase) == _left_float(T, b, phase), (T, b)


def test_midpoint_is_left_with_half_phase():
    for T in TS:
        for b in BS:
            assert frame_indices(T, b, convention="midpoint") == _left_float(T, b, 0.5)


@pytest.mark.parametrize("num,den", [(1, 3), (2, 3), (1, 6), (5, 6)])
def test_rational_phases_are_exact(num, den):
    ph = Fraction(num, den)
    for T in range(1, 3001, 37):
        for b in BS:
            want = [math.floor(Fraction(i * den + num, den) * T / b) for i in range(b)]
            assert frame_indices(T, b, convention="left", phase=num / den) == want
            assert frame_indices(T, b, convention="left", phase=ph) == want
            assert frame_indices(T, b, convention="left", phase=f"{num}/{den}") == want


def test_endpoint_is_linspace_rounded_half_to_even():
    for T in TS:
        for b in BS:
            want = [int(v) for v in np.round(np.linspace(0, T - 1, b))]
            assert frame_indices(T, b, convention="endpoint") == want


def test_endpoint_follows_linspace_floats_not_exact_rationals():
    # documented decision: np.linspace gives 7.4999... where the exact value is 7.5 -> 7, not 8
    idx = frame_indices(16, 23, convention="endpoint")
    exact = [round(Fraction(i * 15, 22)) for i in range(23)]
    assert idx != exact
    assert sum(a != e for a, e in zip(idx, exact, strict=True)) == 1


def test_fps_decimates_then_endpoint():
    for T, fps in [(300, 30.0), (301, 29.97), (90, 6.0), (5, 25.0), (1000, 24.0)]:
        per_second = [math.floor(k * fps) for k in range(0, 10**6) if math.floor(k * fps) <= T - 1]
        for b in (1, 4, 8, 16, 32):
            pos = np.round(np.linspace(0, len(per_second) - 1, b)).astype(int)
            assert frame_indices(T, b, convention="fps", fps=fps) == [per_second[p] for p in pos]


def test_harness_presets_documented_examples():
    assert frame_indices(300, 8, convention="lmms-eval") == [0, 42, 85, 128, 170, 213, 256, 299]
    assert frame_indices(300, 8, convention="videostf") == [0, 42, 85, 128, 170, 213, 256, 299]
    assert frame_indices(300, 8, convention="internvl") == [18, 55, 93, 130, 168, 205, 242, 280]


def test_lmms_eval_and_vlmevalkit_formulas_full_range():
    for T in range(1, 3001, 11):
        for b in BS:
            want = list(np.linspace(0, T - 1, b, dtype=int))
            assert frame_indices(T, b, convention="lmms-eval:backend=decord") == want
            assert frame_indices(T, b, convention="lmms-eval") == sorted(set(want))  # pyav: unique frames
            step = T / (b + 1)
            assert frame_indices(T, b, convention="vlmevalkit") == [int(i * step) for i in range(1, b + 1)]
            seg = (T - 1) / b
            assert frame_indices(T, b, convention="internvl") == [int(seg / 2 + np.round(seg * i)) for i in range(b)]


def test_qwen_vl_utils_matches_torch_linspace():
    torch = pytest.importorskip("torch")
    for T in range(2, 3001, 13):
        for b in range(2, min(T, 64) + 1):
            n = round(b / 2) * 2  # qwen-vl-utils round_by_factor: Python round, half to even
            if n > T:
                continue
            want = torch.linspace(0, T - 1, n).round().long().tolist()
            assert frame_indices(T, b, convention="qwen-vl-utils") == want, (T, b)


def test_polyphase_grids_interleave_to_dense_grid():
    for T in range(1, 800, 3):
        for b in (1, 4, 8, 16):
            for S in (2, 3, 5):
                grids = polyphase_grids(T, b, S)
                dense = frame_indices(T, S * b, convention="left")
                inter = [grids[k % S][k // S] for k in range(S * b)]
                assert inter == dense
                for s in range(S):
                    assert grids[s] == frame_indices(T, b, convention="left", phase=Fraction(s, S))


def test_origin_shift_half_spacing():
    # S = 3, b = 8, shift by half the spacing between phases: 1/6 of a grid step = T/48 frames
    T = 480
    shifted = polyphase_grids(T, 8, 3, origin=Fraction(1, 6))
    assert shifted[0] == [10 + 60 * i for i in range(8)]
    assert shifted[1] == [30 + 60 * i for i in range(8)]
    plain = polyphase_grids(T, 8, 3)
    assert all(a - p == 10 for g, h in zip(shifted, plain, strict=True) for a, p in zip(g, h, strict=True))


def test_start_end_window_mvbench_bounds():
    # a 30 fps, 10 s clip, window 2 s .. 6 s -> frames 60 .. 180
    idx = frame_indices(300, 8, convention="left", fps=30, start=2.0, end=6.0)
    assert idx == [60 + (i * 121) // 8 for i in range(8)]
    iv = frame_indices(300, 8, convention="internvl", fps=30, start=2.0, end=6.0)
    seg = 120 / 8
    assert iv == [int(60 + seg / 2 + np.round(seg * i)) for i in range(8)]


@pytest.mark.parametrize("convention", ["left", "fps", "videostf", "internvl", "qwen-vl-utils", "vlmevalkit"])
@pytest.mark.parametrize("bad", [{"start": float("nan")}, {"end": float("inf")}, {"start": float("-inf")},
                                 {"end": True}, {"start": "2"}])
def test_window_seconds_must_be_finite_numbers(convention, bad):
    """A NaN, infinite or non-numeric window bound is a ConfigError, never a crash or the whole clip."""
    with pytest.raises(ConfigError, match="`(start|end)` must be a finite number"):
        frame_indices(300, 8, convention=convention, fps=30.0, **bad)


def test_window_outside_clip_and_bad_arguments():
    with pytest.raises(FrameRangeError, match="lies after the clip's end"):
        frame_indices(300, 8, convention="left", fps=30, start=20.0, end=25.0)
    with pytest.raises(FrameRangeError, match="empty or reversed"):
        frame_indices(300, 8, convention="left", fps=30, start=5.0, end=2.0)
    with pytest.raises(ConfigError, match="`fps` is required"):
        frame_indices(300, 8, convention="left", start=1.0)
    with pytest.raises(ConfigError, match="`convention` must be one of"):
        frame_indices(300, 8, convention="uniform")
    with pytest.raises(ConfigError, match="`b` must be an integer >= 1"):
        frame_indices(300, 0, convention="left")
    with pytest.raises(ConfigError, match="`phase` must lie in"):
        frame_indices(300, 8, convention="left", phase=1.0)
    with pytest.raises(ConfigError, match="applies to the 'left' convention only"):
        frame_indices(300, 8, convention="endpoint", phase=0.5)
    with pytest.raises(ConfigError, match="`fps` is required for the 'fps' convention"):
        frame_indices(300, 8, convention="fps")
    with pytest.raises(ConfigError, match="sampler 'qwen-vl-utils': 0 frames"):
        frame_indices(300, 1, convention="qwen-vl-utils")
