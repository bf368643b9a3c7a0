"""The phase gates (gates.phase): PhaseFusion's equivalence is certified only where it is shown, in
either mode."""

from __future__ import annotations

import numpy as np
import pytest


class _Ctx:
    """The few RunContext members the equivalence gate reads."""

    alpha, mode, n_resamples, floor = 0.05, "detect", 1999, 0.95

    def phase_spec(self):
        from pytest_posbias.probes.phase import PhaseSpec

        return PhaseSpec(items=240, budget=8, phases=3, orderings=1, samplers=("left",), resolution=64, max_new_tokens=4)

    def threshold(self, gate, model):
        return 0.025

    def rng(self, *keys):
        return np.random.default_rng(0)


def _phase_result(n_items, fused_wrong, single_wrong):
    """Text-mode result: the three phase answers vote; ``fused_wrong``/``single_wrong`` items answer 1
    (the truth is 0) in every phase / in the single pass at 32 frames."""
    from types import SimpleNamespace

    items = [SimpleNamespace(id=f"q{i}", video=f"v{i // 5}", answer=0) for i in range(n_items)]
    ph = np.zeros((n_items, 1), dtype=int)
    ph[list(fused_wrong)] = 1
    single = np.zeros((n_items, 1), dtype=int)
    single[list(single_wrong)] = 1
    answers = {f"phase:{s}": ph.copy() for s in range(3)} | {"budget:left@32": single}
    return SimpleNamespace(items=items, condition_answers=answers, condition_probs={}, mode="text", planned=n_items,
                           correct=lambda: np.zeros(n_items, dtype=int))


def test_equivalence_is_certified_only_when_shown_in_either_mode():
    from pytest_posbias.gates import equivalence_verdict, phase_gate_conditions, phase_measurement

    ctx = _Ctx()
    conds = phase_gate_conditions("equivalence", None, ctx.phase_spec(), lambda s: s)
    assert conds[-1] == "budget:left@32"
    # fusion and the single pass differ on a few items, both ways: equivalence shown
    close = _phase_result(240, fused_wrong=range(0, 240, 80), single_wrong=range(40, 240, 80))
    v = equivalence_verdict(ctx, "m", close, conds, phase_measurement(close, conds))
    assert v.passed and v.estimate == 0.0 and not v.inconclusive
    # identical on every item: zero spread gives a zero-width interval, which certifies nothing
    same = _phase_result(240, fused_wrong=range(0, 240, 10), single_wrong=range(0, 240, 10))
    v = equivalence_verdict(ctx, "m", same, conds, phase_measurement(same, conds))
    assert not v.passed and v.inconclusive and v.estimate == 0.0
    # fusion loses 5 points (12 of 240 items right in one pass only): equivalence not shown, in detect mode too
    worse = _phase_result(240, fused_wrong=range(0, 240, 20), single_wrong=())
    v = equivalence_verdict(ctx, "m", worse, conds, phase_measurement(worse, conds))
    assert not v.passed and v.estimate == pytest.approx(-12 / 240)
    assert v.extra["fusion_by"] == "plurality vote" and v.n == 48  # clustered by video


@pytest.mark.parametrize("sequential", [False, True])
def test_phase_gates_with_every_video_unusable_are_not_measured(tmp_path, small_set, sequential):
    """No drawn item usable (every video gone) is a gate not measured, every planned item lost, not a KeyError."""
    import shutil

    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.gates import phase_verdict
    from pytest_posbias.gates.decision import run_decision
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run_options import RunOptions

    shutil.copy(small_set, tmp_path / "manifest.jsonl")  # the videos stay behind: none can be read
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "c"),
                                       data=str(tmp_path / "manifest.jsonl"), sequential=sequential, judge="auto"),
                            PosbiasConfig(probes={"phase": {"items": 12}}), rootdir=tmp_path, worker="t", run_id="gone")
    try:
        for gate, which in (("order", None), ("flip", (8, "left", "midpoint")), ("phase", "any"), ("phase", "0-1"),
                            ("fusion", None), ("equivalence", None)):
            v = phase_verdict(ctx, gate, "sim:unbiased", which)
            m = v.extra["measurement"]
            assert not v.passed and "no measurement" in v.reason, v.reason
            assert m["measured"] == 0 and m["planned"] == m["lost"]["unusable_data"] > 0
            assert run_decision([("t::g", v)]).exit_code == 6
    finally:
        ctx.close()


@pytest.mark.parametrize("gate, which", [("phase", "0-0"), ("phase", "2-2"), ("phase", "0-3"), ("phase", "first"),
                                         ("phase", None), ("flip", (8, "left", "left"))])
def test_a_condition_compared_with_itself_is_refused_before_any_call(gate, which):
    """phase "0-0" or a flip of a sampler against itself compared identical answers: 0 flips, a vacuous pass."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.gates import phase_verdict

    class Ctx(_Ctx):
        sequential, baseline = False, None

        def phase(self, *a, **k):
            raise AssertionError("a model call before the comparison was checked")

    with pytest.raises(ConfigError, match="`which`"):
        phase_verdict(Ctx(), gate, "m", which)


def test_a_sampler_listed_twice_is_never_paired_with_itself():
    """Settings accept a sampler listed twice beside another; its pair with itself made the flip gate a ConfigError."""
    from pytest_posbias.gates.phase import _sampler_pair
    from pytest_posbias.probes.settings import settings_for
    from pytest_posbias.run.suite_params import sampler_pairs

    ph = settings_for("phase", {"samplers": ["left", "left", "midpoint"], "budgets": [8]})
    pairs = sampler_pairs(ph["samplers"], ph["budgets"])
    assert pairs == [(8, "left", "midpoint")]
    for pair in pairs:
        _sampler_pair(pair)
