"""The ``--baseline`` MEG comparison at the default sizes is underpowered, and its passing verdicts say
so with the sample they would need (docs/concepts/statistics.md, "Against the previous release").

Placed with ``gates/decision.py`` (``power_note``); the verdict is ``stats/paired.py``'s."""

from __future__ import annotations

import numpy as np

from pytest_posbias.gates.decision import power_note
from pytest_posbias.stats.paired import paired_abs_mean_verdict


def test_passing_baseline_meg_at_default_groups_is_marked_underpowered() -> None:
    rng = np.random.default_rng(11)
    groups = np.arange(48)
    v = paired_abs_mean_verdict(rng.normal(0.0, 0.057, 48), rng.normal(0.0, 0.057, 48), groups, name="MEG",
                                margin=0.01, mode="detect", alpha=0.05)
    assert v.passed
    note = power_note(v)
    assert note.target == 0.02  # 2x the margin
    assert note.underpowered and note.detectable > 0.03
    assert note.n_needed is not None and 300 < note.n_needed < 2000


def test_baseline_meg_at_the_documented_sample_is_not_underpowered() -> None:
    rng = np.random.default_rng(12)
    groups = np.arange(800)
    v = paired_abs_mean_verdict(rng.normal(0.0, 0.057, 800), rng.normal(0.0, 0.057, 800), groups, name="MEG",
                                margin=0.01, mode="detect", alpha=0.05)
    assert v.passed and not power_note(v).underpowered
