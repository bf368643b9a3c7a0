"""Search property of a video description (``probes.search_stressor``): what each stressor edit
does to the sampled frame list and how the frame strip marks it, the property's lost queries
(failed calls, unusable descriptions), a break as a repetitive description (VideoSTF's flag),
stored counterexamples checked on decoding, and the search of ``sim:looping`` end to end on the
small synthetic set."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_posbias import strategies as S
from pytest_posbias.engine import Generation
from pytest_posbias.errors import ConfigError
from pytest_posbias.probes.search import run_search
from pytest_posbias.probes.search_stressor import StressorProperty, apply_edits
from pytest_posbias.probes.stressor import select_videos
from pytest_posbias.video.frames import FrameSpec

from .conftest import open_context

LOOP = "the cat sat on the mat " * 4  # a 5-gram repeated: VideoSTF's repetition flag
PLAIN = "a red circle moves left across a blue square in the frame"


def test_apply_edits_semantics():
    """Each edit kind on a 6-frame list: the frames shown after it and the strip's changed and gap marks."""
    from pytest_posbias.probes.search_stressor import apply_edits
    from pytest_posbias.video.frames import FrameSpec

    clean = FrameSpec.synthetic("noise", 6, seed=1)
    foreign = FrameSpec.synthetic("black", 6)
    E = S.StressorEdit
    same, strip = apply_edits(clean, (E("reverse", (2,)), E("delete", ())), foreign)
    assert same is clean and not any(s["changed"] for s in strip)
    spec, strip = apply_edits(clean, (E("replace", (0, 3), (1, 5)),), foreign)
    assert spec.indices == [1, 1, 2, 5, 4, 5] and [s["changed"] for s in strip] == [1, 0, 0, 1, 0, 0]
    spec, strip = apply_edits(clean, (E("delete", (1, 4)),))
    assert spec.indices == [0, 2, 3, 5] and [s["gap_before"] for s in strip] == [0, 1, 0, 1]
    spec, strip = apply_edits(clean, (E("add", (0, 6), (5, 2)),))
    assert spec.indices == [5, 0, 1, 2, 3, 4, 5, 2] and [s["changed"] for s in strip] == [1, 0, 0, 0, 0, 0, 0, 1]
    spec, strip = apply_edits(clean, (E("reverse", (1, 2, 3)),))
    assert spec.indices == [0, 3, 2, 1, 4, 5] and [s["changed"] for s in strip] == [0, 1, 0, 1, 0, 0]
    spec, strip = apply_edits(clean, (E("shuffle", (0, 2, 4)),))
    assert spec.indices == [4, 1, 0, 3, 2, 5]
    spec, strip = apply_edits(clean, (E("foreign", (2,), (4,)),), foreign)
    assert spec.frames[2] == (1, 4) and spec.sources[1] == foreign.sources[0] and strip[2]["source"] == "foreign"


def test_looping_breaks_with_one_stressed_frame(tmp_path, small_set):
    """sim:looping breaks at one stressed frame (its clean frames do not loop), and the cached answer loops."""
    from pytest_posbias.metrics import max_ngram_count
    from pytest_posbias.probes.search_corpus import corpus_for
    from pytest_posbias.probes.search_stressor import StressorProperty
    from pytest_posbias.probes.stressor import select_videos

    ctx = open_context(tmp_path, small_set, "sim:looping", "r1")
    videos = select_videos(ctx, ctx.manifest(), 10)
    spec = ctx.stressor_spec(16)
    props = [StressorProperty(ctx, "sim:looping", v, videos[(i + 1) % 10], spec) for i, v in enumerate(videos)]
    res = [run_search(ctx, p, corpus=corpus_for(ctx), seed=0) for p in props]
    broken = [(p, r) for p, r in zip(props, res, strict=True) if r.status == "broken"]
    assert len(broken) >= 3 and all(r.status in ("broken", "excluded") for r in res)
    for p, r in broken:
        m = r.minimal
        assert m is not None and m["stressed_frames"] == 1  # the clean frames (0 stressed) do not loop, so 1 is the fewest
        assert max_ngram_count(m["reference_text"], 5) <= 1
        edits = tuple(S.StressorEdit.from_json(e) for e in m["edits"])
        again = ctx.engine.run([p.request(edits)])[0]  # the same request, from the cache: it loops
        assert max_ngram_count(again.text, 5) > 1 and again.text.startswith(m["answer_text"][:200])
        assert sum(f["changed"] or f["gap_before"] for f in m["frames"]["perturbed"]) >= 1
    ctx.close()


@given(edits=S.stressor_compositions(6, max_edits=3, max_frames=4, kinds=("replace", "foreign", "reverse", "shuffle")))
@settings(max_examples=80, deadline=None)
def test_edits_in_place_keep_the_length_and_the_strip_names_every_frame(edits):
    """Replace, foreign, reverse and shuffle edit frames in place: as many frames out as in, one strip
    entry per frame naming the index shown, no gaps; a frame the strip calls unchanged is the clean
    frame of its position."""
    clean = FrameSpec.synthetic("noise", 6, seed=1)
    foreign = FrameSpec.synthetic("black", 6)
    spec, strip = apply_edits(clean, edits, foreign)
    assert len(spec.indices) == len(strip) == 6
    assert [s["index"] for s in strip] == list(spec.indices)
    assert not any(s["gap_before"] for s in strip)
    for p, s in enumerate(strip):
        if not s["changed"]:
            assert s["source"] == "clip" and s["index"] == clean.indices[p]


@given(positions=st.lists(st.integers(0, 20), min_size=1, max_size=8))
@settings(max_examples=40, deadline=None)
def test_delete_never_leaves_fewer_than_one_frame(positions):
    """Deleting positions (wrapping modulo the length) removes the distinct ones, keeping at least one frame."""
    clean = FrameSpec.synthetic("noise", 3, seed=2)
    spec, strip = apply_edits(clean, (S.StressorEdit("delete", tuple(positions)),))
    gone = {p % 3 for p in positions}
    assert len(spec.indices) == max(1, 3 - len(gone)) == len(strip)


def test_a_foreign_edit_without_a_foreign_video_is_refused():
    """A foreign frame needs another video's frames; without them the edit is an error saying so."""
    clean = FrameSpec.synthetic("noise", 4, seed=1)
    with pytest.raises(ConfigError, match="foreign"):
        apply_edits(clean, (S.StressorEdit("foreign", (1,), (0,)),))


def _prop(ctx, foreign=True):
    videos = select_videos(ctx, ctx.manifest(), 2)
    return StressorProperty(ctx, "sim:unbiased", videos[0], videos[1] if foreign else None, ctx.stressor_spec(16))


def test_failed_calls_and_unusable_descriptions_are_lost_queries(run_context):
    """A failed call, an empty answer or punctuation is no description: a lost query, never a clean one."""
    prop = _prop(run_context())
    for gen in (Generation(finish_reason="error", error="HTTP 503"), Generation(""), Generation("... !!! ...")):
        out = prop.score((), gen, None)
        assert not out.ok and not out.broken and out.why_lost
    assert prop.score((), Generation(finish_reason="error", error="HTTP 503"), None).why_lost == "HTTP 503"


def test_a_description_that_echoes_the_prompt_is_a_lost_query(run_context):
    """The stressor probe's rule: the prompt (or a run of it) given back is no description, a lost query
    saying ``prompt_echo``, never a clean one; a description sharing the prompt's words holds."""
    prop = _prop(run_context())
    for text in ("Please describe this video in detail.", "Describe this video in detail."):
        out = prop.score((), Generation(text, 1, "stop"), None)
        assert not out.ok and not out.broken and "prompt_echo" in out.why_lost
    assert prop.score((), Generation("The video shows in detail a red disc moving left.", 1, "stop"), None).ok


def test_a_repetitive_description_breaks_the_property(run_context):
    """The property breaks on VideoSTF's repetition flag; a benign description holds."""
    prop = _prop(run_context())
    edits = (S.StressorEdit("reverse", (1, 2, 3)),)
    assert prop.score(edits, Generation(LOOP), None).broken
    held = prop.score(edits, Generation(PLAIN), None)
    assert held.ok and not held.broken and held.answer["repeats"] is False
    assert prop.size(edits) == float(S.stressed_frames(edits))


def test_the_reference_is_the_clean_request_and_a_search_request_names_its_edits(run_context):
    """The empty composition is the clean frames (condition ``clean``); a search request carries its edits."""
    prop = _prop(run_context())
    clean = prop.request(prop.reference_value())
    edits = (S.StressorEdit("delete", (0,)),)
    searched = prop.request(edits)
    assert clean.meta["condition"] == "clean" and "edits" not in clean.meta
    assert searched.meta["condition"] == "search" and searched.meta["edits"] == [e.to_json() for e in edits]
    assert prop.corpus_key() == f"stressor[16f]|{prop.item_id}"


def test_stored_counterexamples_are_checked_on_decoding(run_context):
    """A stored foreign edit is refused when this run has no foreign video; an entry whose positions
    lack their sources is refused, not a crash; a good one round-trips."""
    ctx = run_context()
    with_foreign, alone = _prop(ctx), _prop(ctx, foreign=False)
    edits = (S.StressorEdit("foreign", (1,), (2,)), S.StressorEdit("shuffle", (0, 2, 4)))
    assert with_foreign.decode(with_foreign.encode(edits)) == edits
    with pytest.raises(ConfigError, match="foreign video"):
        alone.decode(with_foreign.encode(edits))
    broken = {"edits": [{**edits[0].to_json(), "sources": []}]}
    with pytest.raises((ConfigError, ValueError)):
        with_foreign.decode(broken)


def test_foreign_edits_take_another_clip_never_a_second_item_of_the_same_clip(run_context, monkeypatch):
    """Two items of one clip beside a third clip: both take their foreign frames from the third; alone with its
    twin, an item has no foreign video and no foreign edit (its own frames would be no foreign frames)."""
    import dataclasses

    from pytest_posbias.data.manifest import Manifest
    from pytest_posbias.probes.search_run import _props

    ctx = run_context()
    m = ctx.manifest()
    a, b = sorted(m.videos)[:2]
    twin = dataclasses.replace(m.videos[a], id=f"{a}-again")
    settings = {"max_edits": 2, "max_frames": 2}
    for videos, other in (({a: m.videos[a], twin.id: twin, b: m.videos[b]}, m.videos[b].path),
                          ({a: m.videos[a], twin.id: twin}, None)):
        monkeypatch.setattr(ctx, "manifest", lambda videos=videos: Manifest(m.path, videos=videos))
        props, n, unusable = _props(ctx, "sim:unbiased", "stressor", len(videos), settings)
        assert n == len(videos) and not unusable
        for p in props:
            if p.item.id in (a, twin.id):
                assert (p.foreign_item.path if p.foreign_item is not None else None) == other, p.item.id
