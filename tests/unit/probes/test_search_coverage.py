"""Search property of a multi-video summary (``probes.search_coverage``): per-video coverage under
a layout, read in the group's own video order whatever slot shows each video; a break when a video
covered at or above the floor unperturbed falls below it; lost queries (failed calls, unalignable
answers, judge failures); one seed for every layout of a group; stored layouts checked on decoding.
The run's judge is replaced by one that scores a summary by its words (``good`` 0.9, ``bad`` 0.1,
``judge-error`` no value), so the coverage of each slot is known."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_posbias.engine import Generation
from pytest_posbias.errors import ConfigError
from pytest_posbias.probes.positional import PositionalSpec
from pytest_posbias.probes.search_coverage import CoverageProperty
from pytest_posbias.strategies import Layout
from pytest_posbias.video.compose import VideoPart


class WordJudge:
    def score(self, items):
        def one(summary):
            if "judge-error" in summary:
                return SimpleNamespace(value=None, judge="word", error="judge down")
            return SimpleNamespace(value=0.9 if "good" in summary else 0.1, judge="word", error=None)
        return [one(summary) for _refs, summary in items]


def _prop(ctx, monkeypatch, floor=0.5):
    monkeypatch.setattr(ctx, "judges", lambda: SimpleNamespace(for_style=lambda style: WordJudge()))
    m = ctx.manifest()
    group = m.groups_for("cooking", "short", 2)[0]
    spec = PositionalSpec("cooking", "short", 2, frames=2, resolution=64)
    return group, CoverageProperty(ctx, "sim:unbiased", group, m, spec, floor=floor)


def _answer(first, second):
    return Generation(f"[video0] A {first} summary of what the first video shows. "
                      f"[video1] A {second} summary of what the second video shows.")


@pytest.mark.parametrize("floor", [-0.1, 1.5])
def test_a_floor_outside_0_1_is_refused_naming_it(run_context, monkeypatch, floor):
    """The floor is a coverage: outside [0, 1] it is an error that names the value."""
    with pytest.raises(ConfigError, match=str(floor)):
        _prop(run_context(), monkeypatch, floor)


def test_coverage_is_read_per_video_in_the_groups_order(run_context, monkeypatch):
    """Under the swapped layout slot 0 shows video 1: a "good" first slot is video 1's coverage, so
    the coverage list (in group order) is [bad, good] = [0.1, 0.9]."""
    group, prop = _prop(run_context(), monkeypatch)
    ident = prop.score(prop.reference_value(), _answer("good", "bad"), None)
    swapped = prop.score(Layout((1, 0)), _answer("good", "bad"), ident)
    assert ident.ok and ident.answer["coverage"] == [0.9, 0.1]
    assert swapped.ok and swapped.answer["coverage"] == [0.1, 0.9]
    assert swapped.detail["slots"] == [group.videos[1], group.videos[0]]


def test_a_break_is_a_video_falling_below_the_floor_it_reached(run_context, monkeypatch):
    """Reference [0.9, 0.1] at floor 0.5: video 0 falling to 0.1 breaks; video 1 rising does not
    matter; both videos covered is no break."""
    group, prop = _prop(run_context(), monkeypatch)
    ref = prop.score(prop.reference_value(), _answer("good", "bad"), None)
    assert prop.searchable(ref) is None
    fell = prop.score(Layout((1, 0)), _answer("good", "bad"), ref)  # video 0 now in slot 1: "bad"
    rose = prop.score(Layout((0, 1), boundary="text"), _answer("good", "good"), ref)
    assert fell.broken and not rose.broken
    d = prop.describe(Layout((1, 0)), fell, ref)
    assert d["fell_below"] == [group.videos[0]] and d["floor"] == 0.5


def test_a_group_below_the_floor_unperturbed_is_not_searchable(run_context, monkeypatch):
    """Every video under the floor in the identity layout: nothing can fall, the group is not searched."""
    _, prop = _prop(run_context(), monkeypatch)
    ref = prop.score(prop.reference_value(), _answer("bad", "bad"), None)
    assert "below the floor 0.5" in prop.searchable(ref)


def test_failed_calls_unalignable_answers_and_judge_failures_are_lost(run_context, monkeypatch):
    """None of them scores a coverage: each is a lost query saying why (the judge's names the video)."""
    group, prop = _prop(run_context(), monkeypatch)
    lay = prop.reference_value()
    failed = prop.score(lay, Generation(finish_reason="error", error="HTTP 503"), None)
    empty = prop.score(lay, Generation(""), None)
    judge = prop.score(lay, _answer("judge-error", "good"), None)
    assert [o.ok for o in (failed, empty, judge)] == [False, False, False]
    assert failed.why_lost == "HTTP 503" and "unalignable" in empty.why_lost
    assert judge.why_lost == f"judge failure on {group.videos[0]}"


def test_an_answer_that_echoes_the_prompt_is_a_lost_query(run_context, monkeypatch):
    """The positional probe's rule: a summary that only repeats the instruction (whole, or a run of it
    under slot markers) is no summary, a lost query saying ``prompt_echo``, never a coverage; a real
    summary that shares the prompt's words is scored."""
    _, prop = _prop(run_context(), monkeypatch)
    lay = prop.reference_value()
    whole = prop.score(lay, Generation(prop.request(lay).prompt_text), None)
    part = prop.score(lay, Generation("[video0] Different videos in the input [video1] are separated by black frames."),
                      None)
    assert [o.ok for o in (whole, part)] == [False, False]
    assert "prompt_echo" in whole.why_lost and "prompt_echo" in part.why_lost
    assert prop.score(lay, _answer("good", "good"), None).ok


def test_every_layout_is_decoded_with_the_groups_seed_and_shows_its_order(run_context, monkeypatch):
    """Only the layout changes between a group's requests: the seed is the group's; the prompt shows
    the videos in the layout's order."""
    group, prop = _prop(run_context(), monkeypatch)
    a, b = prop.request(Layout((0, 1))), prop.request(Layout((1, 0), placement="video-first", label_base=1))
    assert a.seed == b.seed
    assert [p.video_id for p in b.parts if isinstance(p, VideoPart)] == [group.videos[1], group.videos[0]]
    assert prop.corpus_key() == f"coverage[P2]|{group.id}"


def test_stored_layouts_are_checked_on_decoding(run_context, monkeypatch):
    """A stored order that is not an order of the group's P videos is refused; a good one round-trips."""
    _, prop = _prop(run_context(), monkeypatch)
    lay = Layout((1, 0), boundary="text", label_base=1)
    assert prop.decode(prop.encode(lay)) == lay
    with pytest.raises(ConfigError, match="not an order of 2 videos"):
        prop.decode({"order": [0, 1, 2]})


def test_a_degenerate_summary_is_a_lost_query_as_in_the_positional_probe(run_context, monkeypatch):
    """A summary of too few words, mostly not words, or addressing one slot of two is lost (the positional
    probe's rules), never coverage 0 that makes the group unsearchable or a perturbed query a break."""
    _, prop = _prop(run_context(), monkeypatch)
    lay = prop.reference_value()
    few = prop.score(lay, Generation("Nice."), None)
    symbols = prop.score(lay, Generation("Good good good 1 2 3 4 5 6 7 8 9 # % &"), None)
    one_slot = prop.score(lay, Generation("[video0] A good summary of what the first video shows in detail."), None)
    assert [o.ok for o in (few, symbols, one_slot)] == [False, False, False]
    assert "too_few_words" in few.why_lost and "mostly_not_words" in symbols.why_lost
    assert "one_slot_addressed" in one_slot.why_lost
