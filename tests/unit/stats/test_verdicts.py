"""The verdict record (``stats.verdicts``)."""

from __future__ import annotations

from pytest_posbias import stats as S


def test_verdict_round_trips_through_dict():
    v = S.rate_verdict(7, 50, name="order", threshold=0.15, extra={"k": 7})
    w = S.Verdict.from_dict(v.to_dict())
    assert w == v
