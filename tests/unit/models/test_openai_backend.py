"""The openai backend against a local chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("openai")

from pytest_posbias.engine import Decoding, Engine, GenerationCache, Request, RunLog
from pytest_posbias.models.openai_backend import OpenAIBackend
from pytest_posbias.video.compose import VideoPart, compose
from pytest_posbias.video.frames import FrameSpec, FrameStore

SECRET = "sk-test-SECRET-4f9a1c"


def _completion(text: str, top: list[tuple[str, float]] | None, finish: str = "stop", reasoning: str | None = None) -> dict:
    lp = None
    if top is not None:
        lp = {"content": [{"token": top[0][0], "logprob": top[0][1], "bytes": None,
                           "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in top]}], "refusal": None}
    return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                         **({"reasoning": reasoning} if reasoning is not None else {})}, "finish_reason": finish, "logprobs": lp}],
            "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())}}


class Server:
    """Scripted chat-completions endpoint: each request pops the next behaviour."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.lock = threading.Lock()
        self.text = "B"
        self.finish = "stop"
        self.reasoning: str | None = None  # a reasoning parser's separate field (vLLM's `reasoning`)
        self.top: list[tuple[str, float]] | None = [("B", -0.2), (" A", -1.9), ("C", -3.0)]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                    server.auth.append(self.headers.get("Authorization", ""))
                    action = server.script.pop(0) if server.script else "ok"
                if action == "timeout":
                    time.sleep(1.5)
                    action = "ok"
                if action in ("429", "500", "503", "400", "401"):
                    payload = json.dumps({"error": {"message": f"scripted {action}", "type": "x", "code": action}}).encode()
                    self.send_response(int(action))
                elif action == "nochoices":
                    payload = json.dumps({**_completion(server.text, None), "choices": []}).encode()
                    self.send_response(200)
                elif action == "malformed":
                    payload = b"this is not json {"
                    self.send_response(200)
                else:
                    top = None if action == "nologprobs" else server.top
                    payload = json.dumps(_completion(server.text, top, server.finish, server.reasoning)).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def backend(server, monkeypatch):
    monkeypatch.setenv("POSBIAS_API_KEY", SECRET)
    b = OpenAIBackend("test-model", FrameStore(), api_base=server.url, concurrency=2, retries=3, timeout=1.0, base_delay=0.01)
    yield b
    b.close()


@pytest.fixture
def two_videos(synthetic_clips):
    return [VideoPart(FrameSpec.from_video(p, [0, 30, 60], size=64), video_id=f"v{k}") for k, p in enumerate(synthetic_clips[:2])]


def test_frames_are_interleaved_jpeg_image_parts_in_order(backend, server, two_videos):
    parts = compose(two_videos, prompt="Summarize each video.")
    [gen] = backend.generate([Request("openai:test-model", tuple(parts), Decoding(16))])
    assert gen.ok and gen.text == "B"
    content = server.requests[0]["messages"][0]["content"]
    kinds = [c["type"] for c in content]
    assert kinds == ["text", "text", "image_url", "image_url", "image_url", "image_url", "text", "image_url", "image_url", "image_url"]
    assert content[0]["text"] == "Summarize each video." and content[1]["text"].startswith("Video 0:")
    assert content[6]["text"].startswith("Video 1:")
    assert all(c["image_url"]["url"].startswith("data:image/jpeg;base64,") for c in content if c["type"] == "image_url")
    assert server.requests[0]["temperature"] == 0.0 and "seed" not in server.requests[0]


@pytest.mark.parametrize("script", [["429", "ok"], ["500", "503", "ok"], ["timeout", "ok"], ["malformed", "ok"]])
def test_transient_failures_are_retried(backend, server, two_videos, script):
    server.script = list(script)
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert gen.ok, gen.error
    assert len(server.requests) == len(script)


def test_retries_are_bounded_and_end_in_a_recorded_error(backend, server, two_videos):
    server.script = ["500"] * 10
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert not gen.ok and gen.finish_reason == "error"
    assert "after 4 attempts" in gen.error and "InternalServerError" in gen.error
    assert len(server.requests) == 4


def test_client_errors_are_not_retried(backend, server, two_videos):
    server.script = ["400"]
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert not gen.ok and "HTTP 400" in gen.error
    assert len(server.requests) == 1


def test_letter_scores_from_top_logprobs(backend, server, two_videos):
    letters = ("A", "B", "C", "D")
    r = Request("openai:test-model", (two_videos[0],), Decoding(1), want="letters", letters=letters)
    [scores] = backend.score_options([r], letters)
    assert scores["B"] == pytest.approx(-0.2) and scores["A"] == pytest.approx(-1.9) and scores["C"] == pytest.approx(-3.0)
    assert scores["D"] == float("-inf")
    assert server.requests[0]["logprobs"] is True and server.requests[0]["max_tokens"] == 1


def test_endpoint_without_logprobs_is_a_clear_error(backend, server, two_videos, tmp_path):
    server.script = ["nologprobs"]
    letters = ("A", "B")
    r = Request("openai:test-model", (two_videos[0],), Decoding(1), want="letters", letters=letters)
    eng = Engine(GenerationCache(tmp_path / "c.sqlite"), backend_for=lambda m: backend)
    [gen] = eng.run([r])
    assert not gen.ok and "returned no logprobs" in gen.error


def test_the_key_is_never_written_anywhere(backend, server, two_videos, tmp_path):
    server.script = ["500", "ok"]
    cache = GenerationCache(tmp_path / "c.sqlite")
    log = RunLog(tmp_path / "run.jsonl", {"model": "openai:test-model"})
    eng = Engine(cache, backend_for=lambda m: backend, runlog=log)
    eng.run([Request("openai:test-model", tuple(compose(two_videos, prompt="Summarize.")), Decoding(8)),
             Request("openai:test-model", (two_videos[1],), Decoding(8), want="both", letters=("A", "B"))])
    log.write({"kind": "model", "identity": dict(backend.identity())})
    log.close()
    cache.close()
    assert server.auth and all(a == f"Bearer {SECRET}" for a in server.auth)  # the key did reach the endpoint ...
    for f in tmp_path.rglob("*"):  # ... and nothing we wrote holds it
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f
    assert SECRET not in json.dumps(backend.identity())


def test_a_content_filtered_answer_is_not_a_clean_stop(backend, server, two_videos):
    """An answer whose finish reason is content_filter is a failed (lost) generation, not a clean stop."""
    server.text, server.finish = "The video shows", "content_filter"
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert not gen.ok


@pytest.mark.parametrize(("raw", "finish", "text"), [
    ("<think>Option A looks wrong; C maybe.</think>\n\nB", "stop", "B"),
    ("<think>Option A looks wrong; C maybe", "length", ""),  # cut inside the reasoning: no answer at all
])
def test_a_reasoning_block_is_not_part_of_the_answer(backend, server, two_videos, raw, finish, text):
    """A served reasoning model's think block is removed from the text; one cut by the token limit leaves no answer."""
    server.text, server.finish = raw, finish
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert gen.ok and gen.text == text


@pytest.mark.parametrize(("raw", "reasoning", "finish", "text"), [
    ("Option A looks wrong; C maybe.\n</think>\n\nB", None, "stop", "B"),  # the template opened the block
    ("Option A looks wrong; C maybe", None, "length", ""),  # bare reasoning cut by the limit: answer_cut_off
    ("B", "Option A looks wrong; C maybe.", "stop", "B"),  # the server's reasoning parser separated it
    ("", "Option A looks wrong; C maybe", "length", ""),
    ("B", "", "stop", "B"),  # an empty think block, separated by the parser
    ("Option A looks wrong; so B", None, "stop", None),  # cannot be told apart: a failed call
])
def test_a_reasoning_models_answer_is_never_its_reasoning(server, two_videos, monkeypatch, raw, reasoning, finish, text):
    """A registry reasoning model (a think-block prefill) whose chat template opens the think block in the prompt,
    served without a reasoning parser, sends bare reasoning: cut by the token limit it is no answer, and text with
    neither `</think>` nor a separate reasoning field fails the call instead of being scored as the answer. Another
    model's text is taken as it comes, and its cache key is unchanged."""
    from pytest_posbias.models.openai_backend import make_backend
    from pytest_posbias.models.registry import resolve
    from pytest_posbias.run_options import RunOptions

    monkeypatch.setenv("POSBIAS_API_KEY", SECRET)
    server.text, server.reasoning, server.finish = raw, reasoning, finish
    thinking = make_backend(resolve("openai:glm41v-9b-thinking"), FrameStore(), RunOptions(api_base=server.url))
    plain = make_backend(resolve("openai:test-model"), FrameStore(), RunOptions(api_base=server.url))
    by_hub_id = make_backend(resolve("openai:zai-org/GLM-4.1V-9B-Thinking"), FrameStore(), RunOptions(api_base=server.url))
    by_hub_id.close()
    try:
        assert thinking.thinks and by_hub_id.thinks and not plain.thinks
        # its letters come from its answer: the first token it writes opens its reasoning
        assert (thinking.supports_letter_logprobs, thinking.scoring) == (False, "text") and plain.scoring == "logprobs"
        assert thinking.identity()["answer_text"] == "think-separated/v1" and "answer_text" not in plain.identity()
        [gen] = thinking.generate([Request("openai:glm41v-9b-thinking", (two_videos[0],), Decoding(8))])
        if text is None:
            assert not gen.ok and "reasoning parser" in gen.error and "--reasoning-parser" in gen.error
        else:
            assert gen.ok and gen.text == text and gen.finish_reason == finish
        [other] = plain.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
        assert other.ok and other.text == (raw.rpartition("</think>")[2].strip())
    finally:
        thinking.close()
        plain.close()


def test_a_reasoning_model_is_never_scored_by_letter_log_probabilities(server, monkeypatch):
    from pytest_posbias.errors import ModelLoadError

    monkeypatch.setenv("POSBIAS_API_KEY", SECRET)
    with pytest.raises(ModelLoadError, match="is a reasoning model.*--posbias-letter-scoring text"):
        OpenAIBackend("glm", FrameStore(), api_base=server.url, letter_scoring="logprobs", thinks=True)


def test_an_answer_the_endpoint_sent_ends_a_run_of_failed_sends(server, two_videos, monkeypatch):
    """The circuit breaker opens on consecutive failed sends: a reply that came back, though no answer to score
    (a reasoning model's bare reasoning), shows the endpoint alive and ends the run."""
    monkeypatch.setenv("POSBIAS_API_KEY", SECRET)
    b = OpenAIBackend("glm", FrameStore(), api_base=server.url, concurrency=1, retries=0, breaker_after=3,
                      base_delay=0.01, thinks=True)
    server.text, server.script = "Option A looks wrong; so B", ["500", "500", "ok", "ok", "ok", "500", "ok"]
    try:
        gens = [b.generate([Request("openai:glm", (two_videos[0],), Decoding(8))])[0] for _ in range(7)]
    finally:
        b.close()
    assert not any(g.ok for g in gens) and all("reasoning parser" in g.error for g in gens[2:5] + gens[6:])
    assert len(server.requests) == 7 and b.counters["breaker_rejected"] == 0


def test_logprobs_without_top_logprobs_are_a_failed_call_not_an_answer_without_a_letter(backend, server, two_videos,
                                                                                        monkeypatch):
    """A letter answer whose logprobs carry no top_logprobs (the server ignored them) fails, never reads as no letter."""
    full = _completion

    def bare(text, top, finish="stop", reasoning=None):
        body = full(text, top, finish)
        body["choices"][0]["logprobs"]["content"][0]["top_logprobs"] = []
        return body

    monkeypatch.setitem(globals(), "_completion", bare)
    r = Request("openai:test-model", (two_videos[0],), Decoding(1), want="letters", letters=("A", "B"))
    [gen] = backend.generate([r])
    assert not gen.ok and "top_logprobs" in gen.error


@pytest.mark.parametrize("finish", ["abort", "error"])
def test_an_answer_the_server_aborted_is_a_failed_call_not_a_clean_stop(backend, server, two_videos, finish):
    """A 200 whose finish reason is vLLM's abort or error (a cut, partial answer) is retried, then a failed call."""
    server.text, server.finish = "The video shows", finish
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert not gen.ok and f"finish_reason {finish}" in gen.error and gen.attempts == 4
    letters = Request("openai:test-model", (two_videos[0],), Decoding(1), want="letters", letters=("A", "B"))
    assert not backend.generate([letters])[0].ok


@pytest.mark.parametrize("bad", [float("inf"), 2.5, float("nan")])
def test_a_letter_log_probability_that_is_not_one_is_a_failed_call(backend, server, two_videos, bad):
    """A top log-probability that is NaN, +inf or above 0 makes the letter request a failed call."""
    server.top = [("A", bad), ("B", -0.5)]
    letters = ("A", "B")
    r = Request("openai:test-model", (two_videos[0],), Decoding(1), want="letters", letters=letters)
    [gen] = backend.generate([r])
    assert not gen.ok


def test_a_200_without_choices_is_retried_then_a_recorded_failure(backend, server, two_videos):
    """A 200 answer with an empty choices list is a malformed body: retried, then a failed call naming why."""
    server.script = ["nochoices"] * 10
    [gen] = backend.generate([Request("openai:test-model", (two_videos[0],), Decoding(8))])
    assert not gen.ok and "no choices" in gen.error and gen.attempts == 4


@pytest.mark.parametrize("url", ["http://user:PW-SECRET@127.0.0.1:abc/v1", "http://127.0.0.1:99999/v1"])
def test_an_api_base_with_a_bad_port_is_a_model_load_error(monkeypatch, url):
    """A base URL whose port is not a port is a ModelLoadError that does not show the URL's password."""
    from pytest_posbias.errors import ModelLoadError

    monkeypatch.setenv("POSBIAS_API_KEY", SECRET)
    with pytest.raises(ModelLoadError) as info:
        OpenAIBackend("test-model", FrameStore(), api_base=url)
    assert "PW-SECRET" not in str(info.value)


@pytest.mark.parametrize("tail", ["\r", "\n"])
def test_a_key_with_a_trailing_line_break_never_reaches_an_error(server, monkeypatch, tail):
    """An API key read with a trailing line break is never quoted in a request's error."""
    from pytest_posbias.video.compose import TextPart

    monkeypatch.setenv("POSBIAS_API_KEY", SECRET + tail)
    b = OpenAIBackend("test-model", FrameStore(), api_base=server.url, retries=0, timeout=1.0)
    try:
        [gen] = b.generate([Request("openai:test-model", (TextPart("Describe."),), Decoding(4))])
    finally:
        b.close()
    assert SECRET not in (gen.error or "")
