"""The engine: request keys, the SQLite cache, resume after a kill, the run log.

The tests of the ``engine`` package's modules (``calls.py``, ``cache.py``, ``execution.py``,
``run_log.py``) together."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_posbias.engine import (
    Decoding,
    Engine,
    Generation,
    GenerationCache,
    Request,
    RunLog,
    read_run_log,
)
from pytest_posbias.engine.cache import read_payload
from pytest_posbias.engine.calls import generation_problem
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


def _req(spec: FrameSpec, prompt: str, **kw) -> Request:
    return Request("sim:unbiased", (TextPart(prompt), VideoPart(spec)), Decoding(max_new_tokens=64, **kw))


def test_request_key_covers_what_changes_the_output(synthetic_clips):
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 10, 20])
    ident = {"backend": "sim", "model_id": "sim:unbiased", "revision": "x"}
    base = _req(spec, "Describe.")
    k = base.key(ident)
    assert k == _req(spec, "Describe.").key(ident)
    assert k != _req(spec, "Describe!").key(ident)  # prompt
    assert k != _req(FrameSpec.from_video(synthetic_clips[0], [0, 10, 21]), "Describe.").key(ident)  # frames
    assert k != _req(FrameSpec.from_video(synthetic_clips[0], [0, 10, 20], size=224), "Describe.").key(ident)  # resolution
    assert k != base.key({**ident, "revision": "y"})  # model revision
    assert k != Request(base.model, base.parts, Decoding(max_new_tokens=65)).key(ident)  # decoding
    assert k != Request(base.model, base.parts, Decoding(64, repetition_penalty=1.2)).key(ident)
    greedy_other_seed = Request(base.model, base.parts, base.decoding, seed=7)
    assert greedy_other_seed.key(ident) == k  # greedy output does not depend on the seed
    sampled = Request(base.model, base.parts, Decoding(64, temperature=0.9), seed=1)
    assert sampled.key(ident) != Request(base.model, base.parts, Decoding(64, temperature=0.9), seed=2).key(ident)
    # metadata does not change the key
    assert Request(base.model, base.parts, base.decoding, meta={"probe": "x"}).key(ident) == k


class CountingBackend:
    """Wraps the sim backend, counts calls, optionally slows each one down."""

    name = "counting"
    supports_letter_logprobs = True

    def __init__(self, inner: SimBackend, delay: float = 0.0, batch: int = 4) -> None:
        self.inner = inner
        self.delay = delay
        self.max_batch_size = batch
        self.calls = 0

    def identity(self):
        return self.inner.identity()

    def generate(self, requests):
        self.calls += len(requests)
        time.sleep(self.delay * len(requests))
        return self.inner.generate(requests)

    def score_options(self, requests, letters):
        self.calls += len(requests)
        return self.inner.score_options(requests, letters)

    def close(self):
        pass


def test_rerun_makes_zero_backend_calls(tmp_path, synthetic_clips):
    store = FrameStore()
    backend = CountingBackend(SimBackend("unbiased", store))
    reqs = [_req(FrameSpec.from_video(p, [0, 10 + k, 40]), "Please describe this video in detail.") for p in synthetic_clips for k in range(3)]
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
    reqs = [_req(FrameSpec.from_video(p, [0, 10 + k, 40]), "Describe the video.") for p in synthetic_clips[:2]
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
    reqs = [_req(FrameSpec.from_video(synthetic_clips[0], [0, 10 + k, 40]), "Describe.") for k in range(3)]
    for _ in range(2):  # asked twice in the run: made once, then served as lost without a call
        gens = eng.run(reqs, accept=lambda r, g: "rejected by the test")
    assert all(g.ok for g in gens) and backend.calls == len(reqs)
    assert (eng.stats.made, eng.stats.unusable, cache.unstored) == (len(reqs), len(reqs), 0)
    assert _file_state(path) == before
    cache.close()


def test_served_from_the_cache_counts_distinct_keys_not_duplicates_in_a_batch(tmp_path, synthetic_clips):
    store = FrameStore()
    backend = CountingBackend(SimBackend("unbiased", store))
    reqs = [_req(FrameSpec.from_video(synthetic_clips[0], [0, 10 + k, 40]), "Describe the video.") for k in range(3)]
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
    gens = eng.run([_req(spec, "good one"), _req(spec, "bad one"), _req(spec, "good two")])
    assert [g.ok for g in gens] == [True, False, True]
    assert "endpoint said no" in gens[1].error
    assert eng.stats.failed == 1
    assert len(eng.cache) == 2  # the failure is not cached: a rerun retries it


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_engine import CountingBackend, _req
    from pytest_posbias.engine import Engine, GenerationCache
    from pytest_posbias.models.sim import SimBackend
    from pytest_posbias.video.frames import FrameSpec, FrameStore
    clip = {clip!r}
    reqs = [_req(FrameSpec.from_video(clip, [0, 5 + k, 40]), "Please describe this video in detail.") for k in range(20)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()), delay=0.15, batch=1)
    def progress(done, total, hits, elapsed):
        print(f"done {{done}}", flush=True)
    Engine(GenerationCache({cache!r}), backend_for=lambda m: b, progress=progress).run(reqs)
    print("finished", flush=True)
    """
)


def test_a_run_killed_midway_resumes_without_repeating_finished_calls(tmp_path, synthetic_clips):
    cache = tmp_path / "c.sqlite"
    script = KILL_SCRIPT.format(tests=str(Path(__file__).parent), clip=str(synthetic_clips[0]), cache=str(cache))
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
    reqs = [_req(FrameSpec.from_video(synthetic_clips[0], [0, 5 + k, 40]), "Please describe this video in detail.") for k in range(20)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()))
    eng = Engine(GenerationCache(cache), backend_for=lambda m: b)
    eng.run(reqs)
    assert eng.stats.cache_hits == finished
    assert b.calls == eng.stats.made == 20 - finished


CONCURRENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from test_engine import CountingBackend, _req
    from pytest_posbias.engine import Engine, GenerationCache
    from pytest_posbias.models.sim import SimBackend
    from pytest_posbias.video.frames import FrameSpec, FrameStore
    reqs = [_req(FrameSpec.from_video({clip!r}, [0, 3 + k, 40]), "Please describe this video in detail.") for k in range(30)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()), delay=0.01, batch=2)
    e = Engine(GenerationCache({cache!r}), backend_for=lambda m: b)
    out = e.run(reqs)
    print("ok", len(out), sum(g.ok for g in out))
    """
)


def test_concurrent_workers_share_the_cache_safely(tmp_path, synthetic_clips):
    cache = tmp_path / "shared.sqlite"
    script = CONCURRENT.format(tests=str(Path(__file__).parent), clip=str(synthetic_clips[1]), cache=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "ok 30 30"
    assert len(GenerationCache(cache)) == 30


def test_run_log_is_versioned_and_survives_a_torn_line(tmp_path):
    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1", "seed": 0})
    log.write({"kind": "request", "key": "k1", "generation": Generation("hi").to_dict(), "cache_hit": False})
    log.write({"kind": "observation", "probe": "p", "value": float("nan")})
    log.close()
    with (tmp_path / "log.jsonl").open("a") as fh:
        fh.write('{"kind": "request", "key": "k2", "gen')  # a crash in the middle of a line
    header, records = read_run_log(tmp_path / "log.jsonl")
    first = json.loads((tmp_path / "log.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "header" and first["schema_version"] == 1
    assert header["run_id"] == "r1"
    assert [r["kind"] for r in records] == ["request", "observation"]
    assert records[1]["value"] is None  # strict JSON: NaN becomes null


def test_run_log_nan_inside_numpy_values_is_strict_json(tmp_path):
    """NaN held by a numpy float32 (not a float subclass), an array or a tuple is null too:
    the write must neither raise nor emit a bare NaN token."""
    import numpy as np

    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    values = [np.float32("nan"), np.array([np.nan, 0.5]), (float("inf"), np.float32(0.25)), np.float64("-inf")]
    for v in values:
        log.write({"kind": "observation", "probe": "p", "value": v})
    log.close()
    lines = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    parsed = [json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}")) for line in lines]
    assert [r["value"] for r in parsed] == [None, [None, 0.5], [None, 0.25], None]


def test_run_log_writes_a_dict_mixing_int_and_str_keys(tmp_path):
    """A record whose dict mixes int and str keys (a per-slot table keyed 1..P beside a "total")
    is written with the keys JSON gives them, not a TypeError from ``sort_keys`` that ends the run;
    NaN inside it is still null."""
    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    log.write({"kind": "observation", "probe": "p", "by_slot": {1: 0.5, 2: float("nan"), "total": 3, None: "x"}})
    log.close()
    [line] = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    # json's own names for those keys, one type at a time: "1", "null"
    assert json.dumps({1: 0, None: 0}) == '{"1": 0, "null": 0}'
    assert json.loads(line)["by_slot"] == {"1": 0.5, "2": None, "total": 3, "null": "x"}


def test_run_log_writes_a_dict_keyed_by_numpy_scalars(tmp_path):
    """Counts keyed by numpy integers (``dict(zip(*np.unique(x, return_counts=True)))``), alone or
    beside string keys, are written with the keys JSON gives the equal Python numbers."""
    import numpy as np

    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    slots, counts = np.unique(np.array([2, 1, 2, 3]), return_counts=True)
    log.write({"kind": "observation", "by_slot": dict(zip(slots, counts, strict=True))})
    log.write({"kind": "observation", "by_slot": {np.int64(1): np.float32("nan"), "total": 3, np.float64(0.5): 1}})
    log.close()
    lines = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    expected = {json.dumps(int(k)): int(c) for k, c in zip(slots.tolist(), counts.tolist(), strict=True)}
    assert json.loads(lines[0])["by_slot"] == expected == {"1": 1, "2": 2, "3": 1}
    assert json.loads(lines[1])["by_slot"] == {"1": None, "total": 3, "0.5": 1}


def test_bad_decoding_parameters_are_named():
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="`max_new_tokens` must be an integer >= 1"):
        Decoding(max_new_tokens=0)
    with pytest.raises(ConfigError, match="`top_p` must lie in"):
        Decoding(top_p=0)
    with pytest.raises(ConfigError, match="`letters` must be given"):
        Request("sim:unbiased", (), want="letters")


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


OPEN_AT_ONCE = """
import sys, time
from pathlib import Path
from pytest_posbias.engine import GenerationCache
start, root = float(sys.argv[1]), Path(sys.argv[2])
for i in range(15):  # fifteen fresh caches, each opened by every process at the same instant
    while time.time() < start + 0.25 * i:
        pass
    GenerationCache(root / f"c{{i}}.sqlite").close()
print("ok")
"""


def test_workers_opening_a_fresh_cache_at_the_same_moment_all_get_it(tmp_path):
    """Switching a new SQLite file to WAL takes a lock SQLite does not wait for: two xdist workers
    opening a fresh cache at once got ``database is locked`` (seen under ``pytest -n 2``)."""
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT_ONCE.format(), str(start), str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err[-2000:]
    for i in range(15):
        c = GenerationCache(tmp_path / f"c{i}.sqlite")
        assert len(c) == 0
        c.close()


# --------------------------------------------------------------------------- a cache row's payload

_FINITE = st.floats(allow_nan=False, allow_infinity=False, width=64)
_COUNT = st.integers(min_value=0, max_value=10**9)
_GENERATIONS = st.one_of(
    st.builds(Generation, text=st.text(max_size=40), n_tokens=_COUNT, finish_reason=st.sampled_from(["stop", "length"]),
              letter_logprobs=st.none() | st.dictionaries(st.text(min_size=1, max_size=2),
                                                          _FINITE | st.just(float("-inf")), max_size=4),
              seconds=st.floats(min_value=0, max_value=1e6), error=st.none(), attempts=_COUNT,
              prompt_tokens=st.none() | _COUNT, visual_tokens=st.none() | _COUNT,
              input_form=st.sampled_from([None, "video", "images"]),
              server_seconds=st.none() | st.floats(min_value=0, max_value=1e6)),
    st.builds(Generation, finish_reason=st.just("error"), error=st.text(max_size=20), attempts=_COUNT),
)
# a field of a stored answer and a JSON value it can never hold (type or range)
_BAD_FIELDS = {
    "text": [5, 1.5, None, True, ["a"], {"a": "b"}],
    "n_tokens": [-1, 1.5, "3", True, None, [1]],
    "finish_reason": ["done", "", None, 1, ["stop"]],
    "letter_logprobs": [[-1.0], "A", 3, {"A": "x"}, {"A": float("nan")}, {"A": float("inf")}, {"A": True},
                        {"A": [0.0]}, {"A": {"B": 0.0}}],
    "seconds": [-1.0, float("nan"), float("inf"), "1", None, False],
    "error": [5, ["x"], {"e": 1}],
    "attempts": [-1, 1.0, True, "1", None],
    "prompt_tokens": [-2, "x", 1.5, False],
    "visual_tokens": [-1, 2.5, "7"],
    "input_form": ["gif", 1, ["video"]],
    "server_seconds": [-0.5, float("inf"), "0.1"],
}
_BAD_PAYLOADS = st.one_of(
    st.tuples(_GENERATIONS, st.sampled_from(sorted(_BAD_FIELDS)), st.data()).map(
        lambda t: {**t[0].to_dict(), t[1]: t[2].draw(st.sampled_from(_BAD_FIELDS[t[1]]))}),
    st.tuples(_GENERATIONS, st.sets(st.sampled_from(["text", "n_tokens", "finish_reason"]), min_size=1)).map(
        lambda t: {k: v for k, v in t[0].to_dict().items() if k not in t[1]}),  # a key every answer has, missing
    st.builds(lambda text, lp: {**Generation(finish_reason="error", error="x").to_dict(), "text": text,
                                "letter_logprobs": lp},  # a failed call that carries something to score
              st.text(min_size=1, max_size=5), st.none())
    | st.just({**Generation(finish_reason="error", error="x").to_dict(), "letter_logprobs": {"A": -1.0}}),
    st.one_of(st.none(), st.booleans(), st.integers(), _FINITE, st.text(max_size=5),
              st.lists(st.integers(), max_size=3)),  # JSON that is not an object
)
_PROPERTY = settings(max_examples=300, database=None, derandomize=True, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(_GENERATIONS)
def test_every_answer_a_backend_can_give_reads_back_from_its_row_unchanged(g):
    assert generation_problem(g.to_dict()) is None
    assert read_payload(json.dumps(g.to_dict(), sort_keys=True)) == g


@_PROPERTY
@given(_BAD_PAYLOADS)
def test_a_payload_of_the_wrong_shape_is_unreadable_never_an_answer(d):
    assert generation_problem(d) is not None
    assert read_payload(json.dumps(d)) is None  # NaN and Infinity too: Python's JSON reader takes them
    with pytest.raises(ValueError, match="not a stored answer"):
        Generation.from_dict(d)  # type: ignore[arg-type]


def test_a_payload_that_is_not_json_or_not_text_is_unreadable():
    for payload in ["{not json", "", b"\xff\xfe", 5, 2.5, "[" * 100_000]:
        assert read_payload(payload) is None, payload
