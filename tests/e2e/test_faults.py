"""Fail closed against a real, faulty OpenAI-compatible server.

The server (tests/support/fault_server.py) is a ThreadingHTTPServer on 127.0.0.1 started here; it
injects 429 with Retry-After, 500, 503, hangs past the client timeout, malformed JSON,
empty ``choices`` and truncated bodies at seeded rates, and answers correctly otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from support.fault_server import FAULTS, FaultServer, _h, completion, has_images, prompt_text
from support.suite_project import write_pyproject, write_suite_project

from pytest_posbias import SCHEMA_VERSION
from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request, RunLog
from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models.openai_backend import OpenAIBackend, api_settings
from pytest_posbias.run.merge import merge_run_logs
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def video(synthetic_clips):
    return VideoPart(FrameSpec.from_video(synthetic_clips[0], [0, 30, 60], size=32), video_id="v0")


def requests_for(video, n: int, want: str = "text") -> list[Request]:
    letters = ("A", "B", "C", "D") if want != "text" else ()
    opts = ("red", "blue", "green", "cyan", "black", "white")
    return [Request("openai:x", (video, TextPart(f"Question {i}: which colour is the disc?\n"
                                                 + "\n".join(f"{c}. {opts[(i + j) % 6]}" for j, c in enumerate("ABCD")))),
                    Decoding(4),
                    want=want, letters=letters) for i in range(n)]


def backend(url: str, **kw) -> OpenAIBackend:
    kw = {"concurrency": 4, "retries": 3, "timeout": 1.0, "base_delay": 0.01, **kw}
    return OpenAIBackend("x", FrameStore(), api_base=url, **kw)


# --------------------------------------------------------------------------- retries per fault


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_retried_and_the_answer_is_the_correct_one(fault, video):
    with FaultServer(rates={fault: 1.0}, max_faults_per_request=1, hang_s=2.0) as srv:
        b = backend(srv.url, timeout=0.5)
        try:
            reqs = requests_for(video, 2, want="both")
            gens = b.generate(reqs)
        finally:
            b.close()
        assert srv.outcomes[fault] == 2, srv.outcomes  # every request met the fault once ...
        for g in gens:  # ... and was answered after one retry
            assert g.ok, g.error
            assert g.attempts == 2
        assert b.counters["retries"] == 2 and b.counters["failed"] == 0
        # the answer is the server's correct one, not anything from the faulty attempt
        assert gens[0].text in "ABCD" and len(gens[0].text) == 1
        assert gens[0].letter_logprobs is not None and max(gens[0].letter_logprobs, key=gens[0].letter_logprobs.get) == gens[0].text


def test_retry_after_is_honoured(video):
    with FaultServer(rates={"429": 1.0}, max_faults_per_request=1, retry_after="1") as srv:
        b = backend(srv.url, base_delay=0.01)
        t0 = time.monotonic()
        [g] = b.generate(requests_for(video, 1))
        elapsed = time.monotonic() - t0
        b.close()
    assert g.ok and g.attempts == 2
    assert elapsed >= 0.95, f"retried after {elapsed:.2f} s although the server asked for 1 s"


def test_exhausted_retries_are_failed_calls_counted_by_the_engine(video, tmp_path):
    with FaultServer(rates={"500": 0.5, "empty_choices": 0.5}, max_faults_per_request=99) as srv:
        b = backend(srv.url, retries=2)
        eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: b)
        gens = eng.run(requests_for(video, 3))
        b.close()
    assert srv.chat_requests == 9  # 3 requests x (1 + 2 retries), not one more
    for g in gens:
        assert not g.ok and g.text == "" and g.letter_logprobs is None
        assert "after 3 attempts" in g.error and "openai:x at http://127.0.0.1" in g.error
        assert ("InternalServerError" in g.error) or ("no choices" in g.error)
    s = eng.stats.snapshot()
    assert s["made"] == 3 and s["failed"] == 3 and s["retries"] == 6
    assert len(eng.cache) == 0  # failures are never cached: a resume sends them again


def test_a_failed_letter_request_fails_alone(video, tmp_path):
    """One bad request in a batch of letter requests: the others keep their answers, none is re-sent."""
    bad = "Question 1:"
    with FaultServer(reject=lambda p: bad in p) as srv:
        b = backend(srv.url)
        eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: b)
        gens = eng.run(requests_for(video, 4, want="letters"))
        b.close()
    assert [g.ok for g in gens] == [True, False, True, True]
    assert "HTTP 400" in gens[1].error and "rejected on purpose" in gens[1].error
    assert srv.chat_requests == 4  # permanent errors are not retried, and good requests not re-sent
    assert eng.stats.failed == 1 and eng.stats.retries == 0


def test_circuit_breaker_bounds_a_dead_endpoint(video):
    with FaultServer(rates={"503": 1.0}, max_faults_per_request=999) as srv:
        b = backend(srv.url, retries=1, concurrency=1, breaker_after=2, breaker_probe_s=60)
        gens = b.generate(requests_for(video, 10))
        b.close()
    assert not any(g.ok for g in gens)
    assert srv.chat_requests == 4  # two requests x two attempts; the other eight were not sent
    assert sum("not sent" in (g.error or "") for g in gens) == 8
    assert b.counters["breaker_rejected"] == 8


def test_requests_waiting_for_a_retry_fail_at_once_when_the_breaker_opens(video):
    # request 0 hangs on every attempt; the others get 503 at once, so the breaker opens while
    # request 0 is still in its retry cycle (9 attempts of 0.4 s): it must stop there, not run it out
    with FaultServer(rates={"503": 1.0}, max_faults_per_request=999, hang_s=5.0,
                     hang_if=lambda p: p.startswith("Question 0:")) as srv:
        b = backend(srv.url, retries=8, timeout=0.4, base_delay=0.001, concurrency=2, breaker_after=1)
        t0 = time.monotonic()
        gens = b.generate(requests_for(video, 6))
        elapsed = time.monotonic() - t0
        b.close()
    assert not any(g.ok for g in gens)
    assert "circuit breaker is open" in gens[0].error and "not retried after" in gens[0].error, gens[0].error
    assert gens[0].attempts < 9
    assert all("not sent" in g.error for g in gens[2:]), [g.error for g in gens]
    assert elapsed < 2.5, f"took {elapsed:.1f} s; request 0 alone would take 3.6 s to run out its retries"
    assert elapsed <= b.time_bound_s()


def test_breaker_stays_open_for_the_rest_of_the_run_by_default(video):
    with FaultServer(status=(503, "down")) as srv:
        b = backend(srv.url, retries=0, concurrency=1, breaker_after=1)
        first = b.generate(requests_for(video, 3))
        assert srv.chat_requests == 1 and not any(g.ok for g in first)
        srv.status = None  # back: not re-admitted in this run (the rerun sends the lost requests)
        time.sleep(0.3)
        again = b.generate(requests_for(video, 3))
        b.close()
    assert srv.chat_requests == 1
    assert all("not sent" in g.error and "not tried again in this run" in g.error for g in again), [g.error for g in again]


def test_time_bound_follows_the_documented_formula():
    b = OpenAIBackend("x", FrameStore(), api_base="http://127.0.0.1:9/v1")  # the defaults
    assert b.time_bound_s() == pytest.approx(2 * (6 * 120 + 1.5 * (0.5 + 1 + 2 + 4 + 8)) + 120)
    assert backend("http://127.0.0.1:9/v1", retries=1, timeout=0.5, base_delay=0.01).time_bound_s() == \
        pytest.approx(2 * (2 * 0.5 + 1.5 * 0.01) + 0.5)


def test_breaker_closes_when_the_endpoint_is_back(video):
    with FaultServer(status=(503, "down")) as srv:
        b = backend(srv.url, retries=0, concurrency=1, breaker_after=1, breaker_probe_s=0.2)
        first = b.generate(requests_for(video, 3))
        assert srv.chat_requests == 1 and not any(g.ok for g in first)
        srv.status = None
        time.sleep(0.25)
        again = b.generate(requests_for(video, 3))
        b.close()
    assert all(g.ok for g in again), [g.error for g in again]


# --------------------------------------------------------------------------- start-up check


def test_unreachable_endpoint_fails_the_check_fast_naming_the_url():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    b = backend(url)
    t0 = time.monotonic()
    with pytest.raises(ModelLoadError) as ei:
        b.check()
    assert time.monotonic() - t0 < 10
    msg = str(ei.value)
    assert url in msg and "openai:x" in msg and "cannot be reached" in msg
    assert "refused" in msg.lower()  # the cause, not just "connection error"


def test_misspelled_model_fails_the_check_with_the_servers_message():
    with FaultServer(served=("qwen3-vl-8b", "other")) as srv:
        b = OpenAIBackend("qwen3vl-8b", FrameStore(), api_base=srv.url, retries=3)
        with pytest.raises(ModelLoadError) as ei:
            b.check()
        assert srv.chat_requests == 1  # a 404 is not retried
    msg = str(ei.value)
    assert "HTTP 404" in msg and "The model `qwen3vl-8b` does not exist." in msg and srv.url in msg
    assert "models served there: other, qwen3-vl-8b" in msg


def test_server_rejecting_top_logprobs_fails_the_check():
    with FaultServer(max_logprobs=5) as srv:
        b = backend(srv.url)
        with pytest.raises(ModelLoadError) as ei:
            b.check()
        assert srv.chat_requests == 1
    msg = str(ei.value)
    assert "HTTP 400" in msg and "max_logprobs (5)" in msg and "--max-logprobs 20" in msg


def test_endpoint_rejecting_image_input_fails_the_check():
    """A text-only model behind the endpoint: the check sends one tiny frame, as the probes do, so the
    run stops at start with the server's message instead of failing every call."""
    for form, sent in (("images", ["image_url"]), ("video", ["video_url"]), ("auto", ["video_url", "image_url"])):
        with FaultServer(reject=lambda p: True, video_only_faults=False) as srv:
            b = backend(srv.url, video_form=form)
            with pytest.raises(ModelLoadError) as ei:
                b.check()
            # auto: the video form first, then (refused) one image, as the image-only endpoints take frames
            assert [body["messages"][0]["content"][0]["type"] for body in srv.bodies] == sent
        assert "HTTP 400" in str(ei.value) and "rejected on purpose" in str(ei.value) and srv.url in str(ei.value)


def test_bad_key_fails_the_check():
    with FaultServer(status=(401, "Incorrect API key provided")) as srv, \
            pytest.raises(ModelLoadError, match=r"HTTP 401\): Incorrect API key provided; set POSBIAS_API_KEY"):
        backend(srv.url).check()


def test_server_errors_at_start_are_retried_then_fail_within_the_budget():
    with FaultServer(status=(500, "CUDA out of memory")) as srv:
        t0 = time.monotonic()
        with pytest.raises(ModelLoadError, match="CUDA out of memory"):
            backend(srv.url).check(budget_s=5)
        assert time.monotonic() - t0 < 6
        assert srv.chat_requests == 3  # transient: retried twice, then given up


def test_hanging_server_fails_the_check_within_the_budget():
    with FaultServer(rates={"hang": 1.0}, max_faults_per_request=99, hang_s=5, video_only_faults=False) as srv:
        t0 = time.monotonic()
        with pytest.raises(ModelLoadError, match="Timeout"):
            backend(srv.url).check(timeout=1.0, budget_s=2.5)
        assert time.monotonic() - t0 < 4.5


def test_endpoint_without_logprobs_falls_back_to_text_scoring_and_says_so():
    with FaultServer(logprobs=False) as srv:
        b = backend(srv.url)
        result = b.check()
    assert b.supports_letter_logprobs is False and result["scoring"] == "text" and "no logprobs" in result["fallback"]


def test_check_passes_on_a_healthy_server_with_logprobs_asked():
    with FaultServer() as srv:
        b = backend(srv.url)
        result = b.check()
        assert srv.chat_requests == 1
    assert result["scoring"] == "logprobs" and result["url"] == srv.url and b.supports_letter_logprobs


def test_settings_from_env_name_bad_values():
    env = {"POSBIAS_API_TIMEOUT": "2.5", "POSBIAS_API_RETRIES": "1", "POSBIAS_API_LOGPROBS": "0"}
    assert api_settings(None, env) == {"timeout": 2.5, "retries": 1, "letter_scoring": "text"}
    with pytest.raises(ModelLoadError, match="POSBIAS_API_TIMEOUT"):
        api_settings(None, {"POSBIAS_API_TIMEOUT": "soon"})
    with pytest.raises(ModelLoadError, match="POSBIAS_API_RETRIES"):
        api_settings(None, {"POSBIAS_API_RETRIES": "-1"})


# --------------------------------------------------------------------------- run log: failed attempt, then success


def test_run_log_keeps_the_success_and_the_failed_attempts(video, tmp_path):
    """The endpoint is down, then back: the same requests are sent again in the same run."""
    run_dir = tmp_path / "runs" / "r1"
    log = RunLog(run_dir / "log-main.jsonl", {"run_id": "r1", "worker": "main", "started": "2026-01-01T00:00:00"})
    cache = GenerationCache(tmp_path / "c.sqlite")
    with FaultServer(status=(503, "warming up")) as srv:
        b = backend(srv.url, retries=0)
        eng = Engine(cache, backend_for=lambda m: b, runlog=log)
        reqs = requests_for(video, 3)
        first = eng.run(reqs, probe="phase")
        srv.status = None
        second = eng.run(reqs, probe="phase")
        third = eng.run(reqs, probe="phase")  # all cached now
        b.close()
    log.close()
    assert not any(g.ok for g in first) and all(g.ok for g in second) and all(g.ok for g in third)
    assert eng.stats.made == 6 and eng.stats.failed == 3 and eng.stats.rereads == 3 and eng.stats.cache_hits == 0
    _header, records = merge_run_logs(run_dir)
    sent = [r for r in records if r["kind"] == "request" and not r["cache_hit"]]
    attempts = [r for r in records if r["kind"] == "attempt"]
    hits = [r for r in records if r["kind"] == "request" and r["cache_hit"]]
    assert len(sent) == 3 and all(r["generation"]["finish_reason"] != "error" for r in sent)
    assert len(attempts) == 3 and all("warming up" in r["generation"]["error"] for r in attempts)
    assert {r["key"] for r in sent} == {r["key"] for r in attempts} == {r["key"] for r in hits}


def _write_log(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {"kind": "header", "schema_version": SCHEMA_VERSION,
            "run_id": "r", "worker": path.stem[4:], "started": "2026-01-01T00:00:00"}
    path.write_text("\n".join(json.dumps(r) for r in [head, *records]) + "\n")


def test_merge_prefers_a_success_from_another_worker_and_keeps_failures_once(tmp_path):
    ok = {"finish_reason": "stop", "text": "A", "error": None}
    err = {"finish_reason": "error", "text": "", "error": "endpoint failed after 6 attempts: APIConnectionError"}
    _write_log(tmp_path / "log-gw0.jsonl", [
        {"kind": "request", "key": "k1", "cache_hit": False, "probe": "p", "generation": err},
        {"kind": "request", "key": "k2", "cache_hit": False, "probe": "p", "generation": err},
        {"kind": "request", "key": "k3", "cache_hit": False, "probe": "p", "generation": ok},
    ])
    _write_log(tmp_path / "log-gw1.jsonl", [
        {"kind": "request", "key": "k1", "cache_hit": False, "probe": "p", "generation": ok},
        {"kind": "request", "key": "k2", "cache_hit": False, "probe": "p", "generation": err},
        {"kind": "request", "key": "k3", "cache_hit": False, "probe": "p", "generation": ok},
    ])
    _h, records = merge_run_logs(tmp_path)
    by = {(r["key"], r["kind"]): r for r in records}
    kinds = sorted((r["key"], r["kind"]) for r in records)
    assert kinds == [("k1", "attempt"), ("k1", "request"), ("k2", "attempt"), ("k2", "request"), ("k3", "request")]
    assert by[("k1", "request")]["generation"]["text"] == "A"  # the success, not the error that sorts first
    assert by[("k2", "request")]["generation"]["finish_reason"] == "error"  # never succeeded: counted once as failed
    assert merge_run_logs(tmp_path) == (_h, records)  # deterministic


# --------------------------------------------------------------------------- the suites against the server


pytestmark_suite = pytest.mark.usefixtures("heavy_modules")

PHASE_SETTINGS = """
[tool.posbias.probes.phase]
items = 8
orderings = 4
"""


def make_project(pytester: pytest.Pytester, manifest: Path | None, cache: str = ".posbias") -> None:
    """The order suite and a small phase config; ``manifest`` None where no probe must run."""
    if (pytester.path / "suites").exists():
        write_pyproject(pytester.path, manifest, PHASE_SETTINGS, cache=cache, model=None)
    else:
        write_suite_project(pytester.path, manifest, ("test_phase_order.py",), PHASE_SETTINGS, cache=cache, model=None)


def run_order(pytester: pytest.Pytester, url: str, name: str, *extra: str):
    res = pytester.runpytest("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", "openai:x", f"--posbias-api-base={url}",
                             "-p", "no:randomly", f"--posbias-json={name}.json", *extra)
    data = json.loads((pytester.path / f"{name}.json").read_text()) if (pytester.path / f"{name}.json").exists() else None
    return res, data


def verdict_core(data: dict) -> list[tuple]:
    return [(v["nodeid"], v["estimate"], v["ci_low"], v["ci_high"], v["n"], v["passed"]) for v in data["verdicts"]]


@pytest.fixture
def api_env(monkeypatch):
    # 3 s: a loaded 2-core runner can take over 1 s to answer a call the server did not delay, and that
    # timeout would be a retry the fault server did not inject (the hang fault below sleeps longer)
    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "3")
    monkeypatch.setenv("POSBIAS_API_BACKOFF", "0.01")
    monkeypatch.setenv("POSBIAS_API_KEY", "sk-test")


@pytestmark_suite
def test_suite_verdicts_with_retried_faults_equal_the_fault_free_run_and_resume_sends_nothing(pytester, small_set, api_env):
    make_project(pytester, small_set, cache=".clean")
    with FaultServer() as clean:
        res0, data0 = run_order(pytester, clean.url, "clean")
    assert data0 is not None, res0.stdout.str()[-3000:]
    n_calls = clean.chat_requests - 1  # minus the start-up check
    assert n_calls == 8 * 4 and data0["calls"]["failed"] == 0
    assert res0.ret == 0 and all(v["passed"] for v in data0["verdicts"])  # the server's model is order-robust

    make_project(pytester, small_set, cache=".faulty")
    rates = {"429": 0.08, "500": 0.06, "503": 0.06, "hang": 0.03, "malformed": 0.05, "empty_choices": 0.05,
             "truncated": 0.05, "cut_json": 0.05}
    with FaultServer(seed=7, rates=rates, hang_s=4.0) as faulty:
        res1, data1 = run_order(pytester, faulty.url, "faulty")
        assert data1 is not None, res1.stdout.str()[-3000:]
        injected = sum(faulty.outcomes[f] for f in rates)
        assert injected >= 8, faulty.outcomes  # the faults really happened
        assert data1["calls"]["failed"] == 0
        assert data1["verdicts"][0]["extra"]["calls"]["retries"] == injected  # every retry counted by the engine
        assert data1["calls"]["retries"] == injected and re.search(rf"\b{injected} retries\b", res1.stdout.str())
        [log] = sorted(pytester.path.glob(".faulty/runs/*/run.jsonl"))
        sent = [json.loads(line) for line in log.read_text().splitlines()]
        sent = [r for r in sent if r.get("kind") == "request"]
        assert len(sent) == n_calls and all(r["generation"]["finish_reason"] != "error" for r in sent)
        assert sum(r["generation"]["attempts"] - 1 for r in sent) == injected  # and in the run log
        assert res1.ret == res0.ret
        assert verdict_core(data1) == verdict_core(data0)
        # resume: a finished run makes no repeated calls
        before = faulty.chat_requests
        _res2, data2 = run_order(pytester, faulty.url, "again")
        assert data2["calls"]["made"] == 0 and data2["calls"]["cache_hits"] == n_calls
        assert faulty.chat_requests == before + 1  # only the start-up check
        assert verdict_core(data2) == verdict_core(data0)


@pytestmark_suite
def test_failed_calls_are_resent_on_resume_and_nothing_finished_is_lost(pytester, small_set, api_env):
    make_project(pytester, small_set)

    def reject(prompt: str) -> bool:  # the prompts whose correct answer is A fail for good in the first run
        return completion({"messages": [{"content": prompt}]})["choices"][0]["message"]["content"] == "A"

    with FaultServer(reject=reject) as srv:  # (the URL is not part of the cache key: another server would do)
        res1, data1 = run_order(pytester, srv.url, "first")
        n_bad = srv.outcomes["400"]
        assert data1 is not None, res1.stdout.str()[-3000:]
        assert 0 < n_bad < 32
        assert data1["calls"]["failed"] == n_bad and data1["calls"]["made"] == 32
        assert res1.ret != 0  # lost units: the gate does not pass
        srv.reject = None  # the server is healthy again
        before = srv.chat_requests
        _res2, data2 = run_order(pytester, srv.url, "second")
        assert srv.chat_requests - before == n_bad + 1  # only the failed ones (and the start-up check)
    assert data2["calls"]["made"] == n_bad and data2["calls"]["cache_hits"] == 32 - n_bad and data2["calls"]["failed"] == 0
    assert all(v["passed"] for v in data2["verdicts"])


@pytestmark_suite
def test_every_call_failing_never_passes(pytester, small_set, api_env):
    make_project(pytester, small_set)
    with FaultServer(reject=lambda p: True) as srv:  # the start-up check is exempt: it passes
        res, data = run_order(pytester, srv.url, "dead")
    out = res.stdout.str()
    m = re.search(r"model calls: (\d+) made, (\d+) (?:cache hits|served from the cache), (\d+) failed", out)
    assert m, out[-3000:]
    assert int(m.group(3)) == int(m.group(1)) > 0  # every call counted as failed
    assert res.ret != 0, out[-3000:]
    assert data is None or not any(v["passed"] for v in data["verdicts"])


@pytestmark_suite
def test_a_server_that_hangs_mid_run_ends_the_run_within_the_bound_with_every_unit_lost(pytester, small_set, api_env,
                                                                                       monkeypatch):
    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "0.5")
    monkeypatch.setenv("POSBIAS_API_RETRIES", "1")
    make_project(pytester, small_set)
    # the start-up check is answered; every probe request then hangs past the client's timeout
    with FaultServer(rates={"hang": 1.0}, max_faults_per_request=999, hang_s=20.0) as srv:
        t0 = time.monotonic()
        res = pytester.runpytest("suites", "-m", "not fusion", "--posbias-fixed", "--posbias-model", "openai:x",
                                 f"--posbias-api-base={srv.url}", "-p", "no:randomly", "--posbias-json=hang.json")
        elapsed = time.monotonic() - t0
        sent = srv.chat_requests - 1
    out = res.stdout.str()
    data = json.loads((pytester.path / "hang.json").read_text())
    gates = len(data["verdicts"])
    assert gates >= 4, out[-3000:]
    bound = OpenAIBackend("x", FrameStore(), api_base=srv.url, timeout=0.5, retries=1, base_delay=0.01).time_bound_s()
    # the breaker opens at the 8th consecutive failed request; the other 3 of the 4 concurrent requests may each
    # have sent both attempts by then: at most (breaker_after + concurrency - 1) x (retries + 1) = 11 x 2
    assert sent <= (8 + 4 - 1) * 2, sent
    calls = data["calls"]
    assert calls["failed"] == calls["made"] > sent, calls  # every planned request is a lost unit, counted
    assert res.ret != 0, out[-3000:]  # nothing measured: never a pass
    assert not any(v["passed"] for v in data["verdicts"])
    assert "circuit breaker is open" in (pytester.path / ".posbias").joinpath(
        next((pytester.path / ".posbias" / "runs").iterdir()), "run.jsonl").read_text()
    assert elapsed < bound + 60, f"{elapsed:.1f} s for {gates} gates (model time bound {bound:.1f} s)"


@pytestmark_suite
@pytest.mark.parametrize("server_kw, expected", [
    ({"served": ("qwen3-vl-8b",)}, r"HTTP 404\): The model `x` does not exist\.; models served there: qwen3-vl-8b"),
    ({"max_logprobs": 5}, r"HTTP 400\): top_logprobs must be less than or equal to max_logprobs \(5\)"),
])
def test_permanent_endpoint_errors_stop_the_run_at_start(pytester, small_set, api_env, server_kw, expected):
    make_project(pytester, small_set)
    with FaultServer(**server_kw) as srv:
        res, _data = run_order(pytester, srv.url, "bad")
        assert srv.chat_requests == 1  # one start-up request, no test ran a probe
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert re.search(expected, out), out[-3000:]
    assert srv.url in out
    assert "PASS" not in out and "passed" not in out


def test_unreachable_endpoint_exits_non_zero_within_30_s_naming_the_url(pytester):
    make_project(pytester, None)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    t0 = time.monotonic()
    res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", "openai:x",
                                        f"--posbias-api-base={url}", "-p", "no:randomly", timeout=120)
    elapsed = time.monotonic() - t0
    out = res.stdout.str() + res.stderr.str()
    assert res.ret not in (0, 1) and res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert elapsed < 30, f"took {elapsed:.1f} s"
    assert url in out and "cannot be reached" in out and "refused" in out.lower()
    assert "model calls" not in out  # no probe started


def test_with_xdist_the_controller_checks_the_endpoint_before_workers_start(pytester, api_env):
    make_project(pytester, None)
    with FaultServer(served=("qwen3-vl-8b",)) as srv:
        res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-model", "openai:x", f"--posbias-api-base={srv.url}",
                                            "-p", "no:randomly", "-n", "2", timeout=120)
        assert srv.chat_requests == 1  # the controller's check; no worker got as far as a probe
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "The model `x` does not exist." in out and srv.url in out and "INTERNALERROR" not in out


def test_load_models_checks_the_openai_judge_too_and_logs_the_check(tmp_path, api_env):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.engine import read_run_log
    from pytest_posbias.run.context import RunContext

    with FaultServer(served=("x",)) as srv:
        opts = RunOptions(models=("openai:x",), judge="openai:judge-7", api_base=srv.url, cache=str(tmp_path / "c"))
        ctx = RunContext.create(opts, PosbiasConfig(), rootdir=tmp_path, worker="main", run_id="t")
        with pytest.raises(ModelLoadError, match=r"openai:judge-7: the endpoint .* \(HTTP 404\): The model `judge-7` does not exist"):
            ctx.load_models()
        ctx.close()
        ok = RunContext.create(dataclasses.replace(opts, judge="embed"), PosbiasConfig(), rootdir=tmp_path, worker="main", run_id="u")
        ok.load_models()
        ok.close()
    _h, records = read_run_log(tmp_path / "c" / "runs" / "u" / "log-main.jsonl")
    [model] = [r for r in records if r["kind"] == "model"]
    assert model["check"]["scoring"] == "logprobs" and model["check"]["url"] == srv.url


@pytestmark_suite
def test_replicas_video_form_and_no_seed_options_reach_the_run_log(pytester, small_set, api_env):
    """Through pytest: two --api-base replicas share the calls, frames go as one video_url,
    and --posbias-no-request-seed is in the run log header and the model's identity."""
    make_project(pytester, small_set)
    with FaultServer() as a, FaultServer() as b:
        res, data = run_order(pytester, a.url, "replicas", f"--posbias-api-base={b.url}", "--posbias-video-form=video",
                              "--posbias-no-request-seed", "--posbias-api-retries=2", "--posbias-concurrency=8")
        assert data is not None, res.stdout.str()[-3000:]
        assert a.outcomes["ok"] > 1 and b.outcomes["ok"] > 1  # both replicas answered probe calls
    [log] = sorted(pytester.path.glob(".posbias/runs/*/run.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    header = records[0]
    assert header["config"]["no_request_seed"] is True and header["config"]["video_form"] == "video"
    assert header["config"]["api_base"] == [a.url, b.url] and header["config"]["api_retries"] == 2
    [model] = [r for r in records if r.get("kind") == "model"]
    assert model["identity"]["request_seed"] is False and model["identity"]["input_form"] == "video"
    assert "api_base" not in model["identity"]
    sent = [r for r in records if r.get("kind") == "request"]
    assert len(sent) == 32 and all(r["generation"]["input_form"] == "video" for r in sent)


@pytestmark_suite
@pytest.mark.parametrize("scoring, where", [("logprobs", "among the top-20 logprobs"),
                                             ("text", "parseable from the answer text")])
def test_answers_without_an_option_letter_are_counted_in_the_verdict_reason(pytester, small_set, api_env, scoring, where):
    """The share of answers with no option letter is in the verdict's reason (terminal,
    report), in both scoring modes, not only in the JSON."""
    make_project(pytester, small_set)
    with FaultServer(no_letter=lambda p: _h("no-letter", p) % 4 == 0) as srv:
        res, data = run_order(pytester, srv.url, f"noletter-{scoring}", f"--posbias-letter-scoring={scoring}")
        n_bad = sum(1 for b in srv.bodies if srv.no_letter is not None and has_images(b)
                    and not srv.is_startup_check(b) and srv.no_letter(prompt_text(b)))
    assert data is not None, res.stdout.str()[-3000:]
    [v] = data["verdicts"]
    assert v["extra"]["mode_scoring"] == scoring and v["extra"]["answers"] == 32
    assert 0 < n_bad < 32
    note = f"{n_bad} of 32 answers ({n_bad / 32:.1%}) had no option letter {where}"
    assert note in v["reason"] and v["extra"]["no_option_letter"]["without_letter"] == n_bad
    assert note in res.stdout.str()  # the failing gate's reason is printed


@pytestmark_suite
def test_a_password_in_the_api_base_reaches_no_output(pytester, small_set, api_env, monkeypatch):
    """``--posbias-api-base http://user:password@host/v1``: the client's own error messages quote the
    request URL; neither the terminal nor any file the run writes holds the password, when calls fail
    mid-run and when the endpoint fails the start-up check."""
    monkeypatch.setenv("POSBIAS_API_RETRIES", "1")  # a fault twice in a row is a failed call
    make_project(pytester, small_set)
    rates = {"500": 0.3, "malformed": 0.2}
    with FaultServer(seed=3, rates=rates, max_faults_per_request=9) as srv:
        res, data = run_order(pytester, srv.url.replace("http://", "http://admin:hunter2PW@"), "faulty",
                              "--junitxml=j.xml", "--posbias-markdown=s.md")
    assert data is not None and data["calls"]["failed"] > 0, res.stdout.str()[-3000:]
    with FaultServer(status=(500, "boom")) as srv:
        down, _ = run_order(pytester, srv.url.replace("http://", "http://admin:hunter2PW@"), "down")
    assert down.ret == pytest.ExitCode.USAGE_ERROR, down.stdout.str()[-3000:]
    assert "cannot be reached or does not answer" in down.stderr.str() + down.stdout.str()
    for out in (res.stdout.str(), res.stderr.str(), down.stdout.str(), down.stderr.str()):
        assert "hunter2PW" not in out
    leaked = [p for p in pytester.path.rglob("*") if p.is_file() and b"hunter2PW" in p.read_bytes()]
    assert not leaked, leaked
