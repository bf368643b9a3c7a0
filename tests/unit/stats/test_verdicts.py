"""The verdict record (``stats.verdicts``)."""

from __future__ import annotations

from pytest_posbias import stats as S


def test_verdict_round_trips_through_dict():
    v = S.rate_verdict(7, 50, name="order", threshold=0.15, extra={"k": 7})
    w = S.Verdict.from_dict(v.to_dict())
    assert w == v


def test_a_bool_threshold_is_refused_not_read_as_one():
    """A bool threshold (a YAML/TOML slip such as `meg = true`) is a ConfigError, not a region of ±1."""
    import numpy as np
    import pytest

    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="`threshold`"):
        S.mean_verdict(np.linspace(0.2, 0.6, 12), name="MEG", threshold=True, rng=np.random.default_rng(0))
    with pytest.raises(ConfigError, match="`threshold`"):
        S.rate_verdict(3, 10, name="flip", threshold=True)
