"""Frame phase and option order in video multiple choice (the phase paper).

* ``flip``: consensus answers differ between two deployed samplers (left endpoint,
  midpoint, endpoint-inclusive, 1 fps) at a budget — rate <= threshold (one-sided exact
  binomial, the paper's H0: flip <= 15%);
* ``phase``: consensus answers differ between phases of one uniform grid (pairs and
  any-of-S), reported beside the measured re-run floor;
* ``order`` (marker ``option_order``): the chosen content changes across the ten option orderings;
* ``fusion``: PhaseFusion changes no more answers than a single pass under an origin
  shift of half the phase spacing (exact McNemar);
* ``equivalence`` (also marked ``fusion``): PhaseFusion (S x b) accuracy is within ±2.5
  points of one pass at 4b frames (TOST clustered by video; passes only when shown).
"""

from __future__ import annotations

import pytest

from pytest_posbias.gates import phase_verdict


def _gate(run, gate, model, which, posbias_gate):
    before = run.calls()
    posbias_gate(phase_verdict(run, gate, model, which), calls=run.engine.stats.since(before))


@pytest.mark.flip
def test_sampler_flip(posbias_run, posbias_model, sampler_pair, posbias_gate):
    _gate(posbias_run, "flip", posbias_model, sampler_pair, posbias_gate)


@pytest.mark.phase
def test_phase_flip(posbias_run, posbias_model, phase_pair, posbias_gate):
    _gate(posbias_run, "phase", posbias_model, phase_pair, posbias_gate)


@pytest.mark.option_order
def test_order_flip(posbias_run, posbias_model, posbias_gate):
    _gate(posbias_run, "order", posbias_model, None, posbias_gate)


@pytest.mark.fusion
def test_phasefusion_under_origin_shift(posbias_run, posbias_model, posbias_gate):
    _gate(posbias_run, "fusion", posbias_model, None, posbias_gate)


@pytest.mark.fusion
@pytest.mark.equivalence
def test_phasefusion_accuracy_equivalent_to_one_pass_at_4b(posbias_run, posbias_model, posbias_gate):
    if not posbias_run.options.confirmatory:
        pytest.skip("confirmatory TOST (certify-type, ~240 items): opt in with --posbias-confirmatory")
    _gate(posbias_run, "equivalence", posbias_model, None, posbias_gate)
