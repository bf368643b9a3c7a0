"""Degenerate answers are lost units, and only usable answers are cached (docs/design.md section 5).

Unit tests of the usable-answer rules (``pytest_posbias/scoring/usable.py``), of the engine's
``accept`` / ``reject`` / cap, and the suites run against a hostile loopback server
(``tests/support/fault_server.py``): punctuation garbage to every description, "A" to every summary,
answers with no option letter. Each run exits non-zero or counts the loss; a rerun against a
healthy server sends again exactly the requests that were not measured.

Placed with ``scoring/usable.py``, its main subject; it also checks the engine's side and runs the
suites through pytester.
"""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_posbias.engine import Decoding, Engine, Generation, GenerationCache, Request
from pytest_posbias.probes.phase import parse_letter
from pytest_posbias.probes.positional import accept_summary, addressed_slots, placeholder_only, summary_text
from pytest_posbias.scoring import usable
from pytest_posbias.scoring.alignment import align
from pytest_posbias.video.compose import TextPart

# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("text, reason", [
    ("", usable.EMPTY),
    ("   \n\t ", usable.EMPTY),
    ("A", usable.FEW_WORDS),
    ("A red", usable.FEW_WORDS),
    ("!@#$%^&*()_+{}|:<>?~!@#$%^&*()_+{}|:<>?~", usable.FEW_WORDS),
    ("12 34 56 78", usable.FEW_WORDS),
    ("a b c ! ? . , ; : -", usable.NOT_WORDS),
    ("A red disc moves.", None),
    ("the the the the the the the the", None),  # a repetition loop is a measured output, not a lost one
])
def test_text_reason(text, reason):
    assert usable.text_reason(text) == reason


_NON_WORD = st.text(alphabet=string.punctuation + string.digits + " \n\t", max_size=80)


@given(_NON_WORD)
@settings(max_examples=200, deadline=None)
def test_text_without_letters_is_never_usable(text):
    assert usable.text_reason(text) is not None


@given(st.lists(st.text(alphabet=string.ascii_letters, min_size=1, max_size=8), min_size=3, max_size=30))
@settings(max_examples=200, deadline=None)
def test_three_or_more_words_and_nothing_else_are_usable(ws):
    assert usable.text_reason(" ".join(ws)) is None


def test_text_reason_names_a_bad_parameter():
    with pytest.raises(ValueError, match="min_words"):
        usable.text_reason("a b c", min_words=0)
    with pytest.raises(ValueError, match="min_share"):
        usable.text_reason("a b c", min_share=1.5)


_DESCRIBE = "Please describe this video in detail."


@pytest.mark.parametrize("text, reason", [
    ("Please describe this video in detail.", usable.PROMPT_ECHO),  # the whole prompt
    ("Describe this video in detail.", usable.PROMPT_ECHO),  # a contiguous run of it
    ("  describe THIS video -- in detail!! ", usable.PROMPT_ECHO),  # case, punctuation and spacing dropped
    ("this video in", usable.PROMPT_ECHO),
    ("Please describe this video in detail. Please", None),  # longer than the prompt
    ("Describe this video in great detail.", None),  # a word the prompt does not have
    ("Describe video this in detail.", None),  # the prompt's words, not in its order
    ("The video shows a person describing this recipe in detail.", None),  # shares words, says more
    ("A red disc moves left across the frame.", None),
    ("", None),  # no word: text_reason's case (empty_answer), not an echo
    ("...!!!", None),
])
def test_echo_reason(text, reason):
    assert usable.echo_reason(text, _DESCRIBE) == reason


def test_echo_words_are_lower_cased_letter_and_digit_runs():
    assert usable.echo_words("Video 1: 16 uniformly-sampled FRAMES.") == ["video", "1", "16", "uniformly", "sampled",
                                                                          "frames"]
    # digits are words here: "video 2" does not occur in a prompt that names only video 1
    assert usable.echo_reason("Video 2: 16 frames", "Video 1: 16 frames") is None
    assert usable.echo_reason("Video 1: 16 frames", "Video 1: 16 frames\nSummarize each video.") == usable.PROMPT_ECHO


def test_description_reason_applies_the_word_rules_then_the_echo_rule():
    assert usable.description_reason("", _DESCRIBE) == usable.EMPTY
    assert usable.description_reason("this video", _DESCRIBE) == usable.FEW_WORDS  # too few words first
    assert usable.description_reason("describe this video", _DESCRIBE) == usable.PROMPT_ECHO
    assert usable.description_reason("A red disc moves.", _DESCRIBE) is None
    # without a prompt only the word rules apply; a failed call is not judged
    assert usable.generation_text_reason(Generation("describe this video")) is None
    assert usable.generation_text_reason(Generation("describe this video"), _DESCRIBE) == usable.PROMPT_ECHO
    assert usable.generation_text_reason(Generation(finish_reason="error", error="x"), _DESCRIBE) is None


def test_the_engine_rules_see_the_requests_prompt():
    """The stressor and positional accept rules judge the answer against the request's own text parts."""
    from pytest_posbias.probes.stressor import accept_description

    req = Request("fake", (TextPart(_DESCRIBE),), Decoding(16))
    assert accept_description(req, Generation("Describe this video in detail.")) == usable.PROMPT_ECHO
    assert accept_description(req, Generation("A person slices onions on a board.")) is None
    ask = "Summarize each video in 2 sentences. Use exactly this format: [video0] summary [video1] summary"
    summ = Request("fake", (TextPart(ask), TextPart("Video 0: 4 frames")), Decoding(16))
    assert accept_summary(summ, Generation("Summarize each video in 2 sentences.")) == usable.PROMPT_ECHO
    assert accept_summary(summ, Generation("[video0] Summarize each video [video1] in 2 sentences")) == usable.PROMPT_ECHO
    assert accept_summary(summ, Generation(summ.prompt_text)) == usable.PROMPT_ECHO  # markers are words on neither side
    assert accept_summary(summ, Generation("[video0] summary [video1] summary")) is None  # a placeholder output
    assert accept_summary(summ, Generation("[video0] A cat sits. [video1] A dog runs.")) is None


def test_letter_reason_from_logprobs_and_text():
    ok = Generation("", letter_logprobs={"A": -0.1, "B": -2.0})
    none = Generation("", letter_logprobs={"A": float("-inf"), "B": float("-inf")})
    assert usable.letter_reason(ok, "AB", parse_letter) is None
    assert usable.letter_reason(none, "AB", parse_letter) == usable.NO_LETTER
    assert usable.letter_reason(Generation("B."), "ABC", parse_letter) is None
    assert usable.letter_reason(Generation("I cannot tell."), "ABC", parse_letter) == usable.NO_LETTER
    assert usable.letter_reason(Generation(finish_reason="error", error="x"), "ABC", parse_letter) is None  # a failed call


def test_no_answer_text_at_the_token_limit_is_cut_off():
    """An empty (or blank) text with finish_reason length is answer_cut_off for descriptions and multiple
    choice alike; an empty text that stopped on its own, text at the limit and a failed call are not."""
    cut = Generation(" \n", 512, "length")
    assert usable.cut_off_reason(cut) == usable.CUT_OFF
    assert usable.generation_text_reason(cut, "Describe the video.") == usable.CUT_OFF
    assert usable.letter_reason(cut, "ABC", parse_letter) == usable.CUT_OFF
    assert usable.generation_text_reason(Generation("", 3, "stop")) == usable.EMPTY
    assert usable.letter_reason(Generation("", 3, "stop"), "ABC", parse_letter) == usable.NO_LETTER
    assert usable.cut_off_reason(Generation("The person", 512, "length")) is None
    assert usable.letter_reason(Generation("The answer is", 512, "length"), "ABC", parse_letter) == usable.NO_LETTER
    assert usable.cut_off_reason(Generation(finish_reason="error", error="x")) is None
    assert usable.generation_text_reason(Generation(finish_reason="error", error="x")) is None


def test_constant_text_flags_one_answer_to_every_input_only():
    same = ["The video shows a person."] * 6
    assert usable.constant_text(same, [0, 0, 1, 1, 2, 2]) == [True] * 6
    # case and spacing do not make an answer different
    assert usable.constant_text(["A cat sits.", "a  CAT sits."], ["g1", "g2"]) == [True, True]
    # each input answered in its own way, the same text for the requests of one input: not constant
    assert usable.constant_text(["one a b", "one a b", "two a b", "two a b"], [0, 0, 1, 1]) == [False] * 4
    # two inputs sharing one answer among many: a coincidence, not a constant
    texts = [f"text {k} words here" for k in range(10)] + ["shared words here"] * 2
    assert not any(usable.constant_text(texts, [*range(10), 0, 1]))
    # one input: nothing to compare; not-measured answers are ignored
    assert usable.constant_text(["x y z"] * 3, [0, 0, 0]) == [False] * 3
    assert usable.constant_text([None, "x y z", "x y z"], [0, 1, 2]) == [False, True, True]
    with pytest.raises(ValueError, match="same length"):
        usable.constant_text(["a"], [0, 1])


def test_constant_letters():
    inputs = [k // 4 for k in range(16)]
    correct = [k % 4 for k in range(16)]
    assert usable.constant_letters([0] * 16, correct, inputs) == [True] * 16
    assert not any(usable.constant_letters(correct, correct, inputs))  # letters spread as the correct ones
    # data whose correct letter is always A: answering A is not evidence of a constant answer
    assert not any(usable.constant_letters([0] * 16, [0] * 16, inputs))
    # too few answers to call it
    assert not any(usable.constant_letters([0] * 4, [1, 2, 3, 1], [0, 0, 1, 1]))
    # unmeasured answers are neither counted nor flagged
    assert usable.constant_letters([None, *[0] * 15], correct, inputs) == [False, *[True] * 15]


def test_slot_rules_and_markers_are_not_words():
    assert usable.slots_reason(1, 4) == usable.ONE_SLOT and usable.slots_reason(2, 4) is None
    assert usable.slots_reason(1, 1) is None
    assert summary_text("[video0] ... [video1] ...").split() == ["...", "..."]
    # the slot format with filler in every slot is a placeholder output (zero coverage), not a lost unit
    assert placeholder_only("[video0] ... [video1] summary") and not placeholder_only("[video0] ... [video1] A cat.")
    assert accept_summary(None, Generation("[video0] ... [video1] ... [video2] ... [video3] ...")) is None
    assert accept_summary(None, Generation("[video0] A [video1] A")) == usable.FEW_WORDS
    refs = [["A red disc spins."], ["A blue square slides."]]
    assert addressed_slots(align("A", 2, references=refs)) == 0  # a word similar to no reference addresses no slot
    assert addressed_slots(align("A red disc.", 2, references=refs)) == 1  # the fallback puts it in its slot
    assert addressed_slots(align("[video0] A red disc spins. [video1] ...", 2, references=refs)) == 2
    assert addressed_slots(align("[video0] A red disc spins.", 2, references=refs)) == 1


def test_the_calls_line_counts_unusable_answers():
    from pytest_posbias.report.summary import calls_line

    assert "7 unusable answers (lost units, never cached as answers)" in calls_line({"made": 9, "unusable": 7})
    assert "unusable" not in calls_line({"made": 9})


# --------------------------------------------------------------------------- the engine


class _Backend:
    """Answers ``text`` (a string, or a function of the request) and counts the calls."""

    name = "fake"
    max_batch_size = 8
    supports_letter_logprobs = False

    def __init__(self, text):
        self.text = text
        self.calls = 0

    def identity(self):
        return {"model": "fake"}

    def generate(self, reqs):
        self.calls += len(reqs)
        return [Generation(self.text(r) if callable(self.text) else self.text, 1, "stop") for r in reqs]

    def score_options(self, reqs, letters):  # pragma: no cover - not used
        raise NotImplementedError

    def close(self):
        pass


def _reqs(n: int) -> list[Request]:
    return [Request("fake", (TextPart(f"Please describe clip {k}."),), Decoding(16)) for k in range(n)]


def _accept(_r, g):
    return usable.generation_text_reason(g)


def _engine(cache: GenerationCache, text, **kw) -> tuple[Engine, _Backend]:
    b = _Backend(text)
    return Engine(cache, backend_for=lambda m: b, **kw), b


def test_unusable_answers_are_not_cached_and_are_asked_again_by_the_next_run(tmp_path):
    cache = GenerationCache(tmp_path / "c.sqlite")
    reqs = _reqs(4)
    bad, b1 = _engine(cache, lambda r: "" if "clip 1" in r.prompt_text or "clip 2" in r.prompt_text else "a b c d")
    gens = bad.run(reqs, accept=_accept)
    assert [g.text for g in gens] == ["a b c d", "", "", "a b c d"] and b1.calls == 4
    assert len(cache) == 2 and bad.stats.unusable == 2
    assert bad.run(reqs, accept=_accept) and b1.calls == 4  # within the run: not asked again
    good, b2 = _engine(cache, "a healthy description")
    again = good.run(reqs, accept=_accept)
    assert b2.calls == 2  # exactly the two unusable answers
    assert [g.text for g in again] == ["a b c d", "a healthy description", "a healthy description", "a b c d"]
    assert len(cache) == 4 and cache.unusable([]) == {}


def test_an_unusable_answer_stored_in_the_cache_is_asked_again(tmp_path):
    """An empty answer cached as a success (by a run without the rule) is not served again."""
    cache = GenerationCache(tmp_path / "c.sqlite")
    reqs = _reqs(3)
    old, _ = _engine(cache, "")
    cache.put_many((k, "fake", Generation("", 0, "stop")) for k in old.keys(reqs))
    eng, b = _engine(cache, "now a description")
    assert [g.text for g in eng.run(reqs, accept=_accept)] == ["now a description"] * 3 and b.calls == 3


def test_a_key_unusable_for_three_runs_is_served_as_lost_without_a_call(tmp_path):
    cache = GenerationCache(tmp_path / "c.sqlite")
    reqs = _reqs(2)
    for run in range(3):
        eng, b = _engine(cache, "!!! ???")
        gens = eng.run(reqs, accept=_accept)
        assert b.calls == 2, run
    runs = cache.unusable(eng.keys(reqs))
    assert {v[0] for v in runs.values()} == {3} and {v[2] for v in runs.values()} == {usable.FEW_WORDS}
    eng, b = _engine(cache, "a healthy description")
    gens = eng.run(reqs, accept=_accept)
    assert b.calls == 0 and [g.text for g in gens] == ["!!! ???"] * 2  # the last answer, lost again by the probe
    assert eng.stats.unusable == 2 and eng.stats.made == 0 and eng.stats.cache_hits == 0
    more, b = _engine(cache, "a healthy description", unusable_runs=5)  # a higher cap asks again
    more.run(reqs, accept=_accept)
    assert b.calls == 2
    with pytest.raises(Exception, match="unusable_runs"):
        _engine(cache, "x", unusable_runs=0)



def test_another_worker_of_the_run_serves_an_unusable_answer_and_the_run_counts_once(tmp_path):
    """Under ``-n`` a later probe group on another worker reads what an earlier one got: usable
    answers from the cache, unusable ones from the ``unusable`` table (this run recorded them), with
    no call; the run counts once toward the cap, and the next run asks again. Also after the fact
    (:meth:`Engine.reject`), and on a table made before it named the run."""
    import sqlite3

    path = tmp_path / "c.sqlite"
    legacy = sqlite3.connect(path)  # the table as a cache made before the run column has it
    legacy.execute("CREATE TABLE unusable (key TEXT PRIMARY KEY, model TEXT NOT NULL, runs INTEGER NOT NULL, "
                   "updated REAL NOT NULL, reason TEXT NOT NULL, payload TEXT NOT NULL)")
    legacy.commit()
    legacy.close()
    reqs = _reqs(3)
    text = lambda r: "" if "clip 1" in r.prompt_text else "a b c d"  # noqa: E731
    first, b1 = _engine(GenerationCache(path, run_id="run-1"), text)
    first.run(reqs, accept=_accept)
    assert b1.calls == 3 and first.reject(reqs[2:], [usable.CONSTANT]) == 1
    second, b2 = _engine(GenerationCache(path, run_id="run-1"), "a healthy description")  # another worker
    gens = second.run(reqs, accept=_accept)
    assert b2.calls == 0 and [g.text for g in gens] == ["a b c d", "", "a b c d"]
    assert second.stats.unusable == 2 and second.stats.cache_hits == 1
    second.cache.record_unusable([(second.keys(reqs[1:2])[0], "fake", Generation("", 1, "stop"), usable.EMPTY)])
    assert {v[0] for v in second.cache.unusable(second.keys(reqs)).values()} == {1}  # the run counts once
    nxt, b3 = _engine(GenerationCache(path, run_id="run-2"), "a healthy description")
    nxt.run(reqs, accept=_accept)
    assert b3.calls == 2  # the next run asks again for both


def test_reject_withdraws_a_cached_answer_for_the_next_run(tmp_path):
    cache = GenerationCache(tmp_path / "c.sqlite")
    reqs = _reqs(3)
    eng, b = _engine(cache, "the same text always")
    eng.run(reqs, accept=_accept)
    assert len(cache) == 3
    assert eng.reject(reqs, [usable.CONSTANT, None, usable.CONSTANT]) == 2
    assert eng.reject(reqs, [usable.CONSTANT, None, usable.CONSTANT]) == 0  # once per run
    assert len(cache) == 1
    eng.run(reqs, accept=_accept)
    assert b.calls == 3  # this run keeps its answers
    nxt, b2 = _engine(cache, "another text")
    nxt.run(reqs, accept=_accept)
    assert b2.calls == 2


# --------------------------------------------------------------------------- hostile servers, real suites

pytest.importorskip("openai")

from support.fault_server import FaultServer, healthy, punctuation  # noqa: E402
from support.suite_project import write_suite_project  # noqa: E402

STRESSOR = """
[tool.posbias.probes.stressor]
videos = 3
trials = 2
frames = [4]
max_new_tokens = 32
resolution = 32
"""

POSITIONAL = """
[tool.posbias.probes.positional]
groups = 3
resolution = 32
frames_short = 2
frames_long = 2
"""

PHASE = """
[tool.posbias.probes.phase]
items = 8
orderings = 4
resolution = 32
"""


@pytest.fixture
def api_env(monkeypatch):
    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "5")
    monkeypatch.setenv("POSBIAS_API_BACKOFF", "0.01")
    monkeypatch.setenv("POSBIAS_API_KEY", "sk-test")


def _run(pytester: pytest.Pytester, url: str, name: str, *args: str):
    res = pytester.runpytest(*args, "--posbias-model", "openai:x", f"--posbias-api-base={url}", "-p", "no:randomly",
                             "--posbias-fixed", f"--posbias-json={name}.json")
    path = pytester.path / f"{name}.json"
    return res, (json.loads(path.read_text()) if path.exists() else None)


def _probe_calls(srv: FaultServer) -> int:
    return sum(1 for b in srv.bodies if not srv.is_startup_check(b))


def _lost(data: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in data["verdicts"]:
        for k, n in v["extra"]["measurement"]["lost"].items():
            out[k] = out.get(k, 0) + n
    return out


@pytest.mark.usefixtures("heavy_modules")
def test_punctuation_descriptions_never_pass_and_a_rerun_asks_again(pytester, small_set, api_env):
    """40 punctuation characters to every description: the clean-repetition, stressor and attack
    gates measured RR 0 on it and passed; now every one of them is lost, and none passes."""
    write_suite_project(pytester.path, small_set, ("test_stressors.py",), STRESSOR)
    sel = ("-m", "(repetition or stressor or attack) and not slow")
    with FaultServer(answer=punctuation) as srv:
        res1, data1 = _run(pytester, srv.url, "garbage", *sel)
        sent1 = _probe_calls(srv)
    assert data1 is not None, res1.stdout.str()[-3000:]
    assert res1.ret != 0 and sent1 > 0
    assert data1["verdicts"] and not any(v["passed"] for v in data1["verdicts"])
    assert all(v["extra"]["measurement"]["measured"] == 0 for v in data1["verdicts"])
    assert _lost(data1).get(usable.FEW_WORDS, 0) > 0  # the reason is named
    assert data1["calls"]["unusable"] == sent1
    assert f"{sent1} unusable answers" in res1.stdout.str()
    with FaultServer(answer=healthy) as ok:
        _res2, data2 = _run(pytester, ok.url, "healthy", *sel)
        assert _probe_calls(ok) == sent1  # every unusable answer asked again, nothing else
    assert data2["calls"]["made"] == sent1 and data2["calls"]["unusable"] == 0
    assert all(v["extra"]["measurement"]["measured"] > 0 for v in data2["verdicts"])
    with FaultServer(answer=healthy) as ok:
        _run(pytester, ok.url, "again", *sel)
        assert _probe_calls(ok) == 0  # all usable now, all cached


def _news_manifest(small_set: Path, dest: Path) -> Path:
    """The small set's news groups and videos only (absolute video paths)."""
    lines = []
    for line in small_set.read_text().splitlines():
        d = json.loads(line)
        if d.get("type") in ("video", "group") and d.get("domain") == "news":
            if "path" in d:
                d["path"] = str((small_set.parent / d["path"]).resolve())
            lines.append(json.dumps(d))
    dest.write_text("\n".join(lines) + "\n")
    return dest


@pytest.mark.usefixtures("heavy_modules")
def test_one_letter_summaries_never_pass_meg_and_a_rerun_asks_again(pytester, small_set, api_env):
    """"A" to every summary on news-style data: the fallback put the word in one slot, the others
    scored 0 and the cyclic orders cancelled: MEG = 0, CI [0, 0], every MEG gate passed, exit 0."""
    manifest = _news_manifest(small_set, pytester.path / "news.jsonl")
    write_suite_project(pytester.path, manifest, ("test_positional.py",), POSITIONAL)
    sel = ("-m", "meg and not slow")
    with FaultServer(answer="A") as srv:
        res1, data1 = _run(pytester, srv.url, "letter", *sel)
        sent1 = _probe_calls(srv)
    assert data1 is not None, res1.stdout.str()[-3000:]
    assert res1.ret != 0, res1.stdout.str()[-3000:]
    assert data1["verdicts"] and not any(v["passed"] for v in data1["verdicts"])
    assert _lost(data1).get(usable.FEW_WORDS, 0) == sum(v["extra"]["measurement"]["planned"] for v in data1["verdicts"])
    assert not re.search(r"\bShip\b", res1.stdout.str())
    with FaultServer(answer=healthy) as ok:
        _res2, data2 = _run(pytester, ok.url, "healthy", *sel)
        assert _probe_calls(ok) == sent1
    assert data2["calls"]["made"] == sent1


@pytest.mark.usefixtures("heavy_modules")
def test_a_constant_summary_never_passes_meg(pytester, small_set, api_env):
    """The same well-formed summary to every group: lost as a constant answer."""
    manifest = _news_manifest(small_set, pytester.path / "news.jsonl")
    write_suite_project(pytester.path, manifest, ("test_positional.py",), POSITIONAL)
    text = " ".join(f"[video{k}] A reporter speaks in front of a building about the news." for k in range(4))
    with FaultServer(answer=text) as srv:
        res, data = _run(pytester, srv.url, "constant", "-m", "meg and not slow")
        sent = _probe_calls(srv)
    assert data is not None, res.stdout.str()[-3000:]
    assert res.ret != 0 and not any(v["passed"] for v in data["verdicts"])
    assert _lost(data).get(usable.CONSTANT, 0) > 0
    with FaultServer(answer=healthy) as ok:
        _run(pytester, ok.url, "healthy", "-m", "meg and not slow")
        assert _probe_calls(ok) == sent  # withdrawn from the cache after the batch: asked again


@pytest.mark.usefixtures("heavy_modules")
def test_letterless_answers_are_not_cached(pytester, small_set, api_env):
    """Answers with no option letter were cached as successes: a rerun against a healthy server made
    0 calls and lost them again. Now exactly they are asked again."""
    write_suite_project(pytester.path, small_set, ("test_phase_order.py",), PHASE)
    bad_prompt = re.compile(r"colour", re.I)
    with FaultServer(no_letter=lambda p: bool(bad_prompt.search(p))) as srv:
        res1, data1 = _run(pytester, srv.url, "noletter", "-m", "option_order")
    assert data1 is not None, res1.stdout.str()[-3000:]
    n_bad = data1["verdicts"][0]["extra"]["unparseable"]
    assert 0 < n_bad < 32 and res1.ret != 0
    assert data1["calls"]["unusable"] == n_bad
    with FaultServer() as ok:
        _res2, data2 = _run(pytester, ok.url, "healthy", "-m", "option_order")
        assert _probe_calls(ok) == n_bad
    assert data2["calls"]["made"] == n_bad and data2["calls"]["cache_hits"] == 32 - n_bad
