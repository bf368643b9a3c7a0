"""Parity of a deployment against a reference (``--posbias-parity REFERENCE``, marker ``parity``).

The same requests go to the tested model and to REFERENCE (any model spec: a checkpoint on the
``hf`` backend, ``vllm:``, ``openai:``, ``sim:``), on the units the other suites build:

* ``parity``: the share of MCQ items whose consensus answer changes between the deployments,
  minus the reference's own re-run floor, <= threshold (exact unconditional paired test);
* ``parity_coverage``: the drop in coverage of the same summaries <= threshold (paired, cluster
  bootstrap over groups);
* ``parity_repetition``: the rise in the clean repetition rate of the same videos <= threshold
  (exact unconditional paired test).

Without a reference the tests are skipped with the way to opt in (an opt-in skip, never a pass).
"""

from __future__ import annotations

import pytest

from pytest_posbias.gates.parity import (
    NO_REFERENCE,
    parity_answers_verdict,
    parity_coverage_verdict,
    parity_repetition_verdict,
)


def _gate(run, posbias_gate, fn, *args):
    if not run.parity:
        pytest.skip(NO_REFERENCE)
    before = run.calls()
    posbias_gate(fn(run, *args), calls=run.engine.stats.since(before))


@pytest.mark.parity
def test_parity_answers(posbias_run, posbias_model, posbias_gate):
    _gate(posbias_run, posbias_gate, parity_answers_verdict, posbias_model)


@pytest.mark.parity
def test_parity_coverage(posbias_run, posbias_model, positional_config, posbias_gate):
    from pytest_posbias.run.suite_params import positional_spec

    spec = positional_spec(posbias_run.probe_settings("positional"), *positional_config)
    _gate(posbias_run, posbias_gate, parity_coverage_verdict, posbias_model, spec)


@pytest.mark.parity
def test_parity_repetition(posbias_run, posbias_model, stressor_frames, posbias_gate):
    _gate(posbias_run, posbias_gate, parity_repetition_verdict, posbias_model, stressor_frames)
