"""The public hypothesis strategies: valid values, shrinking toward no change, JSON round trips."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from pytest_posbias import strategies as S
from pytest_posbias.errors import ConfigError

FIND = settings(max_examples=500, database=None, derandomize=True, phases=[Phase.generate, Phase.shrink])
GIVEN = settings(max_examples=60, database=None, derandomize=True, deadline=None,
                 suppress_health_check=list(HealthCheck))


def _bfs_transpositions(k: int) -> dict[tuple[int, ...], int]:
    """Fewest transpositions from the identity to every permutation, by breadth-first search
    (independent of the cycle formula the module uses)."""
    start = tuple(range(k))
    dist = {start: 0}
    frontier = [start]
    while frontier:
        nxt = []
        for p in frontier:
            for i, j in itertools.combinations(range(k), 2):
                q = list(p)
                q[i], q[j] = q[j], q[i]
                t = tuple(q)
                if t not in dist:
                    dist[t] = dist[p] + 1
                    nxt.append(t)
        frontier = nxt
    return dist


def test_cayley_distance_equals_fewest_transpositions():
    for k in (1, 2, 3, 4, 5):
        for perm, d in _bfs_transpositions(k).items():
            assert S.cayley_distance(perm) == d, perm


@given(S.option_orderings(5))
@GIVEN
def test_orderings_are_permutations(perm):
    assert sorted(perm) == [0, 1, 2, 3, 4]


def test_orderings_shrink_to_identity_then_one_transposition():
    assert find(S.option_orderings(5), lambda p: True, settings=FIND) == (0, 1, 2, 3, 4)
    # any change at all: the least is one swap of the first two options
    assert find(S.option_orderings(5), lambda p: p != (0, 1, 2, 3, 4), settings=FIND) == (1, 0, 2, 3, 4)
    # content 0 must reach the last position: one transposition (0 4) suffices and is what it shrinks to
    got = find(S.option_orderings(5), lambda p: p[4] == 0, settings=FIND)
    assert S.cayley_distance(got) == 1 and got[4] == 0


def test_orderings_reach_every_permutation_within_k_minus_one_swaps():
    # the strategy's support: every permutation of 4 is reachable (found by search for each target)
    for target in itertools.permutations(range(4)):
        assert find(S.option_orderings(4), lambda p, t=target: p == t, settings=FIND) == target


@given(S.sampling_phases(max_denominator=7))
@GIVEN
def test_phases_are_exact_fractions_in_unit_interval(ph):
    assert isinstance(ph, Fraction) and 0 <= ph < 1 and ph.denominator <= 7


def test_phases_shrink_to_zero():
    assert find(S.sampling_phases(), lambda f: True, settings=FIND) == 0
    assert find(S.sampling_phases(), lambda f: f > 0, settings=FIND) == Fraction(1, 2)  # q = 1 holds only 0


@given(S.sampling_phases(denominator=3))
@GIVEN
def test_fixed_denominator_gives_the_s_over_S_grid(ph):
    assert ph in (0, Fraction(1, 3), Fraction(2, 3))


def test_samplers_shrink_to_left_at_reference_budget_phase_zero():
    ref = find(S.samplers(8, budgets=(4, 16)), lambda s: True, settings=FIND)
    assert ref == S.SamplerChoice("left", 8, Fraction(0))
    other = find(S.samplers(8, budgets=(4, 16)), lambda s: s.convention != "left", settings=FIND)
    assert other.convention == "midpoint" and other.budget == 8 and other.phase == 0  # the next convention, nothing else
    assert S.SamplerChoice.from_json(other.to_json()) == other


def test_layouts_shrink_to_identity_black_prompt_first():
    ref = find(S.multi_video_layouts(4), lambda lay: True, settings=FIND)
    assert ref == S.Layout((0, 1, 2, 3), "black", "prompt-first", 0)
    text = find(S.multi_video_layouts(4), lambda lay: lay.boundary == "text", settings=FIND)
    assert text == S.Layout((0, 1, 2, 3), "text", "prompt-first", 0)
    moved = find(S.multi_video_layouts(4), lambda lay: lay.order[0] != 0, settings=FIND)
    assert S.cayley_distance(moved.order) == 1 and moved.boundary == "black"
    assert S.Layout.from_json(moved.to_json()) == moved


@given(S.stressor_compositions(16, max_edits=3, max_frames=4))
@GIVEN
def test_stressor_values_are_valid_and_round_trip(edits):
    assert len(edits) <= 3
    for e in edits:
        assert e.kind in S.STRESSOR_KINDS and len(e.positions) <= 4
        if e.kind in ("replace", "foreign", "add"):
            assert len(e.sources) == len(e.positions)
        if e.kind == "replace":
            assert all(s != p for s, p in zip(e.sources, e.positions, strict=True))  # another frame of the clip
        if e.kind == "reverse":
            assert list(e.positions) == list(range(e.positions[0], e.positions[0] + len(e.positions))) if e.positions else True
        assert all(0 <= p <= 16 for p in e.positions)
    assert tuple(S.StressorEdit.from_json(e.to_json()) for e in edits) == edits


def test_stressors_shrink_to_no_change_and_to_the_fewest_frames():
    assert S.stressed_frames(find(S.stressor_compositions(16), lambda c: True, settings=FIND)) == 0
    three = find(S.stressor_compositions(16, max_frames=4), lambda c: S.stressed_frames(c) >= 3, settings=FIND)
    assert S.stressed_frames(three) == 3
    one = find(S.stressor_compositions(16), lambda c: S.stressed_frames(c) >= 1, settings=FIND)
    assert len(one) == 1 and one[0] == S.StressorEdit("replace", (0,), (1,))  # the first kind, first position


def test_change_size():
    assert S.change_size((1, 0, 2)) == 1 and S.change_size((1, 2, 0)) == 2
    assert S.change_size(Fraction(1, 3)) == pytest.approx(1 / 3)
    assert S.change_size((S.StressorEdit("reverse", (3,)), S.StressorEdit("delete", (1, 2)))) == 2
    assert S.change_size(S.Layout((1, 0), "text", "video-first", 1)) == 4


@pytest.mark.parametrize("call, needle", [
    (lambda: S.option_orderings(0), "`k`"),
    (lambda: S.sampling_phases(max_denominator=0), "`max_denominator`"),
    (lambda: S.samplers(8, conventions=("nope",)), "`conventions`"),
    (lambda: S.multi_video_layouts(4, boundaries=("dotted",)), "`boundaries`"),
    (lambda: S.stressor_edits(1), "`T`"),
    (lambda: S.stressor_edits(16, kinds=("melt",)), "`kinds`"),
    (lambda: S.StressorEdit.from_json({"kind": "melt"}), "kind"),
])
def test_bad_arguments_name_the_parameter(call, needle):
    with pytest.raises(ConfigError, match=needle):
        call()


def test_importing_the_package_does_not_import_hypothesis():
    import subprocess
    import sys

    code = "import sys, pytest_posbias, pytest_posbias.config; print('hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


@given(st.data())
@GIVEN
def test_apply_transpositions_matches_cycle_count(data):
    k = data.draw(st.integers(2, 6))
    swaps = data.draw(S.transpositions(k))
    perm = S.apply_transpositions(k, swaps)
    assert sorted(perm) == list(range(k)) and S.cayley_distance(perm) <= len(swaps)
