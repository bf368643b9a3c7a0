"""The engine's execution (engine.execution): a re-run makes no backend call, read-only caches, failed
and unusable answers, and a run killed midway resumes without repeating finished calls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from support import TESTS
from support.counting_backend import CountingBackend, request_of

from pytest_posbias.engine import Engine, Generation, GenerationCache, Request
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.video.compose import TextPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


def test_rerun_makes_zero_backend_calls(tmp_path, synthetic_clips):
    store = FrameStore()
    backend = CountingBackend(SimBackend("unbiased", store))
    reqs = [request_of(FrameSpec.from_video(p, [0, 10 + k, 40]), "Please describe this video in detail.") for p in synthetic_clips for k in range(3)]
    e1 = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend)
    out1 = e1.run(reqs)
    assert backend.calls == len(reqs) == e1.stats.made
    e2 = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend)  # a new process, same cache
    out2 = e2.run(reqs)
    assert backend.calls == len(reqs)  # nothing sent again
    assert e2.stats.made == 0 and e2.stats.cache_hits == len(reqs)
    assert [g.text for g in out1] == [g.text for g in out2]
    # duplicates inside one run are sent once
    e3 = Engine(GenerationCache(tmp_path / "d.sqlite"), backend_for=lambda m: backend)
    e3.run([reqs[0], reqs[0], reqs[1]])
    assert e3.stats.made == 2
    # asked again in the same run (a later sequential look): a repeat of this run's answers, not a
    # hit on an earlier run's cache; a key first read from the cache counts once as a hit
    e3.run([reqs[0], reqs[1], reqs[2]])
    assert (e3.stats.made, e3.stats.rereads, e3.stats.cache_hits) == (3, 2, 0)
    e2.run(reqs[:2])
    assert (e2.stats.cache_hits, e2.stats.rereads) == (len(reqs), 2)


def _file_state(path: Path) -> tuple[bytes, int]:
    """The database file's bytes and its write-ahead log's size (what a write would change)."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes(), wal.stat().st_size if wal.exists() else 0


def test_read_only_makes_each_request_of_a_run_once_as_read_write_does_and_never_writes_the_file(
        tmp_path, synthetic_clips):
    store = FrameStore()
    reqs = [request_of(FrameSpec.from_video(p, [0, 10 + k, 40]), "Describe the video.") for p in synthetic_clips[:2]
            for k in range(3)]
    looks = [reqs[:4], reqs, [reqs[0], reqs[0], reqs[5]], reqs[2:]]  # later looks repeat earlier requests
    seen = {}
    for mode in ("read-write", "read-only"):
        path = tmp_path / mode / "generations.sqlite"
        GenerationCache(path).close()  # a fresh cache file
        before = _file_state(path)
        backend = CountingBackend(SimBackend("unbiased", store), batch=2)
        cache = GenerationCache(path, read_only=mode == "read-only")
        eng = Engine(cache, backend_for=lambda m, b=backend: b)
        texts = [[g.text for g in eng.run(look)] for look in looks]
        stats = eng.stats.snapshot()
        seen[mode] = (backend.calls, stats["made"], stats["rereads"], stats["cache_hits"], texts)
        if mode == "read-only":
            assert (cache.unstored, len(cache)) == (len(reqs), 0)
            assert _file_state(path) == before
            # a cached answer the run then rejects is no answer in either mode (the file keeps its row)
            assert eng.reject([reqs[0]], ["constant"]) == 1 and _file_state(path) == before
            assert eng.run([reqs[0]])[0].text == texts[0][0] and backend.calls == len(reqs)
        cache.close()
    assert seen["read-only"] == seen["read-write"]
    assert seen["read-write"][:4] == (len(reqs), len(reqs), 10, 0)  # 10 distinct keys asked again per look


def test_read_only_with_unusable_answers_and_no_unusable_table_writes_nothing(tmp_path, synthetic_clips):
    path = tmp_path / "generations.sqlite"
    GenerationCache(path).close()  # a cache made before the unusable-answer table existed: none in the file
    before = _file_state(path)
    backend = CountingBackend(SimBackend("unbiased", FrameStore()))
    cache = GenerationCache(path, read_only=True)
    eng = Engine(cache, backend_for=lambda m: backend)
    reqs = [request_of(FrameSpec.from_video(synthetic_clips[0], [0, 10 + k, 40]), "Describe.") for k in range(3)]
    for _ in range(2):  # asked twice in the run: made once, then served as lost without a call
        gens = eng.run(reqs, accept=lambda r, g: "rejected by the test")
    assert all(g.ok for g in gens) and backend.calls == len(reqs)
    assert (eng.stats.made, eng.stats.unusable, cache.unstored) == (len(reqs), len(reqs), 0)
    assert _file_state(path) == before
    cache.close()


def test_an_answer_served_as_lost_after_the_cap_is_named_by_the_rule_as_it_is_now(tmp_path, synthetic_clips):
    """Earlier runs recorded an answer unusable under an older reason; once the re-ask cap serves it without a
    call, the run log names the reason the probe's rule gives now, and a batch rule's reason (one the
    answer alone passes) is kept."""
    import json

    from pytest_posbias.engine.run_log import RunLog
    from pytest_posbias.probes.stressor import accept_description

    req = request_of(FrameSpec.from_video(synthetic_clips[0], [0, 10, 40]), "Please describe this video.")
    other = request_of(FrameSpec.from_video(synthetic_clips[0], [0, 11, 40]), "Please describe this video.")
    cut = Generation("", 64, "length")  # no answer text within the token limit
    said = Generation("A red disc moves slowly to the left of the frame.", 12, "stop")
    backend = CountingBackend(SimBackend("unbiased", FrameStore()))
    keys = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend).keys([req, other])
    for run in range(3):  # three earlier runs, the cap
        old = GenerationCache(tmp_path / "c.sqlite", run_id=f"old{run}")
        old.record_unusable([(keys[0], req.model, cut, "empty_answer"), (keys[1], other.model, said, "constant_answer")])
        old.close()
    log = RunLog(tmp_path / "run.jsonl", {"run": "new"})
    eng = Engine(GenerationCache(tmp_path / "c.sqlite", run_id="new"), backend_for=lambda m: backend, runlog=log)
    eng.run([req, other], probe="stressor", accept=accept_description)
    log.close()
    logged = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r.get("unusable") for r in logged if r.get("kind") == "request"] == ["answer_cut_off", "constant_answer"]
    assert backend.calls == 0


def test_served_from_the_cache_counts_distinct_keys_not_duplicates_in_a_batch(tmp_path, synthetic_clips):
    store = FrameStore()
    backend = CountingBackend(SimBackend("unbiased", store))
    reqs = [request_of(FrameSpec.from_video(synthetic_clips[0], [0, 10 + k, 40]), "Describe the video.") for k in range(3)]
    cache = GenerationCache(tmp_path / "c.sqlite")
    Engine(cache, backend_for=lambda m: backend).run(reqs)
    eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend)  # a later run
    eng.run([reqs[0], reqs[0], reqs[0], reqs[1], reqs[1]])  # one batch asking two cached keys five times
    assert (eng.stats.cache_hits, eng.stats.rereads, eng.stats.made) == (2, 0, 0)
    assert eng.stats.cache_hits <= len(cache)
    eng.run([reqs[1], reqs[1], reqs[2]])  # reqs[1] again (a re-read), reqs[2] a first hit
    assert (eng.stats.cache_hits, eng.stats.rereads) == (3, 1)


def test_failed_requests_are_recorded_not_cached(tmp_path, synthetic_clips):
    from pytest_posbias.errors import BackendError

    class Flaky(CountingBackend):
        def generate(self, requests):
            self.calls += len(requests)
            if any("bad" in r.prompt_text for r in requests):
                raise BackendError("endpoint said no")
            return self.inner.generate(requests)

    b = Flaky(SimBackend("unbiased", FrameStore()))
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 10, 20])
    eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: b)
    gens = eng.run([request_of(spec, "good one"), request_of(spec, "bad one"), request_of(spec, "good two")])
    assert [g.ok for g in gens] == [True, False, True]
    assert "endpoint said no" in gens[1].error
    assert eng.stats.failed == 1
    assert len(eng.cache) == 2  # the failure is not cached: a rerun retries it


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from support.counting_backend import CountingBackend, request_of
    from pytest_posbias.engine import Engine, GenerationCache
    from pytest_posbias.models.sim import SimBackend
    from pytest_posbias.video.frames import FrameSpec, FrameStore
    clip = {clip!r}
    reqs = [request_of(FrameSpec.from_video(clip, [0, 5 + k, 40]), "Please describe this video in detail.") for k in range(20)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()), delay=0.15, batch=1)
    def progress(done, total, hits, elapsed):
        print(f"done {{done}}", flush=True)
    Engine(GenerationCache({cache!r}), backend_for=lambda m: b, progress=progress).run(reqs)
    print("finished", flush=True)
    """
)


def test_a_run_killed_midway_resumes_without_repeating_finished_calls(tmp_path, synthetic_clips):
    cache = tmp_path / "c.sqlite"
    script = KILL_SCRIPT.format(tests=str(TESTS), clip=str(synthetic_clips[0]), cache=str(cache))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    done = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("done"):
            done = int(line.split()[1])
            if done >= 6:
                os.killpg(proc.pid, signal.SIGKILL)  # no clean shutdown: as a crash or a killed worker
                break
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    finished = len(GenerationCache(cache))
    assert 6 <= finished < 20
    # the re-run sends only what was not finished
    reqs = [request_of(FrameSpec.from_video(synthetic_clips[0], [0, 5 + k, 40]), "Please describe this video in detail.") for k in range(20)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()))
    eng = Engine(GenerationCache(cache), backend_for=lambda m: b)
    eng.run(reqs)
    assert eng.stats.cache_hits == finished
    assert b.calls == eng.stats.made == 20 - finished


class SloppyBackend:
    """A backend that reports a failure but still hands back text and letter scores."""

    name = "sloppy"
    supports_letter_logprobs = True
    max_batch_size = 8

    def identity(self):
        return {"backend": "sloppy"}

    def generate(self, requests):
        return [Generation("B", 1, "error", {"A": -1.0, "B": -0.1}, 0.0, None, attempts=3) if "fail" in r.prompt_text
                else Generation("A", 1, "stop", None, 0.0, attempts=2) for r in requests]

    def score_options(self, requests, letters):
        raise AssertionError("not used")

    def close(self):
        pass


def test_a_failed_generation_never_carries_text_and_retries_are_counted(tmp_path):
    eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: SloppyBackend())
    reqs = [Request("sloppy", (TextPart(t),)) for t in ("ok one", "fail this", "ok two")]
    gens = eng.run(reqs)
    assert [g.ok for g in gens] == [True, False, True]
    bad = gens[1]
    assert bad.text == "" and bad.letter_logprobs is None and bad.error  # fail closed: nothing to score
    assert eng.stats.failed == 1 and eng.stats.retries == 1 + 2 + 1  # attempts beyond the first, all requests
    assert len(eng.cache) == 2
    assert Generation.from_dict(gens[0].to_dict()).attempts == 2


class LetterBackend:
    """A letter-scoring backend (``score_options`` only) whose scores are given per prompt."""

    name = "letters"
    supports_letter_logprobs = True
    max_batch_size = 8

    def __init__(self, scores):
        self.scores = scores
        self.calls = 0

    def identity(self):
        return {"backend": "letters"}

    def generate(self, requests):
        raise AssertionError("not used")

    def score_options(self, requests, letters):
        self.calls += len(requests)
        return [dict(self.scores[r.prompt_text]) for r in requests]

    def close(self):
        pass


def _letter_request(prompt):
    return Request("letters", (TextPart(prompt),), want="letters", letters=("A", "B"))


def test_letter_scores_that_are_not_finite_log_probabilities_are_a_failed_call(tmp_path):
    """A score_options answer with a NaN or +inf log-probability is a failed call, never scored nor cached."""
    backend = LetterBackend({"nan": {"A": float("nan"), "B": -0.1}, "inf": {"A": float("inf"), "B": -0.1},
                             "ok": {"A": -0.1, "B": -2.0}})
    eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend)
    gens = eng.run([_letter_request(p) for p in ("nan", "inf", "ok")])
    assert [g.ok for g in gens] == [False, False, True]
    assert all(g.letter_logprobs is None and g.error for g in gens[:2])
    assert eng.stats.failed == 2 and len(eng.cache) == 1


def test_a_failed_call_found_among_the_cached_answers_is_asked_again(tmp_path):
    """A failed call stored as an answer (a foreign or damaged cache) is a miss counted unreadable, not a cache hit."""
    backend = LetterBackend({"ok": {"A": -0.1, "B": -2.0}})
    cache = GenerationCache(tmp_path / "c.sqlite")
    eng = Engine(cache, backend_for=lambda m: backend)
    req = _letter_request("ok")
    cache.put_many([(eng.keys([req])[0], "letters", Generation(finish_reason="error", error="timeout"))])
    (g,) = eng.run([req])
    assert g.ok and backend.calls == 1 and eng.stats.cache_hits == 0 and cache.unreadable == 1
