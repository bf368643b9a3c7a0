"""A fast OpenAI-compatible stub server on 127.0.0.1 for benchmarks/openai_backend.py.

A real HTTP/1.1 server (``http.server.ThreadingHTTPServer``, keep-alive, one thread per
connection, a listen backlog of 256 so 32+ clients connecting at once are not dropped into
SYN retries) that answers ``POST /v1/chat/completions`` with a canned completion after a fixed
``--latency`` (seconds, a model's time per call), so the client side of a run is measured
apart from any real server. The answer is one option letter; ``usage.completion_tokens`` is
the request's ``max_tokens`` (``max_tokens`` tokens "generated"), ``usage.prompt_tokens`` is
10 plus the frames shown (``image_url`` parts, and the comma-separated frames of a
``data:video/jpeg;base64,`` ``video_url``), and ``logprobs``/``top_logprobs`` are returned when
asked for (letter scoring). ``GET /v1/models`` lists ``--model``.

``GET /stats`` returns what was received since the last ``POST /stats/reset``: the number of
chat requests, their body bytes and an order-independent digest of the bodies (the sum of
each body's SHA-256 prefix mod 2^64), so a benchmark can check that two clients sent the same
requests byte for byte; and when the first chat request arrived and the last answer was sent
(``first``, ``last``: Unix time), so a benchmark can tell the time before the first call and
after the last from the time between.

``--one-at-a-time`` makes the stub a stand-in for one GPU replica: it answers one request at a
time (the others wait their turn), so ``N`` calls take ``N × latency`` however many arrive at once.

Run: ``python benchmarks/openai_stub.py --latency 0.05 [--one-at-a-time] [--model NAME] [--port N]``; it prints
its ``.../v1`` base URL on the first line of stdout and serves until killed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LETTERS = "ABCD"


def frames_shown(body: dict[str, Any]) -> int:
    """Frames in a chat request: one per ``image_url`` part, and per ``video_url`` part the
    comma-separated base64 JPEGs of vLLM's ``data:video/jpeg;base64,`` frame list."""
    n = 0
    for m in body.get("messages", []):
        parts = m.get("content")
        if not isinstance(parts, list):
            continue
        for p in parts:
            if not isinstance(p, dict):
                continue
            if p.get("type") == "image_url":
                n += 1
            elif p.get("type") == "video_url":
                url = str(p.get("video_url", {}).get("url", ""))
                n += url.count(",") if url.startswith("data:video/jpeg;base64,") else 1
    return n


def canned(body: dict[str, Any]) -> dict[str, Any]:
    """The stub's answer to ``body``: letter A, ``max_tokens`` completion tokens, logprobs when asked."""
    completion = int(body.get("max_tokens") or 1)
    prompt = 10 + frames_shown(body)
    lp = None
    if body.get("logprobs"):
        top = [{"token": c, "logprob": -float(k), "bytes": None} for k, c in enumerate(LETTERS)]
        lp = {"content": [{"token": "A", "logprob": 0.0, "bytes": None,
                           "top_logprobs": top[: int(body.get("top_logprobs") or 1)]}], "refusal": None}
    return {"id": "cmpl-stub", "object": "chat.completion", "created": 0, "model": body.get("model", ""),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop",
                         "logprobs": lp}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}


class StubServer:
    """The stub on ``127.0.0.1:port`` (0: a free port) in a background thread; ``url`` is its ``/v1`` base."""

    def __init__(self, *, latency: float = 0.05, model: str = "x", port: int = 0, one_at_a_time: bool = False) -> None:
        self.latency = float(latency)
        self._turn = threading.Lock() if one_at_a_time else None  # one request in the "device" at a time
        self.model = model
        self._lock = threading.Lock()
        self._requests = 0
        self._bytes = 0
        self._digest = 0
        self._first: float | None = None
        self._last: float | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def _send(self, code: int, payload: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                path = self.path.rstrip("/")
                if path.endswith("/models"):
                    self._send(200, json.dumps({"object": "list", "data": [
                        {"id": server.model, "object": "model", "created": 0, "owned_by": "stub"}]}).encode())
                elif path == "/stats":
                    with server._lock:
                        stats = {"requests": server._requests, "bytes": server._bytes, "digest": server._digest,
                                 "first": server._first, "last": server._last}
                    self._send(200, json.dumps(stats).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path.rstrip("/") == "/stats/reset":
                    with server._lock:
                        server._requests = server._bytes = server._digest = 0
                        server._first = server._last = None
                    return self._send(200, b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, b'{"error": {"message": "not found"}}')
                t0 = time.perf_counter()
                h = int.from_bytes(hashlib.sha256(raw).digest()[:8], "little")
                with server._lock:
                    server._requests += 1
                    server._bytes += len(raw)
                    server._digest = (server._digest + h) % (1 << 64)
                    if server._first is None:
                        server._first = time.time()
                body = json.loads(raw)
                if body.get("model") != server.model:
                    return self._send(404, json.dumps({"error": {"message": f"The model `{body.get('model')}` "
                                                                            "does not exist."}}).encode())
                payload = json.dumps(canned(body)).encode()
                if server._turn is not None:
                    with server._turn:
                        time.sleep(server.latency)
                else:
                    rest = server.latency - (time.perf_counter() - t0)
                    if rest > 0:
                        time.sleep(rest)
                self._send(200, payload)
                with server._lock:
                    server._last = time.time()

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # listen backlog: many clients connect at once

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str] | None = None) -> None:
    """Serve until killed; print the base URL first."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.05, help="seconds per answer (default 0.05)")
    ap.add_argument("--model", default="x")
    ap.add_argument("--port", type=int, default=0, help="0: a free port")
    ap.add_argument("--one-at-a-time", action="store_true", help="answer one request at a time (a GPU replica)")
    args = ap.parse_args(argv)
    srv = StubServer(latency=args.latency, model=args.model, port=args.port, one_at_a_time=args.one_at_a_time)
    print(srv.url, flush=True)
    try:
        srv.thread.join()
    except KeyboardInterrupt:
        srv.close()


if __name__ == "__main__":
    main()
