"""``pytest -n N``: gates that share a probe run on one worker (the plugin's xdist scheduler), a
probe is computed once, a result several groups read is made by the first and read from the
generation cache by the others, and the verdicts equal the serial run's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.run.context import RunContext
from pytest_posbias.run.suite_params import XDIST_GROUP_PREFIX, model_id, probe_group
from pytest_posbias.run_options import RunOptions


def test_every_collected_suite_test_has_the_group_its_parameters_give(pytester, small_set):
    """The scheduler reads the groups from the node ids the suites build: for every suite test the
    collection holds, under a model whose label has characters the ids replace, the probe group
    names the suite, the model's id and the parameters that choose the probe."""
    write_suite_project(pytester.path, small_set, ("test_positional.py", "test_phase_order.py", "test_stressors.py"), "")
    res = pytester.runpytest_subprocess("--collect-only", "-q", "--posbias-model", "sim:primacy", "-p", "no:randomly", timeout=300)
    ids = [line for line in res.stdout.lines if "::" in line]
    assert len(ids) > 50, res.stdout.str()[-2000:]
    groups = {i: probe_group(i, model_ids=[model_id("sim:primacy")], search_frames=16) for i in ids}
    assert {g.split("|")[0] for g in groups.values() if g} == {
        f"{XDIST_GROUP_PREFIX}positional", f"{XDIST_GROUP_PREFIX}phase", f"{XDIST_GROUP_PREFIX}stressor"}
    for nodeid, group in groups.items():
        if "decoding_setting" in nodeid or "no-" in nodeid.split("[")[-1]:
            assert group is None, nodeid
        else:
            assert group is not None and "|sim:primacy" in group, nodeid


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
    one probe over both workers, each computing the probe it needs; what the other already stored
    comes from the cache), each on a fresh cache: the same verdict numbers; ``-n 2`` makes the same
    model calls as the serial run, ``--dist load`` at most twice as many."""
    pytest.importorskip("xdist")
    write_suite_project(pytester.path, small_set, ("test_positional.py",),
                        "\n[tool.posbias.probes.positional]\ngroups = 12")
    args = ["-v", "-m", "not slow", "-k", "cooking-short-P2", "--posbias-model", "sim:primacy", "-p", "no:randomly",
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
            assert all("@" not in k for k in ran), ran  # node ids as collected
    serial = _verdicts(pytester.path / "serial.json")
    assert len(serial) == 3  # dpb, coverage, contamination of one probe
    assert all("@" not in v[0] for v in serial)
    assert _verdicts(pytester.path / "n2.json") == serial
    assert _verdicts(pytester.path / "n2-load.json") == serial
    assert made["serial"] > 0 and made["n2"] == made["serial"]
    assert made["serial"] <= made["n2-load"] <= 2 * made["serial"]  # xdist's own scheduling: no group held back
    # with --dist load both workers ran gates of the probe: the merged run log holds each request once
    [log] = (pytester.path / "c-n2-load" / "runs").glob("*/run.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    header = records[0]
    assert header["workers"] == ["gw0", "gw1"]
    made_keys = [r["key"] for r in records if r.get("kind") == "request" and not r.get("cache_hit")]
    assert len(made_keys) == len(set(made_keys)) == made["serial"]


def _numbers(path: Path) -> list[tuple]:
    """Every verdict's node id, outcome and numbers in the JSON summary (the run-level p-values too)."""
    data = json.loads(path.read_text())
    keys = ("nodeid", "passed", "estimate", "ci_low", "ci_high", "n", "p_value", "p_bh", "threshold", "reason")
    return sorted(tuple(json.dumps(v.get(k)) for k in keys) for v in data["verdicts"])


@pytest.mark.slow
def test_stressor_parts_give_the_serial_verdicts_under_four_workers_and_each_call_once(pytester, small_set):
    """The stressor suite in parts (the clean outputs with the controls, each stressor's variants),
    on sim:looping: serially and with ``-n 4`` (each part a scope of its own, spread over the four
    workers; the clean outputs every part reads made by one of them), each on a fresh cache: the
    same verdicts with the same numbers in the JSON summary, the same calls made, each request made
    once in the merged run log, and the stressor summary of the report joins every part."""
    pytest.importorskip("xdist")
    write_suite_project(pytester.path, small_set, ("test_stressors.py",),
                        "\n[tool.posbias.probes.stressor]\nvideos = 8\ntrials = 2\nframes = [8]")
    args = ["-v", "-m", "not slow", "--posbias-model", "sim:looping", "-p", "no:randomly", "-p", "no:cacheprovider"]
    made = {}
    for name, extra in {"serial": [], "n4": ["-n", "4"]}.items():
        res = pytester.runpytest_subprocess(*args, *extra, f"--posbias-cache=c-{name}", f"--posbias-json={name}.json",
                                            timeout=600)
        assert res.ret in (0, 1, 6), res.stdout.str()[-3000:]
        made[name] = _made(res.stdout.str())
        if name == "n4":  # the parts ran on more than one worker, each part's gates on one
            ran = _workers_by_test(res.stdout.str())
            assert len(set(ran.values())) > 1, ran
            for stressor in ("add1", "delete1", "reverse"):
                assert len({w for t, w in ran.items() if t.endswith(f"-8f-{stressor}]")}) == 1, ran
    serial = _numbers(pytester.path / "serial.json")
    assert len(serial) == 17  # repetition, and amplification and attack of each of the 8 stressors
    assert _numbers(pytester.path / "n4.json") == serial
    assert made["serial"] > 0 and made["n4"] == made["serial"]
    [log] = (pytester.path / "c-n4" / "runs").glob("*/run.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    made_keys = [r["key"] for r in records if r.get("kind") == "request" and not r.get("cache_hit")]
    assert len(made_keys) == len(set(made_keys)) == made["n4"]
    summaries = [r for r in records if r.get("kind") == "observation" and r.get("probe") == "stressor"
                 and r.get("type") == "summary"]
    assert {"clean", "controls", "add1", "delete1", "shuffle"} <= {r.get("part") for r in summaries}
    from pytest_posbias.report.sections import stressor_summaries

    [joined] = stressor_summaries(summaries)
    assert set(joined["stressors"]) == {"add1", "add2", "delete1", "delete2", "replace1", "replace2", "reverse", "shuffle"}
    assert "black" in joined["controls"] and len(joined["videos"]) == 8



@pytest.mark.slow
def test_stressor_parts_without_a_clean_test_make_each_call_once_under_two_workers(pytester, small_set):
    """``-m attack`` selects the attack gates of the stressor parts and no clean-part test: the first
    part handed out makes the clean outputs every part reads, the parts on the other worker start
    once it has finished and read them from the cache. Serially and with ``-n 2``, each on a fresh
    cache: the same verdicts, the same calls made, each request made once in the merged run log,
    and the parts ran on both workers. The suite's file is renamed: the groups follow its test
    functions, not its file name."""
    pytest.importorskip("xdist")
    write_suite_project(pytester.path, small_set, ("test_stressors.py",),
                        "\n[tool.posbias.probes.stressor]\nvideos = 6\ntrials = 2\nframes = [8]",
                        rename={"test_stressors.py": "test_release_stressors.py"})
    args = ["-v", "-m", "attack and not slow", "--posbias-model", "sim:looping", "-p", "no:randomly",
            "-p", "no:cacheprovider"]
    made = {}
    for name, extra in {"serial": [], "n2": ["-n", "2"]}.items():
        res = pytester.runpytest_subprocess(*args, *extra, f"--posbias-cache=c-{name}", f"--posbias-json={name}.json",
                                            timeout=600)
        assert res.ret in (0, 1, 6), res.stdout.str()[-3000:]
        made[name] = _made(res.stdout.str())
        if name == "n2":
            ran = _workers_by_test(res.stdout.str())
            assert len(ran) == 8 and len(set(ran.values())) == 2, ran
            assert not any("clean_repetition" in t for t in ran), ran
    serial = _numbers(pytester.path / "serial.json")
    assert len(serial) == 8  # the attack gate of each of the 8 stressors
    assert _numbers(pytester.path / "n2.json") == serial
    assert made["serial"] > 0 and made["n2"] == made["serial"]
    [log] = (pytester.path / "c-n2" / "runs").glob("*/run.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    made_keys = [r["key"] for r in records if r.get("kind") == "request" and not r.get("cache_hit")]
    assert len(made_keys) == len(set(made_keys)) == made["n2"]
    clean = [r for r in records if r.get("kind") == "request" and r["request"].get("meta", {}).get("condition") == "clean"]
    made_clean = [r["key"] for r in clean if not r.get("cache_hit")]
    assert len(made_clean) == len(set(made_clean)) == 6  # one clean output per video, made once
    assert {r["key"] for r in clean if r.get("cache_hit")} == set(made_clean)  # the other worker read them

def _workers_by_test(output: str) -> dict[str, str]:
    """``-v`` lines ``[gw0] [ 50%] PASSED test_x.py::test_a[1]`` → {node id: worker}."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^\[(gw\d+)\] \[\s*\d+%\] \w+ (\S+)", output, re.M)}


PROBE_TESTS = """
import time

import pytest


@pytest.mark.parametrize("i", range(4))
@pytest.mark.parametrize("m", ["sim:primacy"])
def test_phase_flip(m, i):
    time.sleep(0.2)
    assert i != 3


@pytest.mark.parametrize("m", ["sim:primacy"])
def test_order_flip(m):
    assert 0
"""
FREE_TESTS = """
import time

import pytest


@pytest.mark.parametrize("i", range(4))
def test_free(i):
    time.sleep(0.2)
"""


def _probe_project(pytester) -> None:
    """Tests named as the phase suite's (``test_phase_flip[<model>-...]``, in a file of another name):
    one probe group under ``--model sim:primacy``; and tests of no group."""
    pytester.makepyfile(test_release_checks=PROBE_TESTS, test_free=FREE_TESTS)


def test_plain_minus_n_schedules_by_probe_group_and_keeps_the_node_ids(pytester):
    """``pytest -n 2`` without ``--dist``: the plugin's scheduler sends the tests of a probe group to
    one worker, spreads the others, and the node ids stay as collected; with ``--dist load`` xdist
    schedules as asked."""
    pytest.importorskip("xdist")
    _probe_project(pytester)
    args = ("-n", "2", "-v", "-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-model", "sim:primacy")
    res = pytester.runpytest_subprocess(*args, timeout=300)
    res.assert_outcomes(passed=7, failed=2)
    out = res.stdout.str()
    assert "ProbeGroupScheduling" in out
    workers = _workers_by_test(out)
    grouped = {k: w for k, w in workers.items() if k.startswith("test_release_checks.py::")}
    assert len(grouped) == 5 and len(set(grouped.values())) == 1, grouped
    assert "test_release_checks.py::test_phase_flip[sim:primacy-3]" in grouped and not any("@" in k for k in workers)
    free = {k: w for k, w in workers.items() if "::test_free[" in k}
    assert len(free) == 4
    res = pytester.runpytest_subprocess(*args, "--dist", "load", timeout=300)
    res.assert_outcomes(passed=7, failed=2)
    assert "ProbeGroupScheduling" not in res.stdout.str()


def test_minus_n_with_every_suite_test_skipped_leaves_no_cache_folder(pytester):
    """When no suite test runs under ``-n 2``, the run leaves no cache folder behind, as a serial run does."""
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
                                            "--posbias-model", "sim:unbiased", timeout=300)
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
        from pytest_posbias.run.context import RunContext

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
    model = ("--posbias-model", "sim:unbiased")
    res = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-cache=c",
                                        *model, timeout=300)
    out = res.stdout.str() + res.stderr.str()
    assert "INTERNALERROR" not in out and res.ret == 1, out[-3000:]
    res.assert_outcomes(errors=2)
    assert re.search(r"posbias: checkpoint /models/x: config.json not found \(gw\d\) \(on xdist worker gw\d\)", out)
    serial = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--posbias-cache=c", *model,
                                           timeout=300)
    assert serial.ret == 4 and "config.json not found" in serial.stdout.str() + serial.stderr.str()


def _failed_lines(res) -> list[str]:
    return sorted(line.split(" - ")[0] for line in res.stdout.lines if line.startswith("FAILED "))


@pytest.mark.slow
def test_last_failed_and_junit_read_as_serially_under_minus_n(pytester):
    """The node ids are never rewritten: after a ``-n 2`` run ``--lf`` reruns its failures serially
    and under ``-n 2``, after a serial run ``-n 2 --lf`` reruns the serial failures, the short
    summary's FAILED lines are the serial ones, and ``--junitxml`` names every test as serially."""
    import shutil
    import xml.etree.ElementTree as ET

    pytest.importorskip("xdist")
    _probe_project(pytester)
    args = ("-p", "no:randomly", "-q", "-rf", "--posbias-model", "sim:primacy")
    expected = ["FAILED test_release_checks.py::test_order_flip[sim:primacy]",
                "FAILED test_release_checks.py::test_phase_flip[sim:primacy-3]"]

    def cases(name: str) -> list[tuple[str | None, str | None, list[str]]]:
        root = ET.parse(pytester.path / name).getroot()
        return sorted((c.get("classname"), c.get("name"), [e.tag for e in c]) for c in root.iter("testcase"))

    first = pytester.runpytest_subprocess("-n", "2", *args, "--junitxml=par.xml", timeout=300)
    first.assert_outcomes(failed=2, passed=7)
    assert _failed_lines(first) == expected
    serial = pytester.runpytest_subprocess("--lf", *args, timeout=300)
    serial.assert_outcomes(failed=2)  # only the failures: nothing passed
    assert _failed_lines(serial) == expected
    again = pytester.runpytest_subprocess("-n", "2", "--lf", *args, timeout=300)
    again.assert_outcomes(failed=2)
    assert _failed_lines(again) == expected
    shutil.rmtree(pytester.path / ".pytest_cache")
    pytester.runpytest_subprocess(*args, "--junitxml=serial.xml", timeout=300).assert_outcomes(failed=2, passed=7)
    rerun = pytester.runpytest_subprocess("-n", "2", "--lf", *args, timeout=300)
    rerun.assert_outcomes(failed=2)
    assert _failed_lines(rerun) == expected
    assert cases("par.xml") == cases("serial.xml")
    assert ("test_release_checks", "test_phase_flip[sim:primacy-3]", ["failure"]) in cases("par.xml")


def test_the_stressor_parts_share_no_request_and_join_into_the_whole_probe(tmp_path, small_set):
    """Each part of the stressor probe asks only for its own requests (the clean outputs once, in
    the clean part), a part asked again makes no call, and the joined probe holds every stressor's
    variants and the controls on the clean part's videos."""
    from pytest_posbias.probes.stressor import PARTS
    from pytest_posbias.video.stressors import STRESSORS

    opts = RunOptions(models=("sim:looping",), data=str(small_set), cache=str(tmp_path / "c"), seed=0,
                      sequential=False)
    ctx = RunContext.create(opts, PosbiasConfig(probes={"stressor": {"videos": 3, "trials": 1, "frames": [4]}}),
                            rootdir=tmp_path, worker="main", run_id="t")
    try:
        made = {}
        for part in PARTS:
            before = ctx.engine.stats.made
            ctx.stressor("sim:looping", 4, part=part)
            made[part] = ctx.engine.stats.made - before
        assert made["clean"] == 3  # one clean output per video, made before any other part
        assert made["delete1"] == 3 * 4 and made["reverse"] == 3 and made["add1"] == 3  # no clean request again
        assert made["controls"] >= 3 * 12
        before = ctx.engine.stats.made
        whole = ctx.stressor("sim:looping", 4)
        assert ctx.engine.stats.made == before  # every part was computed once already
        assert set(whole.variants) == set(STRESSORS) and "black" in whole.controls
        assert len(whole.videos) == 3 and all(len(whole.variants[s]) == 3 for s in STRESSORS)
        assert whole.calls["made"] == sum(made.values()) - made["clean"]  # the clean outputs are the clean part's
        with pytest.raises(Exception, match="part"):
            ctx.stressor("sim:looping", 4, part="nope")
    finally:
        ctx.close()
