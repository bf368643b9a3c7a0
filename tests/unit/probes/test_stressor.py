"""The stressor probe (``probes.stressor``) on a scripted backend: a description that only echoes
the probe's prompt is a lost unit (``prompt_echo``, ``scoring/usable.py``), counted with its reason,
never a clean non-repeating output, and never cached as an answer; a real description that shares
words with the prompt stays measured."""

from __future__ import annotations

import numpy as np
from support.scripted_backend import ScriptedBackend

from pytest_posbias.engine import Generation
from pytest_posbias.probes.stressor import PROMPT, measured_output, run_stressor
from pytest_posbias.scoring import usable

ECHO = "Describe this video in detail."  # a run of the probe's prompt, "Please describe this video in detail."


def _description(req):
    return f"The video {req.meta['video']} shows in detail a red disc that moves to the left."


def _run(run_context, answer, n=2):
    backend = ScriptedBackend(lambda r: Generation(answer(r), 1, "stop"))
    ctx = run_context(backend=backend)
    res = run_stressor(ctx, "sim:unbiased", ctx.stressor_spec(4), ctx.manifest(), stressors=("reverse",),
                       controls=False, n_videos=n)
    return ctx, res, backend


def test_an_echoed_prompt_is_a_lost_clean_output_and_is_not_cached(run_context):
    """Every clean call answered with the prompt: each clean output lost as ``prompt_echo`` (not
    measured, not a non-repeating output), the variants' real descriptions measured; no echo is a
    row of the cache, each is recorded as an unusable answer."""
    ctx, res, backend = _run(run_context, lambda r: ECHO if r.meta["condition"] == "clean" else _description(r))
    n = len(res.videos)
    assert n == 2
    assert res.clean.ok == [False] * n and res.clean.reasons == [usable.PROMPT_ECHO] * n
    assert res.clean.unusable() == {usable.PROMPT_ECHO: n} and not res.clean.valid.any()
    assert all(s.valid.all() for s in res.variants["reverse"])
    echoed = [r for r in backend.asked if r.meta["condition"] == "clean"]
    keys = ctx.engine.keys(echoed)
    assert ctx.engine.cache.get_many(keys) == {}
    assert {why for _runs, _g, why, _this in ctx.engine.cache.unusable(keys).values()} == {usable.PROMPT_ECHO}
    others = [r for r in backend.asked if r.meta["condition"] != "clean"]
    assert len(ctx.engine.cache.get_many(ctx.engine.keys(others))) == len(others)


def test_the_whole_prompt_echoed_by_a_variant_is_lost_there(run_context):
    """The echo rule holds for every request of the probe, not only the clean ones."""
    _ctx, res, _ = _run(run_context, lambda r: PROMPT if r.meta["condition"] == "reverse" else _description(r))
    assert all(s.ok == [False] and s.reasons == [usable.PROMPT_ECHO] for s in res.variants["reverse"])
    assert res.clean.ok == [True] * len(res.videos)


def test_measured_output_refuses_an_echo_of_the_prompt():
    assert not measured_output(Generation(ECHO, 1, "stop"))
    assert measured_output(Generation("A person describes this video's recipe in detail.", 1, "stop"))


def test_a_video_the_decoding_sweep_cannot_read_is_a_planned_lost_unit(run_context, tmp_path):
    """A selected video whose file is gone is an output of the sweep that failed (planned, lost, named),
    never left out of the measurement's planned count."""
    import dataclasses

    from pytest_posbias.data.manifest import Manifest
    from pytest_posbias.probes.stressor import decoding_sweep

    backend = ScriptedBackend(lambda r: Generation(_description(r), 1, "stop"))
    ctx = run_context(backend=backend)
    m = ctx.manifest()
    a, b = sorted(m.videos)[:2]
    gone = dataclasses.replace(m.videos[b], path=tmp_path / "vanished.mp4")
    manifest = Manifest(m.path, videos={a: m.videos[a], b: gone})
    stats = decoding_sweep(ctx, "sim:unbiased", ctx.stressor_spec(4), manifest, "greedy")
    assert len(stats.ok) == 2 and stats.ok.count(True) == 1 and stats.failed == 1
    assert len(backend.asked) == 1


def test_the_same_description_of_every_video_in_the_decoding_sweep_is_lost_as_constant(run_context):
    """A model that gives every video one description does not look at them: each output of the sweep
    is lost as ``constant_answer`` (as in the probe's clean part), never a measured non-repeating one."""
    from pytest_posbias.probes.stressor import decoding_sweep

    backend = ScriptedBackend(lambda r: Generation("A red disc moves slowly to the left of the frame.", 1, "stop"))
    ctx = run_context(backend=backend)
    stats = decoding_sweep(ctx, "sim:unbiased", ctx.stressor_spec(4), ctx.manifest(), "greedy")
    assert len(stats.ok) >= 2 and not any(stats.ok)
    assert set(stats.reasons) == {usable.CONSTANT}


def test_the_summary_logs_which_clean_outputs_were_measured(run_context):
    """The stressor summary logs ``clean_valid`` beside ``clean_flags`` (a lost output's flag reads 0): the
    report's paired comparison leaves the lost outputs out instead of comparing them as clean."""
    import json

    ctx, _, _ = _run(run_context, lambda r: ECHO if r.meta["condition"] == "clean" else _description(r))
    ctx.runlog.close()
    logged = [json.loads(line) for p in ctx.run_dir.glob("log-*.jsonl") for line in p.read_text().splitlines()]
    [summary] = [r for r in logged if r.get("probe") == "stressor" and r.get("type") == "summary"]
    assert summary["clean_flags"] == [False, False] and summary["clean_valid"] == [False, False]


def _one_video(ctx):
    from pytest_posbias.data.manifest import Manifest

    m = ctx.manifest()
    a = sorted(m.videos)[0]
    return Manifest(m.path, videos={a: m.videos[a]}), a


def test_a_foreign_control_on_a_one_video_set_is_a_lost_unit_never_sent(run_context):
    """With one video there is no other video to take foreign frames from: the foreign control is lost as
    ``no_other_video`` with a problem naming the video, and the model is never asked for it."""
    from pytest_posbias.probes.stressor import NO_FOREIGN

    backend = ScriptedBackend(lambda r: Generation(_description(r), 1, "stop"))
    ctx = run_context(backend=backend)
    manifest, vid = _one_video(ctx)
    res = run_stressor(ctx, "sim:unbiased", ctx.stressor_spec(4), manifest, stressors=("reverse",))
    assert res.controls["foreign"].ok == [False] and res.controls["foreign"].unusable() == {NO_FOREIGN: 1}
    assert not [r for r in backend.asked if r.meta["condition"] == "foreign"]
    assert any(p.startswith(f"video {vid}: foreign: no other video") for p in res.problems)
    assert res.controls["blur"].ok == [True] and all(s.valid.all() for s in res.variants["reverse"])


def test_the_foreign_control_takes_frames_of_another_clip_past_an_item_of_the_same_clip(run_context):
    """Two items of one clip beside a third clip: each of the pair takes its foreign frames from the third
    clip, never from its twin (which would be no foreign frames and lose the unit); only a set whose every
    item shows the same clip loses the control as ``no_other_video``."""
    import dataclasses

    from pytest_posbias.data.manifest import Manifest

    backend = ScriptedBackend(lambda r: Generation(_description(r), 1, "stop"))
    ctx = run_context(backend=backend)
    m = ctx.manifest()
    a, b = sorted(m.videos)[:2]
    twin = dataclasses.replace(m.videos[a], id=f"{a}-again")
    manifest = Manifest(m.path, videos={a: m.videos[a], twin.id: twin, b: m.videos[b]})
    res = run_stressor(ctx, "sim:unbiased", ctx.stressor_spec(4), manifest, stressors=("reverse",))
    assert res.controls["foreign"].ok == [True, True, True], res.problems
    asked = [r for r in backend.asked if r.meta["condition"] == "foreign"]
    assert len(asked) == 3


def test_a_stressor_that_leaves_the_frames_unchanged_is_a_lost_unit(run_context):
    """Reverse and Shuffle of one sampled frame, and the count-matched re-sample at fewer frames, show the
    clean input again: each is lost as ``stressed_input_unchanged`` (never a robust unit), never sent."""
    import dataclasses

    from pytest_posbias.probes.stressor import UNCHANGED

    backend = ScriptedBackend(lambda r: Generation(_description(r), 1, "stop"))
    ctx = run_context(backend=backend)
    spec = dataclasses.replace(ctx.stressor_spec(4), frames=1, trials=3)
    res = run_stressor(ctx, "sim:unbiased", spec, ctx.manifest(), stressors=("reverse", "shuffle"), n_videos=2)
    assert len(res.videos) == 2 and res.clean.ok == [True, True]
    for name in ("reverse", "shuffle"):
        assert all(not s.valid.any() and set(s.reasons) == {UNCHANGED} for s in res.variants[name])
        assert np.isnan(res.amplification(name)).all()  # every variant lost: the video is lost, not robust
    assert res.controls["resample-2"].unusable() == {UNCHANGED: 2}
    assert {r.meta["condition"] for r in backend.asked}.isdisjoint({"reverse", "shuffle", "resample-2"})


def test_a_clip_shorter_than_the_frame_count_is_a_planned_lost_video(run_context):
    """A clip with fewer frames than the probe samples is never padded with repeated frames (whose reversal
    or shuffle could equal the clean input): the video is refused, named and planned, and nothing is sent."""
    import dataclasses

    backend = ScriptedBackend(lambda r: Generation(_description(r), 1, "stop"))
    ctx = run_context(backend=backend)
    manifest, vid = _one_video(ctx)
    count = ctx.store.info(manifest.videos[vid].path).frame_count
    spec = dataclasses.replace(ctx.stressor_spec(4), frames=count + 1)
    res = run_stressor(ctx, "sim:unbiased", spec, manifest, stressors=("reverse", "shuffle"))
    assert res.videos == [] and res.planned == 1 and backend.asked == []
    assert len(res.problems) == 1 and res.problems[0].startswith(f"video {vid}:") and "too short" in res.problems[0]
