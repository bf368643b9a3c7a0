"""Positional bias in multi-video summarization (the multi-video paper).

Each test runs (or reuses) the positional probe for one model and one configuration
(domain × duration × P; variants marked slow) and asserts on a Verdict:

* ``dpb``: |DPB| <= threshold (P = 2 and 4);
* ``meg``: |MEG| <= threshold (P = 4 only);
* ``coverage``: mean coverage >= floor;
* ``contamination``: share of slots more similar to another video's reference <= threshold.

Confidence intervals are cluster bootstraps over video groups. With ``--baseline`` each
gate is a paired non-inferiority comparison on the same (group, order) instances.
"""

from __future__ import annotations

import pytest

from pytest_posbias.gates import positional_verdict
from pytest_posbias.run.suite_params import POSITIONAL_VARIANTS, positional_spec


def _gate(run, gate, model, config, posbias_gate, **variant):
    before = run.calls()
    spec = positional_spec(run.probe_settings("positional"), *config, **variant)
    posbias_gate(positional_verdict(run, gate, model, spec), calls=run.engine.stats.since(before))


@pytest.mark.dpb
def test_dpb(posbias_run, posbias_model, positional_config, posbias_gate):
    _gate(posbias_run, "dpb", posbias_model, positional_config, posbias_gate)


@pytest.mark.meg
def test_meg(posbias_run, posbias_model, positional_config_p4, posbias_gate):
    _gate(posbias_run, "meg", posbias_model, positional_config_p4, posbias_gate)


@pytest.mark.coverage
def test_coverage(posbias_run, posbias_model, positional_config, posbias_gate):
    _gate(posbias_run, "coverage", posbias_model, positional_config, posbias_gate)


@pytest.mark.contamination
def test_contamination(posbias_run, posbias_model, positional_config, posbias_gate):
    _gate(posbias_run, "contamination", posbias_model, positional_config, posbias_gate)


@pytest.mark.slow
@pytest.mark.meg
def test_meg_variant(posbias_run, posbias_model, positional_variant_config, posbias_gate):
    config, variant = positional_variant_config
    _gate(posbias_run, "meg", posbias_model, config, posbias_gate, **POSITIONAL_VARIANTS[variant])


@pytest.mark.slow
@pytest.mark.dpb
def test_dpb_variant(posbias_run, posbias_model, positional_variant_config, posbias_gate):
    config, variant = positional_variant_config
    _gate(posbias_run, "dpb", posbias_model, config, posbias_gate, **POSITIONAL_VARIANTS[variant])
