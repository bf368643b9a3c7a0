"""The stressor probe's results (probes.stressor): failed calls are never clean outputs, the attack
walk stops at its query cap and loses the video where it meets a failed call, and amplification
counts the videos whose clean output already repeats."""

from __future__ import annotations

import math

import pytest

from pytest_posbias.probes.stressor import StressorResult, StressorSpec, TextStats

LOOP = "the cat sat on the mat " * 4  # a 5-gram repeated: RR flag set
PLAIN = "a red circle moves left across a blue square in the frame"


def _result(clean, variants, cap=30):
    """A stressor result from (text, ok) pairs: ``clean`` per video, ``variants`` per video."""
    def ts(pairs):
        return TextStats([t for t, _ in pairs], ["stop"] * len(pairs), [ok for _, ok in pairs])

    spec = StressorSpec(videos=len(clean), frames=32, trials=len(variants[0]), attack_cap=cap)
    r = StressorResult("sim:test", spec, [f"v{i}" for i in range(len(clean))], ts(clean), planned=len(clean))
    r.variants["delete1"] = [ts(v) for v in variants]
    r.variants["shuffle"] = [ts(v) for v in variants]
    return r


def test_failed_calls_are_not_clean_outputs():
    r = _result([("", False), (PLAIN, True)], [[("", False)] * 4, [(LOOP, True), ("", False), (PLAIN, True), ("", False)]])
    assert r.clean.valid.tolist() == [False, True]
    assert r.clean.summary()["n"] == 1 and r.clean.summary()["failed"] == 1
    amp = r.amplification("shuffle")
    assert math.isnan(amp[0])  # clean call failed: the video is lost, not "no amplification"
    assert amp[1] == pytest.approx(0.5)  # 1 of the 2 measured variants repeats; failed ones excluded


def test_the_attack_walk_stops_at_the_cap_for_delete1_too():
    """Delete-1 walked all T variants; every walk stops at ``attack_cap``."""
    walk = [(PLAIN, True)] * 31 + [(LOOP, True)]  # the first repetitive output is query 32
    r = _result([(PLAIN, True)], [walk], cap=30)
    for s in ("delete1", "shuffle"):
        a = r.attack(s)
        assert a["attacked"] == 1 and a["successes"] == 0 and a["asr"] == 0.0
    r2 = _result([(PLAIN, True)], [walk], cap=32)
    assert r2.attack("delete1")["successes"] == 1 and r2.attack("delete1")["aq"] == 32


def test_an_attack_walk_that_meets_a_failed_call_is_lost_not_a_defence():
    r = _result([(PLAIN, True), (PLAIN, True)], [[(PLAIN, True), ("", False), (LOOP, True)], [(PLAIN, True)] * 3])
    out, lost = r.attack_outcomes("shuffle")
    assert out == [0.0] and lost == 1


def test_amplification_counts_videos_whose_clean_output_repeats():
    """RR stressed − RR clean over every measured video (VideoSTF). Restricting to clean-benign videos
    selects on the clean outcome and, for loops that are random per request, reads regression to
    the mean as amplification; so a clean-repetitive video counts, with d = share − 1."""
    r = _result([(LOOP, True), (PLAIN, True)], [[(LOOP, True), (PLAIN, True)], [(LOOP, True), (PLAIN, True)]])
    amp = r.amplification("shuffle")
    assert amp[0] == pytest.approx(-0.5) and amp[1] == pytest.approx(0.5)
    from pytest_posbias.gates import stressor_measurement

    m = stressor_measurement(r, "stressor", "shuffle")
    assert (m.planned, m.measured, sum(m.lost.values())) == (2, 2, 0)
