"""Temporal stressors and output repetition (VideoSTF).

* ``repetition``: RR (n = 5, τ = 1) on clean videos <= threshold, per frame count (exact
  binomial); with the decoding sweep as a slow parameter;
* the controls (VideoSTF's count, pixel and visual-input controls, marker ``repetition``): run
  and reported beside the clean repetition rate, no gate; a test of their own, so under ``-n``
  they are a probe group of their own, apart from the clean repetition gate's;
* ``stressor``: the paired amplification of RR under each of the eight stressors
  (Add 1/2, Delete 1/2, Replace 1/2, Reverse, Shuffle) <= threshold (cluster bootstrap over
  videos);
* ``attack``: the black-box attack's success rate over clean-benign videos <= threshold,
  per stressor, with the average number of queries (AQ) reported.
"""

from __future__ import annotations

import json

import pytest

from pytest_posbias.gates import stressor_verdict
from pytest_posbias.gates.measurement import Measurement, apply_floor
from pytest_posbias.plugin import CALLS_KEY


def _gate(run, posbias_gate, *args, **kw):
    before = run.calls()
    posbias_gate(stressor_verdict(run, *args, **kw), calls=run.engine.stats.since(before))


@pytest.mark.repetition
def test_clean_repetition(posbias_run, posbias_model, stressor_frames, posbias_gate):
    _gate(posbias_run, posbias_gate, "repetition", posbias_model, stressor_frames)


@pytest.mark.repetition
def test_stressor_controls(posbias_run, posbias_model, stressor_frames, request):
    """The controls of the stressor probe on every video, for the tested model (and the baseline):
    its ``controls`` part, logged for the report beside the clean repetition rate; no verdict. Its
    model calls count in the run's totals (terminal, ``--posbias-json``, report) as a gate's do."""
    before = posbias_run.calls()
    for who in (posbias_model, *([posbias_run.baseline] if posbias_run.baseline else [])):
        posbias_run.stressor(who, stressor_frames, part="controls")
    calls = posbias_run.engine.stats.since(before)
    request.node.user_properties.append((CALLS_KEY, json.dumps(calls, sort_keys=True)))


@pytest.mark.stressor
def test_stressor_amplification(posbias_run, posbias_model, stressor_frames, stressor_name, posbias_gate):
    _gate(posbias_run, posbias_gate, "stressor", posbias_model, stressor_frames, stressor_name)


@pytest.mark.attack
def test_attack_success_rate(posbias_run, posbias_model, stressor_frames, stressor_name, posbias_gate):
    _gate(posbias_run, posbias_gate, "attack", posbias_model, stressor_frames, stressor_name)


@pytest.mark.slow
@pytest.mark.repetition
def test_repetition_under_decoding_setting(posbias_run, posbias_model, decoding_setting, posbias_gate):
    from pytest_posbias.probes.stressor import decoding_sweep
    from pytest_posbias.stats import rate_verdict

    before = posbias_run.calls()
    spec = posbias_run.stressor_spec(posbias_run.probe_settings("stressor")["frames"][0])
    stats = decoding_sweep(posbias_run, posbias_model, spec, posbias_run.manifest(), decoding_setting)
    flags = stats.flags[stats.valid]  # failed or empty outputs are lost units, never non-repetitive ones
    v = rate_verdict(int(flags.sum()), int(flags.size), name=f"repetition rate under {decoding_setting}",
                     threshold=posbias_run.threshold("repetition", posbias_model), mode=posbias_run.mode,
                     alpha=posbias_run.alpha, unit="videos", extra={"gate": "repetition", "setting": decoding_setting,
                                                                    **stats.summary()})
    m = Measurement("videos", len(stats.ok), int(stats.valid.sum()), {"failed_or_empty_outputs": stats.failed},
                    calls=len(stats.ok), failed_calls=stats.failed)
    posbias_gate(apply_floor(v, m, floor=posbias_run.floor), calls=posbias_run.engine.stats.since(before))


@pytest.mark.slow
@pytest.mark.repetition
def test_requery_remedy_recovers_flagged_outputs(posbias_run, posbias_model, posbias_gate):
    """The re-query remedy (VideoSTF appendix C.6): reported, gated on the clean RR it starts from."""
    from pytest_posbias.probes.stressor import remedy

    before = posbias_run.calls()
    frames = posbias_run.probe_settings("stressor")["frames"][0]
    res = posbias_run.stressor(posbias_model, frames, part="clean")
    out = remedy(posbias_run, posbias_model, res, posbias_run.manifest())
    v = stressor_verdict(posbias_run, "repetition", posbias_model, frames)
    from dataclasses import replace

    posbias_gate(replace(v, extra={**v.extra, "remedy": out}), calls=posbias_run.engine.stats.since(before))
