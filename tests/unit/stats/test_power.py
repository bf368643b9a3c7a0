"""The smallest effect a gate detects with the stated power (stats.power), for a mean and, exactly, for
a rate."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from pytest_posbias import stats as S


def test_detectable_effect_of_a_mean_has_the_stated_power():
    n, sd, t = 40, 0.05, 0.02
    value = S.detectable_effect(kind="mean", n=n, threshold=t, sides="both", sd=sd)
    rng = np.random.default_rng(8)
    x = rng.normal(value, sd, size=(4000, n))
    tstat = (x.mean(axis=1) - t) / (x.std(axis=1, ddof=1) / math.sqrt(n))
    power = float(np.mean(tstat > st.t.isf(0.05, n - 1)))
    assert power == pytest.approx(0.80, abs=0.025)
    assert S.detectable_effect(kind="mean", n=n, threshold=0.25, sides="lower", sd=0.1) < 0.25


def test_detectable_effect_of_a_rate_is_exact():
    p1 = S.detectable_effect(kind="rate", n=60, threshold=0.15)
    k_star = next(k for k in range(61) if st.binom.sf(k - 1, 60, 0.15) < 0.05)
    assert st.binom.sf(k_star - 1, 60, p1) == pytest.approx(0.8, abs=1e-6)
    assert S.detectable_effect(kind="rate", n=1, threshold=0.15) == math.inf
