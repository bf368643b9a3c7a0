"""What the stressor probe measured (``probes.stressor_results``): failed calls are never clean
outputs, the repetition flag is VideoSTF's (largest 5-gram count > 1), the unusable outputs are
counted by reason, amplification counts the videos whose clean output already repeats, the attack
walk stops at its query cap and loses the video where it meets a failed call, and parts of the
probe merge without counting the clean calls twice."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_posbias.errors import PosbiasError
from pytest_posbias.probes.stressor_results import StressorResult, StressorSpec, TextStats, merge_parts, repeats
from pytest_posbias.scoring import usable

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


def _max_5gram(text):
    words = text.split()
    return max(Counter(tuple(words[i:i + 5]) for i in range(len(words) - 4)).values(), default=0)


@given(st.lists(st.sampled_from(["the", "cat", "sat", "on", "mat", "a"]), max_size=30))
@settings(max_examples=60, deadline=None)
def test_repeats_is_a_5gram_seen_twice(words):
    """RR's indicator: some 5 consecutive words occur at least twice (τ = 1), counted independently."""
    text = " ".join(words)
    assert repeats(text) == (_max_5gram(text) > 1)


def test_unusable_outputs_are_counted_by_reason_apart_from_errors():
    """An output of a succeeded call that is not ok is unusable, by its reason (none given: empty);
    a failed call (finish ``error``) is a failure but no unusable output; both are unmeasured."""
    t = TextStats([PLAIN, "", "x y", LOOP, ""], ["stop", "stop", "stop", "stop", "error"],
                  [True, False, False, False, False], [None, None, usable.FEW_WORDS, None, None])
    assert t.unusable() == {usable.EMPTY: 2, usable.FEW_WORDS: 1} and t.empty == 3 and t.failed == 4
    assert t.flags.tolist() == [False] * 5  # the looping text is not measured: no flag
    assert t.measured().texts == [PLAIN] and t.summary()["n"] == 1 and t.summary()["rr"] == 0.0


def test_summary_rates_are_over_the_measured_outputs():
    """Two of three measured outputs repeat (RR 2/3); a LOOP truncated at the token limit is severe."""
    t = TextStats([LOOP, LOOP, PLAIN, LOOP], ["stop", "length", "stop", "error"], [True, True, True, False])
    s = t.summary()
    assert s["n"] == 3 and s["failed"] == 1 and s["rr"] == pytest.approx(2 / 3)
    assert s["severity"]["severe"] == pytest.approx(1 / 3) and s["severity"]["benign"] == pytest.approx(1 / 3)
    assert sum(s["severity"].values()) == pytest.approx(1.0)
    assert s["mean_words"] == pytest.approx((24 + 24 + len(PLAIN.split())) / 3)


_pairs = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=6)  # (repeats, ok)


@given(clean=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=5), data=st.data())
@settings(max_examples=60, deadline=None)
def test_amplification_is_stressed_share_minus_clean_flag_or_nan(clean, data):
    """Per video: mean repeat flag over its ok variants − its clean flag; NaN when its clean call
    failed or no variant was measured (computed independently over generated outcomes)."""
    variants = [data.draw(_pairs) for _ in clean]
    r = _result([(LOOP if rep else PLAIN, ok) for rep, ok in clean],
                [[(LOOP if rep else PLAIN, ok) for rep, ok in v] for v in variants])
    got = r.amplification("shuffle")
    for v, ((crep, cok), var) in enumerate(zip(clean, variants, strict=True)):
        measured = [rep for rep, ok in var if ok]
        if not cok or not measured:
            assert math.isnan(got[v])
        else:
            assert got[v] == pytest.approx(np.mean(measured) - crep)


def test_attack_rate_and_queries_by_hand():
    """Four videos: v0 clean-benign, first loop at query 2; v1 clean-benign, never loops; v2 clean
    output repeats (not attacked); v3 clean-benign, loops at query 1. ASR = 2/3 attacked,
    AQ = (2 + 1)/2 = 1.5; the walks' queries are [2, 1]."""
    r = _result([(PLAIN, True), (PLAIN, True), (LOOP, True), (PLAIN, True)],
                [[(PLAIN, True), (LOOP, True), (PLAIN, True)], [(PLAIN, True)] * 3,
                 [(LOOP, True)] * 3, [(LOOP, True), (PLAIN, True), (PLAIN, True)]])
    a = r.attack("shuffle")
    assert (a["attacked"], a["successes"], a["queries"], a["lost"]) == (3, 2, [2, 1], 0)
    assert a["asr"] == pytest.approx(2 / 3) and a["aq"] == pytest.approx(1.5)
    assert r.attack_outcomes("shuffle") == ([1.0, 0.0, 1.0], 0)


def test_a_video_whose_clean_call_failed_is_not_attacked():
    """No clean output, no clean-benign video: the walk is not replayed and nothing is attacked."""
    r = _result([("", False)], [[(LOOP, True)] * 3])
    a = r.attack("shuffle")
    assert a["attacked"] == 0 and math.isnan(a["asr"]) and a["lost"] == 0


def test_merge_parts_joins_variants_and_counts_each_part_own_errors():
    """The clean part's errors count once: each later part carries the clean outputs' errors too
    (it read the same clean part), so only its own are added; numeric call counts add up."""
    spec = StressorSpec(videos=2, frames=16, trials=2)
    clean = TextStats([PLAIN, ""], ["stop", "error"], [True, False])
    first = StressorResult("m", spec, ["v0", "v1"], clean, errors=1, calls={"made": 2, "engine": "x"}, planned=3)
    a = StressorResult("m", spec, ["v0", "v1"], clean, errors=1 + 2, calls={"made": 4})
    a.variants["shuffle"] = [TextStats([PLAIN], ["stop"]), TextStats([PLAIN], ["stop"])]
    b = StressorResult("m", spec, ["v0", "v1"], clean, errors=1 + 1, calls={"made": 3, "flag": True})
    b.controls["black"] = TextStats([PLAIN, PLAIN], ["stop", "stop"])
    out = merge_parts([first, a, b])
    assert out.errors == 1 + 2 + 1 and out.calls["made"] == 2 + 4 + 3 and out.calls["engine"] == "x"
    assert "flag" not in out.calls  # a bool is no count
    assert set(out.variants) == {"shuffle"} and set(out.controls) == {"black"} and out.planned == 3
    other = StressorResult("m", spec, ["v0", "v2"], clean)
    with pytest.raises(PosbiasError, match="different videos"):
        merge_parts([first, other])


def test_spec_from_settings_takes_the_frame_count_given():
    """The spec at a frame count: the settings' other keys apply, ``frames`` is the one asked for."""
    spec = StressorSpec.from_settings({"trials": 7, "frames": [8, 32]}, 32)
    assert spec.frames == 32 and spec.trials == 7 and spec.attack_cap == StressorSpec().attack_cap
    assert spec.key() != StressorSpec.from_settings({"trials": 7}, 8).key()


def test_a_condition_with_nothing_measured_reports_no_rate():
    """Every call failed: n = 0 and the failures, no RR (not a rate of 0)."""
    t = TextStats(["", ""], ["error", "error"], [False, False])
    assert t.summary() == {"n": 0, "failed": 2} and t.empty == 0


def test_a_video_without_variants_is_lost_not_a_resisted_attack():
    """A clean-benign video with no variant outputs is a lost unit of the attack, not a defence."""
    r = _result([(PLAIN, True)], [[]])
    assert math.isnan(r.amplification("shuffle")[0])
    a = r.attack("shuffle")
    assert a["attacked"] == 0 and a["lost"] == 1


def test_a_walk_cut_by_the_cap_before_a_failed_call_is_a_defence():
    """A walk whose failed call lies past the attack cap ends at the cap: attacked, no success, not lost."""
    r = _result([(PLAIN, True)], [[(PLAIN, True)] * 3 + [("", False)]], cap=3)
    a = r.attack("shuffle")
    assert a["attacked"] == 1 and a["successes"] == 0 and a["lost"] == 0
