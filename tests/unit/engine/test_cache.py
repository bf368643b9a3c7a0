"""The SQLite generation cache (engine.cache): workers sharing and creating it at once, and every
answer a backend can give reading back unchanged while a row of the wrong shape is unreadable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import TESTS

from pytest_posbias.engine import Generation, GenerationCache
from pytest_posbias.engine.cache import read_payload
from pytest_posbias.engine.calls import generation_problem

CONCURRENT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    from support.counting_backend import CountingBackend, request_of
    from pytest_posbias.engine import Engine, GenerationCache
    from pytest_posbias.models.sim import SimBackend
    from pytest_posbias.video.frames import FrameSpec, FrameStore
    reqs = [request_of(FrameSpec.from_video({clip!r}, [0, 3 + k, 40]), "Please describe this video in detail.") for k in range(30)]
    b = CountingBackend(SimBackend("unbiased", FrameStore()), delay=0.01, batch=2)
    e = Engine(GenerationCache({cache!r}), backend_for=lambda m: b)
    out = e.run(reqs)
    print("ok", len(out), sum(g.ok for g in out))
    """
)


def test_concurrent_workers_share_the_cache_safely(tmp_path, synthetic_clips):
    cache = tmp_path / "shared.sqlite"
    script = CONCURRENT.format(tests=str(TESTS), clip=str(synthetic_clips[1]), cache=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == "ok 30 30"
    assert len(GenerationCache(cache)) == 30


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


_HUGE = "1" + "0" * 400  # a JSON integer too large for a float


@pytest.mark.parametrize("field", ['"seconds": {}', '"server_seconds": {}', '"letter_logprobs": {{"A": {}}}'])
def test_a_payload_with_an_integer_too_large_for_a_float_is_unreadable(field):
    """A row whose numeric field is an integer beyond float range is unreadable (None), never an exception."""
    payload = '{"text": "a", "n_tokens": 1, "finish_reason": "stop", ' + field.format(_HUGE) + "}"
    assert read_payload(payload) is None


def test_get_many_counts_a_row_with_an_integer_too_large_for_a_float_as_unreadable(tmp_path):
    """get_many skips a row whose payload holds an integer beyond float range and counts it unreadable."""
    cache = GenerationCache(tmp_path / "generations.sqlite")
    cache.put_many([("k1", "m", Generation("a")), ("k2", "m", Generation("b"))])
    cache._conn.execute("UPDATE generations SET payload = ? WHERE key = 'k1'",
                        ('{"text": "a", "n_tokens": 1, "finish_reason": "stop", "seconds": ' + _HUGE + "}",))
    try:
        assert set(cache.get_many(["k1", "k2"])) == {"k2"} and cache.unreadable == 1
    finally:
        cache.close()


def test_an_unusable_table_of_another_shape_is_not_an_error_in_the_middle_of_a_run(tmp_path):
    """With an ``unusable`` table lacking its columns, lookups count it unreadable and recording raises no SQLite error."""
    import sqlite3

    cache = GenerationCache(tmp_path / "generations.sqlite", run_id="r1")
    cache._conn.execute("CREATE TABLE unusable (key TEXT PRIMARY KEY, note TEXT)")
    try:
        try:
            assert cache.unusable(["k1"]) == {}
            cache.record_unusable([("k1", "m", Generation("", 0, "stop"), "empty")])
        except sqlite3.Error as exc:
            pytest.fail(f"a damaged unusable table raised mid-run: {exc}")
    finally:
        cache.close()


def _refusing(cache: GenerationCache) -> GenerationCache:
    """``cache`` with its connection refusing every write (as a file made read-only or a full disk would)."""
    cache._conn.execute("PRAGMA query_only = 1")
    return cache


def test_an_answer_the_database_refuses_is_counted_unstored_and_kept_for_the_run(tmp_path):
    """put_many on a database that refuses the write counts the answer unstored and serves it for the rest of the run."""
    cache = _refusing(GenerationCache(tmp_path / "generations.sqlite"))
    try:
        cache.put_many([("k1", "m", Generation("a"))])
        assert cache.unstored == 1 and "refused the write" in cache.unstored_reason
        assert cache.get_many(["k1"]) == {"k1": Generation("a")}
    finally:
        cache.close()


def test_an_unusable_answer_the_database_refuses_is_not_an_error_of_the_run(tmp_path):
    """record_unusable on a database that refuses writes raises nothing (the answer is unusable for this run either way)."""
    cache = GenerationCache(tmp_path / "generations.sqlite", run_id="r1")
    cache.unusable(["k0"])  # the table exists, as after an earlier run
    _refusing(cache)
    try:
        cache.record_unusable([("k1", "m", Generation("", 0, "stop"), "empty answer")])
    finally:
        cache.close()


def test_an_unusable_table_names_only_the_columns_it_lacks_whatever_iterable_lists_its_columns():
    """The shape check names the missing columns alone, given the columns as a list or as a one-pass generator
    (as the cache passes them from ``PRAGMA table_info``)."""
    from pytest_posbias.engine.cache import UNUSABLE_COLUMNS, unusable_shape_problem

    present = [c for c in UNUSABLE_COLUMNS if c != "payload"]
    for columns in (present, iter(present), (c for c in present)):
        assert unusable_shape_problem(columns) == "its unusable table lacks the column payload"
    assert unusable_shape_problem(c for c in UNUSABLE_COLUMNS) == ""
