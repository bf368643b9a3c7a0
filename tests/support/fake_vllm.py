"""A stand-in for vLLM's OpenAI server: ``python tests/support/fake_vllm.py --model M --served-model-name N --port P ...``.

It serves ``/health``, ``/version``, ``/v1/models`` and the fault server's completions
(tests/support/fault_server.py) on 127.0.0.1:P, and starts one child process that sleeps (as vLLM's
engine core does), in its own process group. ``FAKE_VLLM_RECORD`` (a directory) gets one JSON
file per start: pid, child pid, argv, ``CUDA_VISIBLE_DEVICES`` and whether ``VLLM_API_KEY`` is set
(vLLM then refuses unauthenticated ``/v1`` requests). ``FAKE_VLLM_MODE``:

* ``ok`` (default): healthy after ``FAKE_VLLM_DELAY_S`` seconds (default 0);
* ``fail``: prints a few lines, the last ``fake-vllm: CUDA out of memory``, and exits 1;
* ``hang``: never healthy (``/health`` answers 503).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the support package

from support.fault_server import FaultServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--served-model-name")
    ap.add_argument("--port", type=int)
    ap.add_argument("--host")
    args, _rest = ap.parse_known_args()
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    record = os.environ.get("FAKE_VLLM_RECORD")
    if record:
        Path(record).mkdir(parents=True, exist_ok=True)
        (Path(record) / f"{os.getpid()}.json").write_text(json.dumps(
            {"pid": os.getpid(), "child": child.pid, "argv": sys.argv[1:], "pgid": os.getpgid(0),
             "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "vllm_api_key": "VLLM_API_KEY" in os.environ}))
    print(f"fake-vllm: serving {args.model} as {args.served_model_name} on port {args.port}", flush=True)
    if mode == "fail":
        for i in range(5):
            print(f"fake-vllm: loading shard {i}", flush=True)
        print("fake-vllm: CUDA out of memory", flush=True)
        child.kill()
        sys.exit(1)
    if mode == "hang":
        time.sleep(3600)
    time.sleep(float(os.environ.get("FAKE_VLLM_DELAY_S", "0")))
    FaultServer(served=(args.served_model_name,), port=args.port)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
