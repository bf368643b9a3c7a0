"""The stressor suite's gates (``gates.stressor``): the videos planned, measured and lost behind the
repetition, stressor and attack gates, the model calls and failed calls they count, and the
arguments they refuse. Results are built by hand (``probes.stressor_results``)."""

from __future__ import annotations

import pytest

from pytest_posbias.errors import ConfigError
from pytest_posbias.gates.stressor import stressor_measurement, stressor_verdict
from pytest_posbias.probes.stressor_results import StressorResult, StressorSpec, TextStats
from pytest_posbias.scoring import usable

LOOP = "the cat sat on the mat " * 4  # a 5-gram repeated: RR flag set
PLAIN = "a red circle moves left across a blue square in the frame"


def _ts(pairs, finish=None):
    """TextStats of (text, ok) pairs; a failed pair is a failed call (finish ``error``) unless
    ``finish`` says otherwise."""
    return TextStats([t for t, _ in pairs], finish or ["stop" if ok else "error" for _, ok in pairs],
                     [ok for _, ok in pairs])


def _result(clean, variants, *, planned=None, cap=30):
    spec = StressorSpec(videos=len(clean), frames=16, trials=len(variants[0]), attack_cap=cap)
    r = StressorResult("sim:test", spec, [f"v{i}" for i in range(len(clean))], _ts(clean),
                       planned=len(clean) if planned is None else planned)
    r.variants["shuffle"] = [_ts(v) for v in variants]
    return r


def test_amplification_measures_every_video_with_a_clean_output_and_a_variant():
    """A clean-repetitive video is measured for the stressor gate (its d is <= 0), none lost."""
    r = _result([(LOOP, True), (PLAIN, True)], [[(LOOP, True), (PLAIN, True)], [(LOOP, True), (PLAIN, True)]])
    m = stressor_measurement(r, "stressor", "shuffle")
    assert (m.planned, m.measured, sum(m.lost.values())) == (2, 2, 0)


def test_repetition_loses_a_video_whose_clean_call_failed_and_names_it():
    """Three clean calls, one failed (an error) and one unusable (empty answer of a succeeded call):
    measured 1 of 4 planned (one video could not be used); failed calls and lost units add up."""
    spec = StressorSpec(videos=4, frames=16, trials=1)
    clean = TextStats([PLAIN, "", ""], ["stop", "error", "stop"], [True, False, False], [None, None, usable.EMPTY])
    r = StressorResult("m", spec, ["v0", "v1", "v2"], clean, planned=4)
    m = stressor_measurement(r, "repetition")
    assert (m.planned, m.measured, m.calls, m.failed_calls) == (4, 1, 3, 2)
    assert dict(m.lost) == {"generation_errors": 1, usable.EMPTY: 1, "unusable_data": 1}
    assert m.measured + sum(m.lost.values()) == m.planned and list(m.examples) == ["v1", "v2"]


def test_stressor_loses_videos_without_a_clean_output_or_any_measured_variant():
    """v0 fine; v1 clean failed; v2 every variant failed. Measured 1; calls = 3 clean + 6 variants,
    failed = 1 clean + 2 + 1 variants."""
    r = _result([(PLAIN, True), ("", False), (PLAIN, True)],
                [[(PLAIN, True), ("", False)], [(PLAIN, True), (LOOP, True)], [("", False), ("", False)]])
    m = stressor_measurement(r, "stressor", "shuffle")
    assert (m.planned, m.measured, m.calls, m.failed_calls) == (3, 1, 9, 4)
    assert dict(m.lost) == {"clean_output_lost": 1, "every_variant_lost": 1, "unusable_data": 0}
    assert list(m.examples) == ["v2"]


def test_attack_plans_the_clean_benign_videos_and_loses_walks_that_hit_a_failure():
    """v0 clean-benign, loops at query 2; v1 clean repeats (not attacked, not lost); v2 clean-benign,
    its walk fails before any loop (lost); v3 clean failed (lost). Planned 4 − 1 = 3, measured 1;
    calls = 1 failed clean call + the two walks of 3 variants; failed = 1 + 1."""
    r = _result([(PLAIN, True), (LOOP, True), (PLAIN, True), ("", False)],
                [[(PLAIN, True), (LOOP, True), (PLAIN, True)], [(PLAIN, True)] * 3,
                 [(PLAIN, True), ("", False), (LOOP, True)], [(LOOP, True)] * 3])
    m = stressor_measurement(r, "attack", "shuffle")
    assert m.unit == "clean-benign videos"
    assert (m.planned, m.measured, m.calls, m.failed_calls) == (3, 1, 1 + 6, 2)
    assert dict(m.lost) == {"clean_output_lost": 1, "walk_hit_a_lost_output": 1, "unusable_data": 0}


def test_the_attack_counts_only_the_capped_walk():
    """Variants past the attack cap are not queried by the walk: not counted as calls or failures."""
    r = _result([(PLAIN, True)], [[(PLAIN, True), (PLAIN, True), ("", False), ("", False)]], cap=2)
    m = stressor_measurement(r, "attack", "shuffle")
    assert (m.measured, m.calls, m.failed_calls) == (1, 2, 0)


@pytest.mark.parametrize("gate", ["stressor", "attack"])
def test_a_stressor_gate_without_a_stressor_is_refused(gate):
    """The stressor and attack gates need the stressor they read; the error says so."""
    r = _result([(PLAIN, True)], [[(PLAIN, True)]])
    with pytest.raises(ConfigError, match="`stressor` is required"):
        stressor_measurement(r, gate)

    class Ctx:
        sequential = False
        baseline = None

        def stressor_spec(self, frames):
            return StressorSpec(frames=frames)

    with pytest.raises(ConfigError, match="`stressor` is required"):
        stressor_verdict(Ctx(), gate, "m", 16)  # type: ignore[arg-type]


def test_an_unknown_gate_is_refused_naming_it():
    """A gate name other than repetition, stressor or attack is an error that names it."""
    r = _result([(PLAIN, True)], [[(PLAIN, True)]])
    with pytest.raises(ConfigError, match="'controls'"):
        stressor_measurement(r, "controls", "shuffle")



@pytest.mark.parametrize("gate, frames", [("controls", 16), ("bogus", 16), ("repetition", 0), ("repetition", -8),
                                          ("repetition", True), ("attack", 16.5)])
def test_a_bad_gate_or_frame_count_is_refused_before_any_call(gate, frames):
    """An unknown gate ran the probe's model calls first; frames = 0 lost every video instead of an error."""

    class Ctx:
        sequential, baseline = False, None

        def stressor_spec(self, frames):
            return StressorSpec(frames=16)

        def stressor(self, *a, **k):
            raise AssertionError("a model call before the arguments were checked")

    with pytest.raises(ConfigError, match=repr(gate) if gate in ("controls", "bogus") else "`frames`"):
        stressor_verdict(Ctx(), gate, "m", frames, "shuffle")  # type: ignore[arg-type]

def _context(tmp_path, manifest, monkeypatch, describe, *, sequential=False):
    """A run context on ``manifest`` whose model answers each stressor request with ``describe(meta)``."""
    from support.scripted_backend import ScriptedBackend

    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.engine import Generation
    from pytest_posbias.run import context as context_module
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run_options import RunOptions

    backend = ScriptedBackend(lambda r: Generation(describe(r.meta)))
    monkeypatch.setattr(context_module, "load_backend", lambda *_a, **_k: (backend, {}))
    pcfg = PosbiasConfig(probes={"stressor": {"videos": 6, "trials": 2, "frames": [8]}})
    return RunContext.create(RunOptions(models=("sim:unbiased",), data=str(manifest), cache=str(tmp_path / "cache"),
                                        sequential=sequential), pcfg, rootdir=tmp_path, worker="main", run_id="r1")


@pytest.mark.parametrize("loops, passed", [(False, True), (True, False)])
def test_the_repetition_gate_fails_a_model_whose_clean_descriptions_loop(tmp_path, small_set, monkeypatch, loops,
                                                                         passed):
    """Clean RR over 6 videos: 0/6 repeating passes, 6/6 fails; every video measured, no call failed."""
    def describe(meta):
        text = f"a description of video {meta['video']} with a red circle and a blue square moving"
        return f"{text} {LOOP}" if loops else text

    ctx = _context(tmp_path, small_set, monkeypatch, describe)
    try:
        v = stressor_verdict(ctx, "repetition", "sim:unbiased", 8)
    finally:
        ctx.close()
    assert v.passed is passed, v.reason
    assert v.extra["measurement"]["measured"] == 6 and v.extra["measurement"]["failed_calls"] == 0
    assert v.extra["rr"] == (1.0 if loops else 0.0)


def test_the_repetition_gate_decides_on_every_clean_output_in_the_sequential_design(tmp_path, small_set, monkeypatch):
    """The stressors draw every video's clean output whatever the look, so the repetition gate decides on all
    of them in the sequential design too (a futility stop at 2 of 6 measured videos would leave the later,
    looping outputs out): the same verdict as the fixed design's on the same outputs."""
    def describe(meta):
        text = f"a description of video {meta['video']} with a red circle and a blue square moving"
        return f"{text} {LOOP}" if int(meta["video"][-1]) % 3 else text

    verdicts = []
    for sequential in (True, False):
        ctx = _context(tmp_path / str(sequential), small_set, monkeypatch, describe, sequential=sequential)
        try:
            verdicts.append(stressor_verdict(ctx, "repetition", "sim:unbiased", 8))
        finally:
            ctx.close()
    seq, fixed = verdicts
    assert seq.n == seq.extra["measurement"]["measured"] == 6, seq.reason
    assert (seq.passed, seq.estimate, seq.p_value) == (fixed.passed, fixed.estimate, fixed.p_value)
