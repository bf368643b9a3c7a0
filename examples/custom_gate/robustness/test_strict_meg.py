"""A custom gate: the Middle-Edge Gap on our own manifest's groups, stricter than the suite's.

The suite's MEG gate allows |MEG| <= 0.02 (the default threshold). Our product shows four clips
per summary and the middle ones matter as much as the edges, so we gate at |MEG| <= 0.01 on
every P = 4 group configuration of the manifest named by ``[tool.posbias] data`` (or
``--posbias-data``). The probe is the suite's (same prompts, orders, judge, cache), so a run
that also selects the suite's ``meg`` tests pays for the model calls once.

Run: ``pytest robustness -m meg --model qwen3vl8b``.
"""

from __future__ import annotations

import pytest

from pytest_posbias.gates import positional_verdict
from pytest_posbias.run.suite_params import positional_spec, with_thresholds

STRICT_MEG = 0.01


@pytest.mark.meg
def test_meg_strict(posbias_run, posbias_model, positional_config_p4, posbias_gate):
    # positional_config_p4: (domain, bucket, 4) for every P = 4 group configuration of the
    # manifest, one test each (parametrized by the suites' hooks in conftest.py)
    before = posbias_run.calls()
    spec = positional_spec(posbias_run.probe_settings("positional"), *positional_config_p4)
    strict = with_thresholds(posbias_run, meg=STRICT_MEG)
    verdict = positional_verdict(strict, "meg", posbias_model, spec)
    # record the verdict (report, --posbias-json, --posbias-markdown, junit) and fail on it
    posbias_gate(verdict, calls=posbias_run.engine.stats.since(before))
