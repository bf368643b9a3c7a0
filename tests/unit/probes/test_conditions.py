"""The phase probe's conditions: typed, named in one place, and the names are the wire format the
run log, the report and stored results already use."""

from __future__ import annotations

import pytest

from pytest_posbias.probes import conditions as C
from pytest_posbias.probes.conditions import Condition


@pytest.mark.parametrize(("cond", "name"), [
    (Condition("sampler", "midpoint"), "sampler:midpoint"),
    (Condition("budget", "left", 32), "budget:left@32"),
    (Condition("phase", "2"), "phase:2"),
    (Condition("shift", "0"), "shift:0"),
    (Condition("union"), "union"),
    (Condition("union-shift"), "union-shift"),
    (Condition("rerun", "0"), "rerun:0"),
])
def test_names_round_trip(cond, name):
    assert str(cond) == name
    assert Condition.parse(name) == cond


@pytest.mark.parametrize("name", ["", "phase", "phase:", "phase:x", "budget:left", "budget:left@", "budget:@8",
                                  "budget:left@8f", "union:1", "sampler:", "frames:8", "union-shift:0"])
def test_unknown_names_are_refused(name):
    with pytest.raises(ValueError, match="condition|phase index|argument"):
        Condition.parse(name)


def test_a_condition_cannot_be_built_inconsistent():
    with pytest.raises(ValueError, match="frame count"):
        Condition("sampler", "left", 8)
    with pytest.raises(ValueError, match="frame count"):
        Condition("budget", "left")
    with pytest.raises(ValueError, match="kind"):
        Condition("frames", "8")  # type: ignore[arg-type]


def test_the_gates_and_the_probe_ask_for_the_same_conditions():
    assert C.phases(3) == ["phase:0", "phase:1", "phase:2"]
    assert C.fusion_conditions(2) == ["phase:0", "phase:1", "shift:0", "shift:1", "union", "union-shift"]
    # the equivalence gate's single pass: left sampler at 4b frames, last
    assert C.equivalence_conditions(3, 8) == ["phase:0", "phase:1", "phase:2", "budget:left@32"]
    assert Condition.parse(C.equivalence_conditions(3, 8)[-1]).frames == C.EQUIVALENCE_BUDGET_FACTOR * 8
    assert C.sampler_at("fps", 8, 8) == "sampler:fps" and C.sampler_at("fps", 16, 8) == "budget:fps@16"
    assert (C.rerun(0), C.shift(1), C.UNION, C.UNION_SHIFT) == ("rerun:0", "shift:1", "union", "union-shift")
    assert C.sampler("midpoint") == "sampler:midpoint" == C.sampler_at("midpoint", 8, 8)


def test_the_phase_gate_conditions_come_from_the_builders():
    from pytest_posbias.gates import phase_gate_conditions
    from pytest_posbias.probes.phase import PhaseSpec

    spec = PhaseSpec(phases=3, budget=8)

    def cond(s: str) -> str:
        return C.sampler_at(s, 16, spec.budget)

    assert phase_gate_conditions("flip", (16, "left", "fps"), spec, cond) == ["budget:left@16", "budget:fps@16"]
    assert phase_gate_conditions("phase", "0-2", spec, cond) == ["phase:0", "phase:2"]
    assert phase_gate_conditions("phase", "any", spec, cond) == C.phases(3)
    assert phase_gate_conditions("order", None, spec, cond) == ["phase:0"]
    assert phase_gate_conditions("equivalence", None, spec, cond) == C.equivalence_conditions(3, 8)
