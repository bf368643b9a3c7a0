"""Video input form, the streaming pool, replicas, knobs and server hints of the openai
backend, against real HTTP servers on 127.0.0.1 (tests/support/fault_server.py)."""

from __future__ import annotations

import base64
import io
import json
import threading
import time

import numpy as np
import pytest

pytest.importorskip("openai")

from support.fault_server import FaultServer

from pytest_posbias.config import parse_config
from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request, RunLog, read_run_log
from pytest_posbias.errors import ConfigError, ModelLoadError
from pytest_posbias.gates import no_letter_note
from pytest_posbias.models.openai_backend import OpenAIBackend, api_settings
from pytest_posbias.models.openai_encode import FrameEncoder
from pytest_posbias.models.openai_pool import stream
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


@pytest.fixture
def video(synthetic_clips):
    return VideoPart(FrameSpec.from_video(synthetic_clips[0], [0, 20, 40, 60], size=32), video_id="v0")


def reqs(video, n: int, *, decoding: Decoding | None = None) -> list[Request]:
    return [Request("openai:x", (video, TextPart(f"Question {i}: which colour?\nA. red\nB. blue")),
                    decoding or Decoding(4)) for i in range(n)]


def backend(urls, **kw) -> OpenAIBackend:
    kw = {"concurrency": 4, "retries": 3, "timeout": 2.0, "base_delay": 0.01, **kw}
    return OpenAIBackend("x", FrameStore(), api_base=urls, **kw)


def _decode(b64: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64))).convert("RGB"))


# --------------------------------------------------------------------------- input form


def test_video_form_sends_one_video_url_of_the_frames_in_order(video):
    with FaultServer() as srv:
        b = backend(srv.url, video_form="video")
        [g] = b.generate(reqs(video, 1))
        b.close()
    assert g.ok and g.input_form == "video"
    parts = srv.bodies[0]["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["video_url", "text"]
    url = parts[0]["video_url"]["url"]
    assert url.startswith("data:video/jpeg;base64,")
    frames = [_decode(f) for f in url.removeprefix("data:video/jpeg;base64,").split(",")]
    want = FrameStore().materialize(video.frames)
    assert len(frames) == len(want) == 4
    for got, ref in zip(frames, want, strict=True):  # each piece is that frame's JPEG (lossy: close, not equal)
        assert got.shape == ref.shape and np.abs(got.astype(int) - ref.astype(int)).mean() < 8
    assert g.prompt_tokens == 10 + 4  # the server's usage, passed through


def test_images_form_sends_one_image_per_frame(video):
    with FaultServer() as srv:
        b = backend(srv.url, video_form="images")
        [g] = b.generate(reqs(video, 1))
        b.close()
    parts = srv.bodies[0]["messages"][0]["content"]
    assert g.ok and g.input_form == "images"
    assert [p["type"] for p in parts] == ["image_url"] * 4 + ["text"]


def test_auto_form_is_video_where_accepted_and_images_where_refused_and_changes_the_key(video):
    identities = {}
    for accepts in (True, False):
        with FaultServer(video=accepts) as srv:
            b = backend(srv.url)
            result = b.check()
            [g] = b.generate(reqs(video, 1))
            b.close()
        assert g.ok, g.error
        assert result["input_form"] == g.input_form == ("video" if accepts else "images")
        assert ("video_refused" in result) is (not accepts)
        identities[accepts] = dict(b.identity())
    r = reqs(video, 1)[0]
    assert r.key(identities[True]) != r.key(identities[False])  # the form changes the model's input


def test_cache_key_does_not_depend_on_the_url(video):
    a, b = backend("http://127.0.0.1:1/v1"), backend(["http://127.0.0.1:2/v1", "http://127.0.0.1:3/v1"])
    r = reqs(video, 1)[0]
    assert r.key(a.identity()) == r.key(b.identity())
    assert "127.0.0.1" not in json.dumps(dict(a.identity()))


def test_frames_are_encoded_once_per_frame_and_resolution(synthetic_clips):
    enc = FrameEncoder(FrameStore())
    spec = FrameSpec.from_video(synthetic_clips[0], [0, 10, 20], size=32)
    first = enc.frames(spec)
    assert enc.encoded == 3
    again = enc.frames(FrameSpec.from_video(synthetic_clips[0], [10, 20, 30], size=32))
    assert enc.encoded == 4 and again[:2] == first[1:]  # frames 10, 20 came from the cache
    enc.frames(FrameSpec.from_video(synthetic_clips[0], [0], size=48))
    assert enc.encoded == 5  # another resolution is another frame


# --------------------------------------------------------------------------- streaming pool


def test_stream_bounds_in_flight_by_concurrency_not_batch_size():
    lock, state = threading.Lock(), {"now": 0, "max": 0}
    started: dict[int, float] = {}
    ended: dict[int, float] = {}

    def send(i: int, payload: int) -> int:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            started[i] = time.monotonic()
        time.sleep(0.05 if i % 5 else 0.3)  # a slow call every fifth
        with lock:
            state["now"] -= 1
            ended[i] = time.monotonic()
        return payload

    out = list(stream(60, lambda i: i * 10, send, lambda i, e: -1, concurrency=20))
    assert sorted(i for i, _ in out) == list(range(60)) and all(v == i * 10 for i, v in out)
    assert state["max"] == 20  # above the backend's old batch size of 16
    # no batch barrier: requests past the first 20 start while the first slow call is still in flight
    # (synchronous batches of 20 would start request 20 only after every call of the first batch ended)
    assert any(started[i] < ended[0] for i in range(20, 60)), (ended[0], sorted(started.values())[20:25])


def test_stream_turns_errors_into_failures_of_their_own_request():
    def prepare(i: int) -> int:
        if i == 3:
            raise ValueError("unreadable video")
        return i

    def send(i: int, p: int) -> str:
        if i == 5:
            raise RuntimeError("boom")
        return "ok"

    out = dict(stream(8, prepare, send, lambda i, e: f"failed: {e}", concurrency=3))
    assert out == {**{i: "ok" for i in range(8)}, 3: "failed: unreadable video", 5: "failed: boom"}


def test_stream_issues_requests_while_the_caller_is_busy_with_an_answer():
    """The next request starts when a call returns, not when the caller has consumed an answer."""
    lock, ends = threading.Lock(), []
    t0 = time.monotonic()

    def send(i: int, payload: int) -> int:
        time.sleep(0.1)
        with lock:
            ends.append(time.monotonic() - t0)
        return payload

    got = []
    for i, _v in stream(16, lambda i: i, send, lambda i, e: -1, concurrency=8):
        time.sleep(0.1)  # the caller caches and logs each answer: slow here
        got.append(i)
    assert sorted(got) == list(range(16)) and len(ends) == 16
    # two waves of 8 calls end by ~0.2 s; issuing from the caller's loop would end the last near 16 x 0.1 s
    assert max(ends) < 0.8, ends


def test_closing_a_stream_stops_issuing_requests():
    started = []

    def send(i: int, payload: int) -> int:
        started.append(i)
        time.sleep(0.05)
        return payload

    it = stream(50, lambda i: i, send, lambda i, e: -1, concurrency=4)
    first = [next(it) for _ in range(3)]
    it.close()
    n_at_close = len(started)
    time.sleep(0.3)
    assert len(first) == 3 and len(started) <= n_at_close + 4 < 50  # at most the calls that were being taken


def test_threads_asking_for_the_same_spec_encode_it_once():
    class SlowStore:
        calls = 0

        def materialize(self, spec: FrameSpec) -> np.ndarray:
            SlowStore.calls += 1
            time.sleep(0.2)
            return np.zeros((len(spec), 16, 16, 3), np.uint8)

    enc = FrameEncoder(SlowStore())  # type: ignore[arg-type]
    spec = FrameSpec.synthetic("noise", 3, size=16, seed=1)
    out: list[list[str]] = []
    threads = [threading.Thread(target=lambda: out.append(enc.frames(spec))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert SlowStore.calls == 1 and enc.encoded == 3 and enc.hits == 9
    assert len(out) == 4 and all(o == out[0] for o in out)


def test_engine_caches_each_answer_as_it_arrives_and_counts_wall_time(video, tmp_path):
    with FaultServer(delay_s=0.2, processing_ms=150) as srv:
        b = backend(srv.url, concurrency=8)
        cache = GenerationCache(tmp_path / "c.sqlite")
        stop_after = 5

        def progress(done: int, total: int, hits: int, elapsed: float) -> None:
            if done == stop_after:
                raise KeyboardInterrupt  # the run is killed here

        eng = Engine(cache, backend_for=lambda m: b, progress=progress)
        with pytest.raises(KeyboardInterrupt):
            eng.run(reqs(video, 24))
        assert len(cache) == stop_after  # every answer that arrived is in the cache, nothing else
        eng2 = Engine(cache, backend_for=lambda m: b)
        t0 = time.monotonic()
        gens = eng2.run(reqs(video, 24))
        elapsed = time.monotonic() - t0
        b.close()
    s = eng2.stats
    assert all(g.ok for g in gens) and s.made == 24 - stop_after and s.cache_hits == stop_after
    assert s.wall_seconds <= elapsed and s.model_seconds > 1.5 * s.wall_seconds  # overlap: wall, not the sum
    assert s.server_seconds == pytest.approx(0.15 * s.made)  # openai-processing-ms, summed
    assert s.prompt_tokens == 14 * s.made and all(g.server_seconds == pytest.approx(0.15) for g in gens)


# --------------------------------------------------------------------------- replicas


@pytest.mark.parametrize("n_replicas", [2, 3])
def test_a_replica_killed_mid_run_loses_and_duplicates_nothing(video, tmp_path, n_replicas):
    servers = [FaultServer(delay_s=0.03) for _ in range(n_replicas)]
    try:
        notes: list[str] = []
        b = backend([s.url for s in servers], concurrency=6, notify=notes.append)
        b.check()
        cache = GenerationCache(tmp_path / "c.sqlite")
        log = RunLog(tmp_path / "run.jsonl", {"t": 1})

        def progress(done: int, total: int, hits: int, elapsed: float) -> None:
            if done == 15:
                servers[0].kill()

        eng = Engine(cache, backend_for=lambda m: b, runlog=log, progress=progress)
        n = 60
        gens = eng.run(reqs(video, n))
        log.close()
        alive = [r.alive for r in b.router.replicas]
        b.close()
    finally:
        for s in servers[1:]:
            s.close()
    assert all(g.ok for g in gens), [g.error for g in gens if not g.ok][:3]
    assert len(cache) == n and eng.stats.made == n and eng.stats.failed == 0
    _h, records = read_run_log(tmp_path / "run.jsonl")
    keys = [r["key"] for r in records if r["kind"] == "request"]
    assert len(keys) == n == len(set(keys))  # each request answered and logged once
    assert not alive[0] and all(alive[1:])
    assert any("taken out" in m and servers[0].url in m for m in notes)
    assert all(s.outcomes["ok"] > 0 for s in servers)  # requests were spread before the kill
    served_after = sum(s.outcomes["ok"] for s in servers[1:])
    assert served_after + servers[0].outcomes["ok"] >= n


def test_least_outstanding_routing_spreads_over_replicas(video):
    servers = [FaultServer(delay_s=0.05) for _ in range(3)]
    try:
        b = backend([s.url for s in servers], concurrency=6)
        gens = b.generate(reqs(video, 30))
        b.close()
    finally:
        for s in servers:
            s.close()
    assert all(g.ok for g in gens)
    counts = [s.outcomes["ok"] for s in servers]
    assert sum(counts) == 30 and min(counts) >= 6, counts


# --------------------------------------------------------------------------- knobs and hints


def test_seeded_sampling_crash_names_the_workaround_and_no_seed_avoids_it(video):
    sampled = Decoding(4, temperature=0.7)
    with FaultServer(seed_crash=True) as srv:
        notes: list[str] = []
        b = backend(srv.url, retries=0, notify=notes.append)
        [g] = b.generate(reqs(video, 1, decoding=sampled))
        b.close()
        assert not g.ok and "CPU Generator does not use offset" in g.error and "--no-enable-chunked-prefill" in g.error
        assert len(notes) == 1 and "--posbias-no-request-seed" in notes[0]
        nb = backend(srv.url, retries=0, request_seed=False)
        [g2] = nb.generate(reqs(video, 1, decoding=sampled))
        nb.close()
    assert g2.ok and "seed" not in srv.bodies[-1]
    assert nb.identity()["request_seed"] is False and b.identity()["request_seed"] is True


def test_letter_scoring_text_asks_no_logprobs_and_logprobs_mode_requires_them():
    with FaultServer(logprobs=False) as srv:
        b = backend(srv.url, letter_scoring="logprobs")
        with pytest.raises(ModelLoadError, match="--posbias-letter-scoring text"):
            b.check()
        t = backend(srv.url, letter_scoring="text")
        assert t.check()["scoring"] == "text" and not t.supports_letter_logprobs
        assert "logprobs" not in srv.bodies[-1]


def test_options_override_the_environment_and_bad_values_name_the_option():
    env = {"POSBIAS_API_TIMEOUT": "30", "POSBIAS_API_RETRIES": "2"}
    got = api_settings(RunOptions(api_timeout=7.5, api_retries=0, video_form="images", letter_scoring="text",
                                  no_request_seed=True, concurrency=32), env)
    assert got == {"timeout": 7.5, "retries": 0, "video_form": "images", "letter_scoring": "text",
                   "request_seed": False, "concurrency": 32}
    assert api_settings(None, env) == {"timeout": 30.0, "retries": 2}
    assert api_settings(RunOptions(), env) == {"timeout": 30.0, "retries": 2, "video_form": "auto",
                                               "letter_scoring": "auto", "concurrency": 4}
    with pytest.raises(ModelLoadError, match="--posbias-api-retries must be an integer from 0 to 10"):
        api_settings(RunOptions(api_retries=11), {})
    with pytest.raises(ModelLoadError, match="--posbias-video-form must be one of video, images, auto"):
        api_settings(RunOptions(video_form="mp4"), {})
    cfg = parse_config({"api_base": ["http://a/v1", "http://b/v1"], "api_timeout": 60, "video_form": "video",
                        "no_request_seed": True})
    assert cfg.get("api_base") == ["http://a/v1", "http://b/v1"] and cfg.get("api_timeout") == 60
    with pytest.raises(ConfigError, match="api_timeout"):
        parse_config({"api_timeout": 0})


def test_no_letter_share_is_worded_for_each_scoring_mode():
    assert no_letter_note({"answers": 300, "unparseable": 110, "mode_scoring": "logprobs"}) == \
        "110 of 300 answers (36.7%) had no option letter among the top-20 logprobs (lost units, not scored)"
    assert "parseable from the answer text" in no_letter_note({"answers": 10, "unparseable": 1, "mode_scoring": "text"})
    assert no_letter_note({"answers": 10, "unparseable": 0, "mode_scoring": "text"}) == ""


class _Raw:
    """A raw response of the fake client: a parsed body and headers."""

    def __init__(self, headers):
        self.headers = headers

    def parse(self):
        return "response"


def _router_answering(headers):
    from types import SimpleNamespace

    from pytest_posbias.models.openai_pool import Replica, ReplicaRouter

    raw = SimpleNamespace(create=lambda **kw: _Raw(headers))
    client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(with_raw_response=raw)))
    return ReplicaRouter([Replica("http://127.0.0.1:1/v1", client)])


@pytest.mark.parametrize("value", ["nan", "inf", "-250"])
def test_a_garbage_server_time_header_is_no_server_time(value):
    """A processing-time header that is not a finite, non-negative number gives no server time (None)."""
    from pytest_posbias.models.openai_pool import send

    resp, server = send(_router_answering({"openai-processing-ms": value}), {}, validate=lambda r: None)
    assert resp == "response" and server is None


def test_a_server_time_header_is_read_in_seconds():
    """openai-processing-ms of 250 is 0.25 s of server time; no header is None."""
    from pytest_posbias.models.openai_pool import send

    assert send(_router_answering({"openai-processing-ms": "250"}), {}, validate=lambda r: None)[1] == 0.25
    assert send(_router_answering({}), {}, validate=lambda r: None)[1] is None
