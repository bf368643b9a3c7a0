"""``--model vllm:SPEC`` (pytest_posbias.models.vllm_managed) with a fake ``vllm`` command (tests/support/fake_vllm.py).

Start, failure to start (the log's last lines in the error), the time limit, the servers gone
after a stop and after pytest's own death by SIGTERM or SIGKILL (by process group, by pid and
by port), one server per GPU of a fake ``CUDA_VISIBLE_DEVICES``, the identity, and a suite run
through ``vllm:`` from the plugin.

Placed with ``models/vllm_managed.py``, its subject; the suite run through ``vllm:`` uses pytester.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support import REPO, TESTS
from support.processes import alive, group_members
from support.suite_project import write_suite_project

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models import vllm_managed as vm
from pytest_posbias.models.registry import model_label, resolve
from pytest_posbias.run_options import RunOptions

FAKE = TESTS / "support" / "fake_vllm.py"


FAKE_CMD = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE))}"


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rec = tmp_path / "record"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(rec))
    monkeypatch.setenv("POSBIAS_API_KEY", "sk-test")
    monkeypatch.delenv("POSBIAS_VLLM_PYTHON", raising=False)
    return rec


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _records(rec: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(rec.glob("*.json"))] if rec.exists() else []


def _gone(rec: Path, ports: list[int], *, within: float = 30.0) -> None:
    """Every fake server, its child and its process group gone, and no port listening, within ``within`` s."""
    deadline = time.monotonic() + within
    recs = _records(rec)
    assert recs
    while time.monotonic() < deadline:
        if not any(alive(r["pid"]) or alive(r["child"]) or bool(group_members(r["pgid"])) for r in recs) \
                and not any(_listening(p) for p in ports):
            return
        time.sleep(0.2)
    left = [(r["pid"], alive(r["pid"]), r["child"], alive(r["child"]), bool(group_members(r["pgid"]))) for r in recs]
    raise AssertionError(f"vLLM processes left after {within} s: {left}; ports {[p for p in ports if _listening(p)]}")


def test_resolve_vllm_specs(ckpt: Path) -> None:
    r = resolve(f"vllm:{ckpt}")
    assert (r.backend, r.target) == ("vllm", str(ckpt.resolve()))
    assert model_label(f"vllm:{ckpt}") == "vllm:tiny-ckpt"
    a = resolve("vllm:qwen3vl8b")
    assert (a.backend, a.target, a.entry.alias if a.entry else None) == ("vllm", "Qwen/Qwen3-VL-8B-Instruct", "qwen3vl8b")
    assert resolve("vllm:minicpm-o-45").target == "openbmb/MiniCPM-o-4_5"  # remote code: vLLM may serve it
    assert resolve("vllm:org/some-model").target == "org/some-model"
    for bad, msg in [("vllm:", "needs a registry alias"), ("vllm:gpt-5.4", "API model"),
                     ("vllm:not a model", "neither a checkpoint directory")]:
        with pytest.raises(ModelLoadError, match=msg):
            resolve(bad)


def test_start_one_server_per_gpu_identity_and_stop(ckpt: Path, tmp_path: Path, record: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    lines: list[str] = []
    m = vm.start_managed(resolve(f"vllm:{ckpt}"), RunOptions(vllm_command=FAKE_CMD, vllm_args="--dtype float32", seed=3),
                         log_dir=tmp_path / "run", progress=lines.append)
    try:
        assert len(m.urls) == 2 and all(_listening(s.port) for s in m.servers)
        assert sorted(r["cuda"] for r in _records(record)) == ["3", "5"]
        assert "2 data-parallel server(s)" in lines[0]
        ident = m.identity()
        assert ident["backend"] == "vllm" and ident["vllm_version"] == "fake-0.0" and ident["dtype"] == "float32"
        assert "--seed" in ident["engine_args"] and "--port" not in ident["engine_args"]
        from pytest_posbias.models.hf import _dir_revision

        assert ident["revision"] == _dir_revision(ckpt)
        assert (tmp_path / "run" / "vllm-0.log").is_file() and (tmp_path / "run" / "vllm-1.log").is_file()
    finally:
        ports = [s.port for s in m.servers]
        m.stop()
    _gone(record, ports, within=5.0)


def test_failure_to_start_shows_the_last_log_lines(ckpt: Path, tmp_path: Path, record: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "fail")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ModelLoadError, match=r"exited before it was healthy[\s\S]*CUDA out of memory") as info:
        vm.start_managed(resolve(f"vllm:{ckpt}"), RunOptions(vllm_command=FAKE_CMD), log_dir=tmp_path / "run")
    assert "vllm-0.log" in str(info.value) and "loading shard 4" in str(info.value)
    _gone(record, [], within=5.0)


def test_a_token_in_the_vllm_command_never_reaches_the_log_or_the_start_up_error(ckpt: Path, tmp_path: Path,
                                                                                record: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret NAME=VALUE in --posbias-vllm-command (docker run -e HF_TOKEN=...) is masked in the log and the error."""
    monkeypatch.setenv("FAKE_VLLM_MODE", "fail")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cmd = f"env HF_TOKEN=hf_SECRET9 HUGGING_FACE_HUB_TOKEN=hf_SECRET8 {FAKE_CMD}"
    with pytest.raises(ModelLoadError, match="CUDA out of memory") as info:
        vm.start_managed(resolve(f"vllm:{ckpt}"), RunOptions(vllm_command=cmd), log_dir=tmp_path / "run")
    log = (tmp_path / "run" / "vllm-0.log").read_text()
    assert "HF_TOKEN=***" in log and "SECRET" not in log and "SECRET" not in str(info.value)
    _gone(record, [], within=5.0)


def test_a_vllm_api_key_in_the_environment_does_not_reach_the_run_s_servers(ckpt: Path, tmp_path: Path, record: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """VLLM_API_KEY exported for other servers would make vLLM refuse the run's health check until the time limit."""
    monkeypatch.setenv("VLLM_API_KEY", "sk-elsewhere")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    m = vm.start_managed(resolve(f"vllm:{ckpt}"), RunOptions(vllm_command=FAKE_CMD), log_dir=tmp_path / "run")
    ports = [s.port for s in m.servers]
    m.stop()
    assert [r["vllm_api_key"] for r in _records(record)] == [False]
    _gone(record, ports, within=5.0)


def test_time_limit_stops_the_server(ckpt: Path, tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_VLLM_MODE", "hang")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(vm, "PROGRESS_EVERY_S", 0.5)
    lines: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(ModelLoadError, match=r"not healthy within 2 s \(--posbias-vllm-timeout"):
        vm.start_managed(resolve(f"vllm:{ckpt}"), RunOptions(vllm_command=FAKE_CMD, vllm_timeout=2),
                         log_dir=tmp_path / "run", progress=lines.append)
    assert time.monotonic() - t0 < 2 + vm.STOP_GRACE_S + 10
    assert any("waiting for 1 of 1 vLLM server(s)" in ln for ln in lines)
    _gone(record, [], within=5.0)


PARENT = textwrap.dedent("""
    import json, sys, time
    from pytest_posbias.models import vllm_managed as vm
    from pytest_posbias.models.registry import resolve
    from pytest_posbias.run_options import RunOptions
    m = vm.start_managed(resolve(sys.argv[1]), RunOptions(vllm_command=sys.argv[2]), log_dir=__import__("pathlib").Path(sys.argv[3]))
    print(json.dumps([s.port for s in m.servers]), flush=True)
    time.sleep(3600)
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_servers_do_not_outlive_their_parent(ckpt: Path, tmp_path: Path, record: Path, monkeypatch: pytest.MonkeyPatch,
                                             sig: signal.Signals) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, f"vllm:{ckpt}", FAKE_CMD, str(tmp_path / "run")],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert parent.stdout is not None
        ports = json.loads(parent.stdout.readline())
        assert len(ports) == 2 and all(_listening(p) for p in ports)
        assert len(_records(record)) == 2
        parent.send_signal(sig)
        parent.wait(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
    _gone(record, ports, within=vm.STOP_GRACE_S + 10)


@pytest.mark.usefixtures("heavy_modules")
def test_order_suite_runs_through_vllm_and_the_cache_is_its_own(pytester: pytest.Pytester, small_set: Path, ckpt: Path,
                                                                record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "10")
    write_suite_project(pytester.path, small_set, ("test_phase_order.py",), f"""vllm_command = "{FAKE_CMD}"

[tool.posbias.probes.phase]
items = 8
orderings = 4
""", model=None)
    res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", f"vllm:{ckpt}",
                                        "-p", "no:randomly", "--posbias-json=out.json", timeout=300)
    out = res.stdout.str() + res.stderr.str()
    data = json.loads((pytester.path / "out.json").read_text())
    assert data["verdicts"], out[-3000:]
    assert all(v["n"] > 0 for v in data["verdicts"]), out[-3000:]
    assert len(_records(record)) == 1
    _gone(record, [], within=5.0)
    logs = list((pytester.path / ".posbias" / "runs").glob("*/vllm-0.log"))
    assert len(logs) == 1 and "fake-vllm: serving" in logs[0].read_text()
    from pytest_posbias.engine import read_run_log

    run_logs = list((pytester.path / ".posbias" / "runs").glob("*/run.jsonl"))
    models = [r for r in read_run_log(run_logs[0])[1] if r.get("kind") == "model"]
    assert models and models[0]["identity"]["backend"] == "vllm" and models[0]["identity"]["vllm_version"] == "fake-0.0"
    # a second run starts a new server on another port: the identity has no port, every answer comes from the cache
    res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", f"vllm:{ckpt}",
                                        "-p", "no:randomly", timeout=300)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == 0 and "model calls: 0 made, 32 served from the cache" in out, out[-3000:]
    assert len(_records(record)) == 2
    _gone(record, [], within=5.0)


@pytest.mark.usefixtures("heavy_modules")
def test_under_xdist_the_controller_starts_one_server_for_all_workers(pytester: pytest.Pytester, small_set: Path,
                                                                       ckpt: Path, record: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("POSBIAS_API_TIMEOUT", "10")
    write_suite_project(pytester.path, small_set, ("test_phase_order.py",), """
[tool.posbias.probes.phase]
items = 8
orderings = 4
""", model=None)
    res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-fixed", "--posbias-model", f"vllm:{ckpt}",
                                        f"--posbias-vllm-command={FAKE_CMD}", "-p", "no:randomly", "-n", "2",
                                        "--posbias-json=out.json", timeout=300)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == 0, out[-3000:]
    assert len(_records(record)) == 1, out[-3000:]  # the controller's server, none started by a worker
    data = json.loads((pytester.path / "out.json").read_text())
    assert data["verdicts"] and all(v["n"] > 0 for v in data["verdicts"]), out[-3000:]
    _gone(record, [], within=5.0)


def test_served_rates_split_prefill_and_decode_per_gpu() -> None:
    from pytest_posbias.cli.plan import _served_rates

    # letters: 10,000 prompt tokens in 2 s -> 5,000 tok/s; generation: 5,000 prompt tokens (1 s at that
    # rate) and 400 output tokens in 5 s -> 4 s of decode, 100 tok/s; over 2 GPUs: half of each per GPU
    timed = [(True, 6000.0, 0.0, 1.2), (True, 4000.0, 0.0, 0.8), (False, 5000.0, 400.0, 5.0)]
    assert _served_rates(timed, gpus=2) == pytest.approx({"prefill_tps": 2500.0, "decode_tps": 50.0, "gpus": 2})
    assert _served_rates(timed[:2], gpus=1) == {}  # no output tokens: no decode rate
    assert _served_rates(timed[2:], gpus=1) == {}  # no letter batch: prefill and decode cannot be told apart


@pytest.mark.usefixtures("heavy_modules")
def test_plan_measure_on_vllm_prints_gpu_hours(tmp_path: Path, small_set: Path, ckpt: Path, record: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    write_suite_project(proj, small_set, ("test_phase_order.py",), "\n[tool.posbias.probes.phase]\nitems = 8\norderings = 4\n",
                        model=None)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([str(Path(sys.executable).parent / "posbias"), "plan", "-m", "option_order", "--posbias-model", f"vllm:{ckpt}",
                          f"--posbias-vllm-command={FAKE_CMD}", "--measure"], cwd=proj, env=env, capture_output=True,
                         text=True, timeout=600, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "throughput (measured): prefill" in out and "per GPU over 1 GPU(s) of the vLLM servers" in out, out[-3000:]
    row = next(ln for ln in out.splitlines() if ln.startswith("test_order_flip"))
    assert float(row.split()[7]) > 0  # the GPU-h column
    assert len(_records(record)) == 1
    _gone(record, [], within=5.0)


def test_backend_identity_is_vllm_and_never_the_hf_one(ckpt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_posbias.video.frames import FrameStore

    monkeypatch.setenv("POSBIAS_API_KEY", "sk-test")
    server = {"backend": "vllm", "vllm_version": "0.9.9", "engine_args": ["--seed", "0"], "dtype": "auto", "revision": "r1"}
    b = vm.ManagedVllmBackend(resolve(f"vllm:{ckpt}"), FrameStore(), urls=["http://127.0.0.1:9/v1"], server_identity=server,
                              owned=None, options=RunOptions())
    try:
        ident = b.identity()
        assert ident["backend"] == "vllm" and ident["model_id"] == "tiny-ckpt" and ident["vllm_version"] == "0.9.9"
        assert ident["input_form"] == "video" and b.label.startswith(f"vllm:{ckpt} at ")
        b2 = vm.ManagedVllmBackend(resolve(f"vllm:{ckpt}"), FrameStore(), urls=["http://127.0.0.1:9/v1"],
                                   server_identity={**server, "vllm_version": "0.10.0"}, owned=None, options=RunOptions())
        assert b2.identity() != ident  # a new vLLM: new cache entries
        b2.close()
    finally:
        b.close()
