"""The measurement floor (gates.measurement): a gate with no unit measured never passes in either mode,
the floor's boundary, and paired measurements count the units both arms measured and name the
baseline's losses."""

from __future__ import annotations

from pytest_posbias.gates.measurement import Measurement, apply_floor, combine, floor_problem
from pytest_posbias.stats import rate_verdict


def _verdict():
    return rate_verdict(0, 8, name="order flip rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")


def test_no_unit_measured_never_passes_in_either_mode():
    m = Measurement("items", planned=8, measured=0, lost={"failed_or_unparseable_answers": 8}, calls=8, failed_calls=8)
    for mode in ("detect", "certify"):
        v = rate_verdict(0, 1, name="x", threshold=0.15, mode=mode)
        out = apply_floor(v, m)
        assert not out.passed
        assert "no measurement: 8 of 8 model calls failed or returned nothing" in out.reason
        assert out.extra["measurement"]["floor_met"] is False


def test_measurement_floor_boundary():
    assert floor_problem(Measurement("items", 100, 95, {"x": 5}), 0.95) is None
    assert "94 of 100" in (floor_problem(Measurement("items", 100, 94, {"x": 6}), 0.95) or "")
    assert floor_problem(Measurement("items", 0, 0), 0.95).startswith("no measurement: no items planned")
    # failed calls past 1 − floor fail even when every unit has some measured outputs
    p = floor_problem(Measurement("videos", 10, 10, calls=100, failed_calls=6), 0.95)
    assert p is not None and "6 of 100" in p
    assert floor_problem(Measurement("videos", 10, 10, calls=100, failed_calls=5), 0.95) is None


def test_a_passing_verdict_with_enough_units_keeps_its_decision():
    v = apply_floor(_verdict(), Measurement("items", 8, 8))
    assert v.passed and v.extra["measurement"]["planned"] == 8


def test_combined_candidate_and_baseline_measurement_names_the_baseline_losses():
    m = combine(Measurement("items", 10, 10), Measurement("items", 10, 7, {"errors": 3}), prefix_b="baseline")
    assert m.measured == 7 and m.lost == {"baseline errors": 3}


def test_paired_measurement_counts_the_units_both_arms_measured():
    """Candidate loses item 1, baseline item 2 (of 20): the paired decision rests on 18, below the floor."""
    m = combine(Measurement("items", 20, 19, {"f": 1}), Measurement("items", 20, 19, {"f": 1}), prefix_b="baseline",
                measured=18)
    assert m.measured == 18 and floor_problem(m, 0.95) is not None
