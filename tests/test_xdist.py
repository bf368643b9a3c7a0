"""``pytest -n N``: gates that share a probe run on one worker, a probe is computed once across
workers, and the verdicts equal the serial run's (issue 17, item 7)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from suite_project import write_suite_project

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.session import RunContext
from pytest_posbias.suite_support import XDIST_GROUP_PREFIX, probe_group

POS = "pytest_posbias.suites.test_positional"


def test_gates_of_one_configuration_share_a_group_and_other_probes_do_not():
    cfg = {"posbias_model": "sim:primacy"}
    dpb2 = probe_group(POS, "test_dpb", {**cfg, "positional_config": ("cooking", "short", 2)})
    dpb4 = probe_group(POS, "test_dpb", {**cfg, "positional_config": ("cooking", "short", 4)})
    meg4 = probe_group("test_positional", "test_meg", {**cfg, "positional_config_p4": ("cooking", "short", 4)})
    other = probe_group(POS, "test_dpb", {**cfg, "positional_config": ("cooking", "long", 2)})
    model2 = probe_group(POS, "test_dpb", {"posbias_model": "sim:unbiased", "positional_config": ("cooking", "short", 2)})
    variant = probe_group(POS, "test_meg_variant", {**cfg, "positional_variant_config": (("cooking", "short", 4), "8-frames")})
    assert dpb2 == dpb4 == meg4 and dpb2 is not None and dpb2.startswith(XDIST_GROUP_PREFIX)
    assert len({dpb2, other, model2, variant}) == 4
    phase = {probe_group("pytest_posbias.suites.test_phase_order", f, {**cfg, **p})
             for f, p in [("test_order_flip", {}), ("test_phase_flip", {"phase_pair": "0-1"}),
                          ("test_sampler_flip", {"sampler_pair": (8, "left", "midpoint")})]}
    assert len(phase) == 1 and None not in phase
    st = "pytest_posbias.suites.test_stressors"
    s16 = {probe_group(st, f, {**cfg, "stressor_frames": 16, **p})
           for f, p in [("test_clean_repetition", {}), ("test_stressor_amplification", {"stressor_name": "add1"}),
                        ("test_attack_success_rate", {"stressor_name": "reverse"})]}
    assert len(s16) == 1 and probe_group(st, "test_clean_repetition", {**cfg, "stressor_frames": 32}) not in s16
    srch = "pytest_posbias.suites.test_search"
    assert probe_group(srch, "test_search_option_order", cfg) in phase  # the phase probe's items
    assert probe_group(srch, "test_search_heavy", {**cfg, "prop": "order"}) in phase
    assert probe_group(srch, "test_search_stressor_repetition", cfg, search_frames=16) in s16  # its videos, first frame count
    assert probe_group(srch, "test_search_slot_coverage", cfg) is None  # groups of every configuration
    assert probe_group("test_mine", "test_x", cfg) is None
    assert probe_group(POS, "test_dpb", {**cfg, "positional_config": None}) is None  # the skipped "no groups" param


def _context(root: Path, worker: str) -> RunContext:
    return RunContext({"models": ["sim:unbiased"], "cache": str(root / "cache")}, PosbiasConfig(), rootdir=root,
                      worker=worker, run_id="run-1")


def test_a_probe_result_is_computed_once_across_workers(tmp_path):
    a, b = _context(tmp_path, "gw0"), _context(tmp_path, "gw1")
    computed: list[str] = []

    def probe(who: str) -> SimpleNamespace:
        computed.append(who)
        return SimpleNamespace(value=[1.5, 2.5], calls={"made": 7, "cache_hits": 2, "rereads": 0, "shared": 0})

    try:
        first = a.memo("positional|sim:unbiased|spec|12", lambda: probe("gw0"))
        second = b.memo("positional|sim:unbiased|spec|12", lambda: probe("gw1"))
        assert computed == ["gw0"] and second.value == first.value
        assert (a.engine.stats.shared, b.engine.stats.shared) == (0, 9)  # gw1's gate rests on 9 requests it did not make
        assert (a.memo_from_workers, b.memo_from_workers) == (0, 1)
        # other looks, the manifest and judges stay per process; a serial run ("main") stores nothing
        b.memo("positional|sim:unbiased|spec|24", lambda: probe("gw1"))
        b.memo("judges-like", lambda: probe("gw1-local"))
        assert computed == ["gw0", "gw1", "gw1-local"]
        assert len(list((tmp_path / "cache" / "runs" / "run-1" / "memo").glob("*.pkl"))) == 2
    finally:
        a.close()
        b.close()
    main = _context(tmp_path, "main")
    try:
        main.memo("stressor|x", lambda: probe("main"))
        main.memo("stressor|x", lambda: probe("main-again"))
        assert computed[-1] == "main" and main.engine.stats.shared == 9
    finally:
        main.close()


def _verdicts(path: Path) -> list[tuple]:
    data = json.loads(path.read_text())
    return [(v["nodeid"], v["passed"], v["estimate"], v["ci_low"], v["ci_high"], v["n"], v["p_value"], v["p_bh"])
            for v in data["verdicts"]]


def _made(output: str) -> int:
    m = re.search(r"model calls: (\d+) made", output)
    assert m, output[-2000:]
    return int(m.group(1))


@pytest.mark.slow
def test_serial_and_two_workers_give_the_same_verdicts_and_make_each_call_once(pytester, small_set):
    """One configuration's DPB, coverage and contamination gates (P = 2) on sim:primacy:
    serially, with ``-n 2`` (probe groups) and with ``-n 2 --dist load`` (xdist spreads the gates of
    one probe over both workers: the probe is still computed once, the other worker reads it), each
    on a fresh cache: the same verdict numbers, and the same number of model calls made."""
    pytest.importorskip("xdist")
    write_suite_project(pytester.path, small_set, ("test_positional.py",),
                        "\n[tool.posbias.probes.positional]\ngroups = 12")
    args = ["-v", "-m", "not slow", "-k", "cooking-short-P2", "--model", "sim:primacy", "-p", "no:randomly",
            "-p", "no:cacheprovider"]
    runs = {"serial": [], "n2": ["-n", "2"], "n2-load": ["-n", "2", "--dist", "load"]}
    made = {}
    for name, extra in runs.items():
        res = pytester.runpytest_subprocess(*args, *extra, f"--posbias-cache=c-{name}", f"--posbias-json={name}.json",
                                            timeout=600)
        assert res.ret == 1, res.stdout.str()[-3000:]  # primacy fails DPB
        made[name] = _made(res.stdout.str())
        if name == "n2":  # the probe's three gates ran on one worker, under its probe group
            ran = _workers_by_test(res.stdout.str())
            assert len(ran) == 3 and len(set(ran.values())) == 1, ran
            assert all(k.endswith("@" + XDIST_GROUP_PREFIX + "positional|sim:primacy|cooking-short") for k in ran), ran
    serial = _verdicts(pytester.path / "serial.json")
    assert len(serial) == 3  # dpb, coverage, contamination of one probe
    assert all("@" not in v[0] for v in serial)
    assert _verdicts(pytester.path / "n2.json") == serial
    assert _verdicts(pytester.path / "n2-load.json") == serial
    assert made["serial"] > 0 and made["n2"] == made["serial"] and made["n2-load"] == made["serial"]
    # with --dist load both workers ran gates of the probe: the merged run log holds each request once
    [log] = (pytester.path / "c-n2-load" / "runs").glob("*/run.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    header = records[0]
    assert header["workers"] == ["gw0", "gw1"]
    made_keys = [r["key"] for r in records if r.get("kind") == "request" and not r.get("cache_hit")]
    assert len(made_keys) == len(set(made_keys)) == made["serial"]
    assert not list((pytester.path / "c-n2-load" / "runs").glob("*/memo"))  # the shared results are removed at the end


def _workers_by_test(output: str) -> dict[str, str]:
    """``-v`` lines ``[gw0] [ 50%] PASSED test_x.py::test_a[1]@group`` → {node id: worker}."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] \w+ (\S+)", output, re.M)}


def test_plain_minus_n_groups_by_mark_on_every_worker(pytester):
    """``pytest -n 2`` without ``--dist``: the plugin picks loadgroup for the controller and tells the
    workers (they re-parse a command line without ``--dist``), and a test's ``xdist_group`` reaches
    the scheduler as the ``@group`` node-id suffix on this pytest too (pytest-dev/pytest-xdist#1386):
    every test of a group runs on one worker, the ungrouped ones spread."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_grouped="""
        import time
        import pytest

        @pytest.mark.xdist_group("one")
        @pytest.mark.parametrize("i", range(6))
        def test_one(i):
            time.sleep(0.2)

        @pytest.mark.parametrize("i", range(6))
        def test_free(i):
            time.sleep(0.2)
    """)
    res = pytester.runpytest_subprocess("-n", "2", "-v", "-p", "no:randomly", "-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(passed=12)
    out = res.stdout.str()
    assert "LoadGroupScheduling" in out
    workers = _workers_by_test(out)
    grouped = {k: w for k, w in workers.items() if "::test_one[" in k}
    assert len(grouped) == 6 and all(k.endswith("@one") for k in grouped), out[-3000:]
    assert len(set(grouped.values())) == 1, grouped
    free = {k: w for k, w in workers.items() if "::test_free[" in k}
    assert len(free) == 6 and not any("@" in k for k in free)
    # with --dist load the marks are not groups: the plugin leaves the user's choice alone
    res = pytester.runpytest_subprocess("-n", "2", "-v", "--dist", "load", "-p", "no:randomly",
                                        "-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(passed=12)
    assert "LoadGroupScheduling" not in res.stdout.str() and "@one" not in res.stdout.str()


def test_minus_n_with_every_suite_test_skipped_leaves_no_cache_folder(pytester):
    """Each worker registers for work sharing when it has collected suite tests (a folder under the
    cache); when none of them runs, the run leaves nothing behind, as a serial run does."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_skipped="""
        import pytest

        pytestmark = pytest.mark.skip("not today")

        def test_a(posbias_run):
            pass

        def test_b(posbias_run):
            pass
    """)
    for extra in ([], ["-n", "2"]):
        res = pytester.runpytest_subprocess(*extra, "-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-cache=c",
                                            timeout=300)
        res.assert_outcomes(skipped=2)
        assert not (pytester.path / "c").exists(), [str(p) for p in (pytester.path / "c").rglob("*")]


def test_a_model_that_fails_to_load_on_a_worker_is_a_clear_error_not_an_internal_error(pytester):
    """Serially a model that cannot be loaded stops the run (usage error); under ``-n 2`` that
    pytest.exit in a worker became an xdist INTERNALERROR without the message. Now each suite test
    of the worker errors with it and the run fails."""
    pytest.importorskip("xdist")
    pytester.makeconftest("""
        import os
        from pytest_posbias.errors import ModelLoadError
        from pytest_posbias.session import RunContext

        def _fails(self):
            raise ModelLoadError(f"checkpoint /models/x: config.json not found ({os.environ.get('PYTEST_XDIST_WORKER')})")

        RunContext.load_models = _fails
    """)
    pytester.makepyfile(test_two="""
        def test_a(posbias_run):
            pass

        def test_b(posbias_run):
            pass
    """)
    res = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-cache=c",
                                        timeout=300)
    out = res.stdout.str() + res.stderr.str()
    assert "INTERNALERROR" not in out and res.ret == 1, out[-3000:]
    res.assert_outcomes(errors=2)
    assert re.search(r"posbias: checkpoint /models/x: config.json not found \(gw\d\) \(on xdist worker gw\d\)", out)
    serial = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-cache=c", timeout=300)
    assert serial.ret == 4 and "config.json not found" in serial.stdout.str() + serial.stderr.str()


@pytest.mark.slow
def test_last_failed_reruns_every_grouped_failure_under_minus_n(pytester):
    """``pytest -n 2 --lf`` after a ``-n 2`` run reruns every failed grouped test, parametrized ones
    too: pytest 9.2 matches last-failed ids structurally (NodeId equality), so the worker's
    ``@group`` id must be the one ``NodeId.parse`` gives for the stored string (a display fix for
    the stray ``]`` in FAILED lines that built it otherwise silently dropped ``test_fail[1]``)."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_f="""
        import pytest

        @pytest.mark.xdist_group("g")
        @pytest.mark.parametrize("i", [1])
        def test_fail(i):
            assert i == 2

        @pytest.mark.xdist_group("g")
        def test_fail_plain():
            assert 0

        @pytest.mark.xdist_group("posbias:probe")  # a group of the plugin's own (suite_support.probe_group)
        @pytest.mark.parametrize("i", [3])
        def test_fail_probe(i):
            assert i == 2

        def test_pass():
            pass
    """)
    first = pytester.runpytest_subprocess("-n", "2", "-q", "-p", "no:randomly", timeout=300)
    first.assert_outcomes(failed=3, passed=1)
    # the plugin's own groups read as serially in the short summary (no suffix, no stray bracket)
    failed_lines = sorted(line.split(" - ")[0] for line in first.stdout.lines if line.startswith("FAILED "))
    assert "FAILED test_f.py::test_fail_probe[3]" in failed_lines, failed_lines
    assert not any("posbias:" in line or line.endswith("]]") for line in failed_lines), failed_lines
    again = pytester.runpytest_subprocess("-n", "2", "-v", "--lf", "-p", "no:randomly", timeout=300)
    again.assert_outcomes(failed=3)
    ran = _workers_by_test(again.stdout.str())
    assert sorted(ran) == ["test_f.py::test_fail[1]@g", "test_f.py::test_fail_plain@g",
                           "test_f.py::test_fail_probe[3]@posbias:probe"], again.stdout.str()[-2000:]


def test_junitxml_names_the_plugins_grouped_tests_as_a_serial_run_does(pytester):
    """``--junitxml`` under ``-n 2``: a test in one of the plugin's own groups is named as in a
    serial run (no ``@posbias:...`` suffix, no stray bracket; pytest's junitxml takes the name
    before the controller's report drops the suffix); a user's own group keeps xdist's suffix."""
    import xml.etree.ElementTree as ET

    pytest.importorskip("xdist")
    pytester.makepyfile(test_j="""
        import pytest

        @pytest.mark.xdist_group("posbias:probe")
        @pytest.mark.parametrize("i", [1, 3])
        def test_probe(i):
            assert i == 1

        @pytest.mark.xdist_group("posbias:probe")
        def test_probe_plain():
            pass

        @pytest.mark.xdist_group("g")
        def test_user():
            pass
    """)

    def cases(name: str) -> list[tuple[str | None, str | None, list[str]]]:
        root = ET.parse(pytester.path / name).getroot()
        return sorted((c.get("classname"), c.get("name"), [e.tag for e in c]) for c in root.iter("testcase"))

    pytester.runpytest_subprocess("-p", "no:randomly", "--junitxml=serial.xml", timeout=300).assert_outcomes(
        passed=3, failed=1)
    pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "--junitxml=par.xml", timeout=300).assert_outcomes(
        passed=3, failed=1)
    serial, par = cases("serial.xml"), cases("par.xml")
    assert [c for c in par if c[1] != "test_user@g"] == [c for c in serial if c[1] != "test_user"]
    assert ("test_j", "test_probe[3]", ["failure"]) in par
    assert ("test_j", "test_user@g", []) in par  # xdist's own suffix, untouched


@pytest.mark.slow
def test_last_failed_switches_between_serial_and_minus_n(pytester):
    """``pytest --lf`` after a ``-n 2`` run reruns only the failures of the plugin's grouped tests
    (recorded with the ``@posbias:...`` suffix), and ``-n 2 --lf`` after a serial run reruns only
    the serial failures (the workers' ids carry the suffix); both reran every test before."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_s="""
        import pytest

        @pytest.mark.xdist_group("posbias:probe")
        @pytest.mark.parametrize("i", [1, 3])
        def test_probe(i):
            assert i == 1

        @pytest.mark.xdist_group("posbias:probe")
        def test_probe_plain():
            assert 0

        def test_pass():
            pass
    """)
    args = ("-p", "no:randomly", "-q")
    pytester.runpytest_subprocess("-n", "2", *args, timeout=300).assert_outcomes(failed=2, passed=2)
    serial = pytester.runpytest_subprocess("--lf", "-rf", *args, timeout=300)
    serial.assert_outcomes(failed=2, deselected=2)
    assert sorted(line.split(" - ")[0] for line in serial.stdout.lines if line.startswith("FAILED ")) == [
        "FAILED test_s.py::test_probe[3]", "FAILED test_s.py::test_probe_plain"]
    import shutil

    shutil.rmtree(pytester.path / ".pytest_cache")
    pytester.runpytest_subprocess(*args, timeout=300).assert_outcomes(failed=2, passed=2)
    again = pytester.runpytest_subprocess("-n", "2", "-v", "--lf", "-p", "no:randomly", timeout=300)
    again.assert_outcomes(failed=2)
    assert sorted(_workers_by_test(again.stdout.str())) == [
        "test_s.py::test_probe[3]@posbias:probe", "test_s.py::test_probe_plain@posbias:probe"], again.stdout.str()[-2000:]


def test_a_worker_gets_its_share_of_the_cpu_threads_and_blas_is_capped(monkeypatch):
    """Under -n N a worker sets OMP_NUM_THREADS to cores // N (torch reads it on import) and caps
    the BLAS numpy already loaded; a user's own setting stands."""
    import os

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from pytest_posbias import xdist_support

    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)  # torch may be loaded in this process
    config = SimpleNamespace(workerinput={"workercount": 2}, option=SimpleNamespace(dist="loadgroup"))
    with threadpoolctl.threadpool_limits(limits=None):  # restores the BLAS threads afterwards
        xdist_support.configure_xdist(config)
        assert os.environ["OMP_NUM_THREADS"] == str(max(1, cpus // 2))
        blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(n == max(1, cpus // 2) for n in blas)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    xdist_support.configure_xdist(config)
    assert os.environ["OMP_NUM_THREADS"] == "7"


def test_the_log_follower_thread_has_ended_before_the_merge(tmp_path, monkeypatch):
    """stop_log_follower, called before finish_run, waits for a poll in progress: that poll's
    gc_paused turned the collector back on inside finish_run's @gc_paused, and its gc.freeze ran
    during the merge. After the merge unfreeze_after_merge leaves nothing frozen."""
    import gc
    import threading
    import time

    from pytest_posbias import xdist_support
    from pytest_posbias.engine import gc_paused
    from pytest_posbias.run_merge import RunLogFollower

    entered = threading.Event()

    def slow_poll(self):
        entered.set()
        time.sleep(0.3)

    monkeypatch.setattr(xdist_support, "LOG_POLL_S", 0.01)
    monkeypatch.setattr(RunLogFollower, "poll", slow_poll)
    config = SimpleNamespace(workerinput=None, option=SimpleNamespace(dist="loadgroup"), getoption=lambda *a, **k: False)
    stop = threading.Event()
    followed = xdist_support.start_log_follower(config, tmp_path / "runs" / "r", stop)
    assert followed is not None and gc.isenabled()
    try:
        assert entered.wait(10)
        stop.set()
        xdist_support.stop_log_follower(followed)
        assert not followed.thread.is_alive()
        with gc_paused():  # finish_run's pause is not undone by the follower's
            time.sleep(0.35)
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        stop.set()
        xdist_support.unfreeze_after_merge(followed)
    assert gc.get_freeze_count() == 0


def test_the_log_follower_leaves_objects_the_process_froze_itself_frozen(tmp_path, monkeypatch):
    """A run started inside a test (pytester in-process, pytest.main) with -n: the follower's
    gc.unfreeze after the merge unfroze what the enclosing process had frozen itself (87,011
    objects to 0 in a pytester run). Where objects are frozen already, it neither freezes nor
    unfreezes; where none are, it freezes while polling and unfreezes after the merge."""
    import gc
    import threading
    import time

    from pytest_posbias import xdist_support

    monkeypatch.setattr(xdist_support, "LOG_POLL_S", 0.01)
    config = SimpleNamespace(workerinput=None, option=SimpleNamespace(dist="loadgroup"), getoption=lambda *a, **k: False)
    assert gc.get_freeze_count() == 0

    def one_run() -> tuple[int, int]:
        stop = threading.Event()
        followed = xdist_support.start_log_follower(config, tmp_path / "runs" / "r", stop)
        assert followed is not None
        deadline = time.monotonic() + 10
        while followed.freezes and gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            stop.wait(0.01)
        during = gc.get_freeze_count()
        stop.set()
        xdist_support.stop_log_follower(followed)
        xdist_support.unfreeze_after_merge(followed)
        return during, gc.get_freeze_count()

    during, after = one_run()
    assert during > 0 and after == 0  # nothing frozen before: frozen while polling, unfrozen after
    keep = [{"i": i} for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        during, after = one_run()
        assert (during, after) == (frozen, frozen) and keep
    finally:
        gc.unfreeze()


@pytest.mark.slow
def test_an_idle_worker_makes_part_of_the_busy_workers_calls_with_the_serial_verdicts(pytester, small_set):
    """The stressor probe (one group, every model call) and a test that only sets up the run under
    ``-n 2``: the worker that ran the short test takes part of the stressor probe's calls after it
    (work_share), and the verdicts and calls made equal the serial run's."""
    pytest.importorskip("xdist")
    write_suite_project(pytester.path, small_set, ("test_stressors.py",),
                        "\n[tool.posbias.probes.stressor]\nvideos = 6\ntrials = 30\nmax_new_tokens = 64")
    (pytester.path / "suites" / "test_idle.py").write_text(
        "def test_sets_up_the_run(posbias_run):\n    assert posbias_run.engine is not None\n")
    # the stressor worker reaches its first test (and sets up its run) only after the short test has
    # ended on the other: the idle worker must wait for it (registered when it collected), not leave;
    # and a session-wide device lock (a common -n pattern) is held by each worker for its whole session:
    # the idle worker helps only after its fixtures are released, or the two would wait on each other
    lock = pytester.path / "device.lock"
    with (pytester.path / "suites" / "conftest.py").open("a") as fh:
        fh.write("\n\nimport fcntl as _fcntl, os as _os, time as _time\n\nimport pytest as _pytest\n\n_late = []\n\n\n"
                 "def pytest_runtest_setup(item):\n"
                 "    if _os.environ.get('PYTEST_XDIST_WORKER') and 'test_stressors' in item.nodeid and not _late:\n"
                 "        _late.append(1)\n        _time.sleep(4)\n\n\n"
                 "@_pytest.fixture(scope='session', autouse=True)\ndef _one_device():\n"
                 f"    with open({str(lock)!r}, 'a') as fh:\n"
                 "        _fcntl.flock(fh, _fcntl.LOCK_EX)\n        yield\n\n\n"
                 # the controller removes the workers' logs once merged: each worker keeps a copy here
                 "@_pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session):\n"
                 "    import glob as _glob, shutil as _shutil\n"
                 "    wid = _os.environ.get('PYTEST_XDIST_WORKER')\n"
                 f"    for p in _glob.glob({str(pytester.path)!r} + f'/c-n2/runs/*/log-{{wid}}.jsonl') if wid else ():\n"
                 "        _shutil.copy(p, p.replace('/log-', '/kept-'))\n")
    args = ["-v", "-m", "not slow", "-k", "16f or sets_up", "--model", "sim:looping", "-p", "no:randomly",
            "-p", "no:cacheprovider"]
    made = {}
    for name, extra in {"serial": [], "n2": ["-n", "2"]}.items():
        res = pytester.runpytest_subprocess(*args, *extra, f"--posbias-cache=c-{name}", f"--posbias-json={name}.json",
                                            timeout=600)
        assert res.ret in (0, 1), res.stdout.str()[-3000:]
        made[name] = _made(res.stdout.str())
        if name == "n2":  # the short test ran on the other worker than the stressor group
            ran = _workers_by_test(res.stdout.str())
            assert len(set(ran.values())) == 2, ran
    assert _verdicts(pytester.path / "n2.json") == _verdicts(pytester.path / "serial.json")
    assert made["n2"] == made["serial"] > 1000
    [run_dir] = (pytester.path / "c-n2" / "runs").glob("*")
    made_by: dict[str, set[str]] = {}
    for w in ("gw0", "gw1"):
        assert not (run_dir / f"log-{w}.jsonl").exists()  # merged into run.jsonl, the run's one copy
        recs = [json.loads(line) for line in (run_dir / f"kept-{w}.jsonl").read_text().splitlines()[1:]]
        made_by[w] = {r["key"] for r in recs if r.get("kind") == "request" and r.get("probe") == "stressor"
                      and not r.get("cache_hit")}
    assert made_by["gw0"] and made_by["gw1"], {w: len(k) for w, k in made_by.items()}  # both made stressor calls
    assert made_by["gw0"].isdisjoint(made_by["gw1"])  # none twice
    merged = [json.loads(line) for line in (run_dir / "run.jsonl").read_text().splitlines()]
    made_keys = [r["key"] for r in merged if r.get("kind") == "request" and not r.get("cache_hit")]
    assert len(made_keys) == len(set(made_keys)) == made["serial"]
    assert not (run_dir / "work").exists()  # the publications are removed at the end
