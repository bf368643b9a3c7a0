"""``pytest -n N``: gates that share a probe run on one worker (the plugin's xdist scheduler), a
probe is computed once, a result several groups read is made by the first and read from the
generation cache by the others, and the verdicts equal the serial run's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.run.context import RunContext
from pytest_posbias.run.suite_params import XDIST_GROUP_PREFIX, model_id, probe_group, shared_probes
from pytest_posbias.run_options import RunOptions


def _group(nodeid: str, *, frames: int | None = 16) -> str | None:
    return probe_group(nodeid, model_ids=["sim:primacy", "sim:unbiased"], search_frames=frames)


def test_gates_of_one_configuration_share_a_group_and_other_probes_do_not():
    pos = "suites/test_positional.py::"
    dpb2 = _group(pos + "test_dpb[sim:primacy-cooking-short-P2]")
    dpb4 = _group(pos + "test_dpb[sim:primacy-cooking-short-P4]")
    meg4 = _group("test_positional.py::test_meg[sim:primacy-cooking-short-P4]")
    other = _group(pos + "test_dpb[sim:primacy-cooking-long-P2]")
    model2 = _group(pos + "test_dpb[sim:unbiased-cooking-short-P2]")
    variant = _group(pos + "test_meg_variant[sim:primacy-cooking-short-P4-8-frames]")
    assert dpb2 == dpb4 == meg4 and dpb2 is not None and dpb2.startswith(XDIST_GROUP_PREFIX)
    assert len({dpb2, other, model2, variant}) == 4
    assert variant == _group(pos + "test_dpb_variant[sim:primacy-cooking-short-P4-8-frames]")
    ph = "suites/test_phase_order.py::"
    phase = {_group(ph + t) for t in ("test_order_flip[sim:primacy]", "test_phase_flip[sim:primacy-phase-0-1]",
                                      "test_sampler_flip[sim:primacy-left-vs-midpoint@8f]")}
    assert len(phase) == 1 and None not in phase
    st = "suites/test_stressors.py::"
    # the stressor probe in parts: the clean outputs (repetition, remedy) and each stressor's variants
    s16 = {_group(st + t) for t in ("test_clean_repetition[sim:primacy-16f]",
                                    "test_requery_remedy_recovers_flagged_outputs[sim:primacy]")}
    add1 = {_group(st + t) for t in ("test_stressor_amplification[sim:primacy-16f-add1]",
                                     "test_attack_success_rate[sim:primacy-16f-add1]")}
    reverse = _group(st + "test_attack_success_rate[sim:primacy-16f-reverse]")
    controls = _group(st + "test_stressor_controls[sim:primacy-16f]")  # a part of their own, not the clean outputs'
    assert len(s16) == len(add1) == 1 and len(s16 | add1 | {reverse, controls}) == 4
    assert None not in s16 | add1 | {reverse, controls} and controls.endswith("|16|controls")
    assert _group(st + "test_clean_repetition[sim:primacy-32f]") not in s16
    assert _group(st + "test_attack_success_rate[sim:primacy-32f-add1]") not in add1
    assert _group(st + "test_repetition_under_decoding_setting[sim:primacy-r1.1]") is None  # a probe of its own
    srch = "suites/test_search.py::"
    assert _group(srch + "test_search_option_order[sim:primacy]") in phase  # the phase probe's items
    assert _group(srch + "test_search_heavy[sim:primacy-order]") in phase
    assert _group(srch + "test_search_stressor_repetition[sim:primacy]") in s16  # its clean outputs, first frame count
    assert _group(srch + "test_search_slot_coverage[sim:primacy]") is None  # groups of every configuration
    assert _group("tests/test_mine.py::test_x[sim:primacy]") is None
    # a renamed copy of a suite groups as the suite: the suite is its test functions', not its file's
    assert _group("checks/test_my_stressors.py::test_clean_repetition[sim:primacy-16f]") in s16
    assert _group("checks/test_release.py::test_meg[sim:primacy-cooking-short-P4]") == dpb2
    assert _group(pos + "test_dpb[sim:primacy-no-groups]") is None  # the skipped "no groups" param
    assert _group(pos + "test_dpb[other-model-cooking-short-P2]") is None  # not a model of this run


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


class _FakeNode:
    """What the scheduler uses of an xdist worker: the tests sent to it, and its shutdown."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.name = name
        self.sent: list[int] = []
        self.done = 0
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduled(workers: int, collection: list[str], shares: Any, **kw: Any) -> tuple[Any, list[Any]]:
    """The plugin's scheduler over ``workers`` fake nodes that all collected ``collection``, after its
    first ``schedule()``."""
    from pytest_posbias.plugin.xdist_scheduler import ProbeGroupScheduling

    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"], option=SimpleNamespace(loadscopereorder=False))
    sched = ProbeGroupScheduling(config, None, shares_of=shares, **kw)
    nodes = [_FakeNode(f"gw{i}") for i in range(workers)]
    for n in nodes:
        sched.add_node(n)
        sched.add_node_collection(n, collection)
    sched.schedule()
    return sched, nodes


def _simulate(collection: list[str], workers: int, *, shares: Any, **kw: Any) -> tuple[dict[str, int], dict[str, str]]:
    """Run ``collection`` through the plugin's scheduler on fake workers that behave as xdist's: a
    worker runs a test once it knows its next one (or is shut down), one test per round on each
    worker at once, and reports it complete after the round. A test needs the shared results
    ``shares(nodeid)``: from its worker's memo, else from the generation cache (results of tests
    completed in earlier rounds), else it makes them. Returns how often each result was made and
    the worker of each test."""
    sched, nodes = _scheduled(workers, collection, shares, **kw)
    memo: dict[str, set[str]] = {n.name: set() for n in nodes}
    cache: set[str] = set()
    made: dict[str, int] = {}
    ran: dict[str, str] = {}
    while True:
        stored: set[str] = set()
        finished = []
        for n in nodes:
            if n.done < len(n.sent) - 1 or (n.done < len(n.sent) and n.shutting_down):
                nodeid = collection[n.sent[n.done]]
                for name in set(shares(nodeid)) - memo[n.name]:
                    made[name] = made.get(name, 0) + (name not in cache)
                    memo[n.name].add(name)
                    stored.add(name)
                assert nodeid not in ran, nodeid
                ran[nodeid] = n.name
                finished.append((n, n.sent[n.done]))
                n.done += 1
        cache |= stored
        for n, index in finished:
            sched.mark_test_complete(n, index)
        if not finished:
            return made, ran


def _suite_ids(models: list[str], frames: tuple[int, ...] = (8, 16)) -> list[str]:
    pos, ph, st = "suites/test_positional.py::", "suites/test_phase_order.py::", "suites/test_stressors.py::"
    out = []
    for m in models:
        out += [f"{pos}test_{g}[{m}-{c}-P{P}]" for c in ("cooking-short", "news-long") for P in (2, 4) for g in ("dpb", "meg")]
        out += [f"{ph}test_order_flip[{m}]", f"{ph}test_phase_flip[{m}-phase-0-1]"]
        for f in frames:
            out += [f"{st}test_clean_repetition[{m}-{f}f]", f"{st}test_stressor_controls[{m}-{f}f]"]
            out += [f"{st}test_{g}[{m}-{f}f-{s}]" for s in ("add1", "delete1", "reverse", "shuffle")
                    for g in ("stressor_amplification", "attack_success_rate")]
        out.append(f"{st}test_requery_remedy_recovers_flagged_outputs[{m}]")
    return out


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("case", ["one model", "attack only", "baseline", "two models and a baseline", "parity"])
def test_a_result_other_groups_read_is_made_once_and_read_from_the_cache(workers, case):
    """The stressor probe's parts all read its clean outputs (and, with a baseline or a parity
    reference, several models' groups read its probe): the first group handed out that needs a
    shared result makes it, and a group on another worker that needs it starts only once that
    group has finished (then it reads it from the cache). On fake workers: every shared result is
    made once, every test runs once, with any number of workers; with a selection that holds no
    clean-part test too. The scheduler without the hold-back makes the clean outputs twice on 4
    workers."""
    from pytest_posbias.probes.settings import settings_for
    from pytest_posbias.run.suite_params import group_weight, shared_probes

    settings = {n: settings_for(n) for n in ("positional", "phase", "stressor")}
    models = ["sim:a", "sim:b"] if case == "two models and a baseline" else ["sim:a"]
    ids = _suite_ids(models)
    if case == "attack only":
        ids = [i for i in ids if "attack_success_rate" in i]
    if case == "parity":
        ids += [f"suites/test_parity.py::test_parity_{t}[sim:a{p}]"
                for t, p in (("answers", ""), ("coverage", "-cooking-short-P2"), ("repetition", "-8f"))]
    baseline = "sim:c" if "baseline" in case else None
    parity = "sim:r" if case == "parity" else None
    kw = {"model_ids": models, "search_frames": 8}

    def shares(nodeid: str) -> frozenset[str]:
        return shared_probes(nodeid, baseline_id=baseline, parity_id=parity, **kw)

    made, ran = _simulate(ids, workers, shares=shares, group_of=lambda n: probe_group(n, **kw),
                          weight_of=lambda g: group_weight(g, settings))
    assert sorted(ran) == sorted(ids)
    assert made and all(n == 1 for n in made.values()), made
    assert "stressor|sim:a|8|clean" in made and "stressor|sim:a|16|clean" in made
    if baseline:
        assert "stressor|sim:c|8|clean" in made and "positional|sim:c|cooking-short" in made
    if parity:
        assert {"phase|sim:r", "positional|sim:r|cooking-short", "stressor|sim:r|8|clean"} <= set(made)
        assert probe_group(ids[-1], **kw) == probe_group("suites/test_stressors.py::test_clean_repetition[sim:a-8f]", **kw)


def test_the_scheduler_hands_out_the_owner_of_a_shared_result_first_and_holds_the_others_back():
    """Four parts of one stressor probe and two other groups on two workers: the lightest part goes
    out first (it owns the clean outputs), the other worker gets the heaviest other group, not a
    part; no part goes to the other worker before the owner finished. The owner's worker, down to
    the owner's last test, gets the heaviest part next: no other worker could start it before the
    owner has finished, so it starts there as early as anywhere (the free test given there instead
    would leave the heavy part to whichever worker runs out later). Once the owner finished the light
    parts go to the worker with the least left, the busy worker gets the lightest scope."""
    from pytest_posbias.plugin.xdist_scheduler import ProbeGroupScheduling

    st = "suites/test_stressors.py::test_attack_success_rate[sim:a-8f-{}]"
    ids = [st.format(p) for p in ("add1", "delete1", "reverse", "shuffle")]
    ids += ["suites/test_phase_order.py::test_order_flip[sim:a]", "tests/test_mine.py::test_x"]
    kw = {"model_ids": ["sim:a"], "search_frames": 8}
    weights = {"delete1": 64, "add1": 16, "reverse": 8, "shuffle": 16, "phase": 500}
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"], option=SimpleNamespace(loadscopereorder=False))
    sched = ProbeGroupScheduling(config, None, group_of=lambda n: probe_group(n, **kw),
                                 weight_of=lambda g: next((w for k, w in weights.items() if g.endswith(k)), 1),
                                 shares_of=lambda n: shared_probes(n, **kw))
    a, b = _FakeNode("gw0"), _FakeNode("gw1")
    for n in (a, b):
        sched.add_node(n)
        sched.add_node_collection(n, ids)
    sched.schedule()
    assert [ids[i] for i in a.sent] == [st.format("reverse"), st.format("delete1")]  # the owner, the heaviest part
    # the heaviest group that needs nothing shared, no part; then (b has more left than a) the lightest
    assert [ids[i] for i in b.sent] == [ids[4], ids[5]]
    sched.mark_test_complete(a, 2)  # the owner finished: the parts are free for both workers
    assert [ids[i] for i in a.sent[2:]] == [st.format("add1")]  # a has least left: the heaviest left
    assert len(b.sent) == 2  # b is busy with phase and knows its next test
    sched.mark_test_complete(a, 1)
    assert [ids[i] for i in a.sent[3:]] == [st.format("shuffle")]
    sched.mark_test_complete(b, 4)
    sched.mark_test_complete(a, 0)
    assert sorted(a.sent + b.sent) == list(range(6)) and a.shutting_down and b.shutting_down


def test_a_group_waiting_on_owners_on_two_workers_does_not_stall_the_run():
    """Every worker down to its last test (which it runs only once it knows its next) and the only
    group left waiting on results owned on both: it goes to an owner's worker, and every test runs."""
    ids = ["t.py::test_a", "t.py::test_b", "t.py::test_x"]
    needs = {"t.py::test_a": {"r1"}, "t.py::test_b": {"r2"}, "t.py::test_x": {"r1", "r2"}}
    made, ran = _simulate(ids, 2, shares=lambda n: needs[n], group_of=lambda n: None,
                          weight_of=lambda g: {"t.py::test_x": 100}.get(g, 1))
    assert sorted(ran) == ids and ran["t.py::test_x"] == ran["t.py::test_a"]
    assert made["r1"] == 1


def _simulate_timed(collection: list[str], workers: int, *, cost: dict[str, int], shares: Any,
                    shared_cost: Any, **kw: Any) -> tuple[dict[str, int], dict[str, int], float]:
    """As :func:`_simulate`, in time: a test takes its model calls (``cost``, plus
    ``shared_cost(name)`` for each shared result it makes), a worker runs a test once it knows its next one (or is shut
    down) and reports it complete when it ends; a result made by a test is in the generation
    cache once that test has ended. Returns how often each shared result was made, each worker's
    calls, and the time the last test ended."""
    import heapq

    sched, nodes = _scheduled(workers, collection, shares, **kw)
    memo: dict[str, set[str]] = {n.name: set() for n in nodes}
    cache: set[str] = set()
    made: dict[str, int] = {}
    calls = {n.name: 0 for n in nodes}
    busy: set[str] = set()
    events: list[tuple[float, int, str, int, frozenset[str]]] = []
    by_name = {n.name: n for n in nodes}

    def start(n: _FakeNode, now: float) -> None:
        if n.name in busy or not (n.done < len(n.sent) - 1 or (n.done < len(n.sent) and n.shutting_down)):
            return
        nodeid = collection[n.sent[n.done]]
        c = cost.get(nodeid, 0)
        for name in set(shares(nodeid)) - memo[n.name]:
            if name not in cache:
                made[name] = made.get(name, 0) + 1
                c += shared_cost(name)
            memo[n.name].add(name)
        calls[n.name] += c
        busy.add(n.name)
        heapq.heappush(events, (now + c + 0.01, len(events) + sum(calls.values()), n.name, n.sent[n.done],
                                frozenset(memo[n.name])))

    now = 0.0
    for n in nodes:
        start(n, now)
    while events:
        now, _, name, index, known = heapq.heappop(events)
        n = by_name[name]
        cache |= known
        busy.discard(name)
        n.done += 1
        sched.mark_test_complete(n, index)
        for m in nodes:
            start(m, now)
    assert all(n.done == len(n.sent) for n in nodes)
    assert sorted(i for n in nodes for i in n.sent) == list(range(len(collection)))
    return made, calls, now


def _main_job() -> tuple[list[str], dict[str, int]]:
    """The benchmark's main job (benchmarks/balance.py: six positional configurations, the phase
    probe, the stressor probe at 16 frames over 8 videos) as node ids and the model calls each
    test made under ``sim:unbiased`` (the clean outputs, 8 calls, not counted: the test that makes
    them first pays them)."""
    m = "sim:u"
    pos, ph, st = "suites/test_positional.py::", "suites/test_phase_order.py::", "suites/test_stressors.py::"
    ids: list[str] = []
    cost: dict[str, int] = {}
    for c in ("cooking-short", "domestic-short", "domestic-long", "leisure-short", "leisure-long", "news-short"):
        group = [f"{pos}test_{g}[{m}-{c}-P{P}]" for g in ("dpb", "meg", "coverage") for P in (2, 4)]
        group.append(f"{pos}test_contamination[{m}-{c}-P4]")
        ids += group
        cost[group[0]] = 36
    phase = [f"{ph}test_order_flip[{m}]", f"{ph}test_phasefusion_under_origin_shift[{m}]",
             *[f"{ph}test_phase_flip[{m}-phase-{p}]" for p in ("0-1", "0-2", "1-2", "any")],
             f"{ph}test_sampler_flip[{m}-left-vs-midpoint@8f]", f"{ph}test_order_flip_b[{m}]"]
    ids += phase
    cost.update({phase[1]: 84, phase[2]: 18, phase[6]: 12})
    ids += [f"{st}test_clean_repetition[{m}-16f]", f"{st}test_stressor_controls[{m}-16f]"]
    cost[ids[-1]] = 129  # the controls, a test of their own; the clean repetition gate makes only the clean outputs
    for s in ("add1", "add2", "delete1", "delete2", "replace1", "replace2", "reverse", "shuffle"):
        ids += [f"{st}test_{g}[{m}-16f-{s}]" for g in ("stressor_amplification", "attack_success_rate")]
        cost[ids[-2]] = {"delete1": 128, "reverse": 8}.get(s, 16)
    return ids, cost


@pytest.mark.parametrize("workers", [2, 3, 4, 5])
def test_the_main_job_s_calls_spread_within_a_tenth_of_the_ideal(workers):
    """The benchmark's main job on workers whose tests take their model calls: the busiest worker
    makes at most 1.1 × the ideal (all calls / workers) and the last test ends by then, 1.2 × at 5
    workers, where the clean outputs' owner (16 calls) then the controls (129) and the Delete 1
    part (128) approach the ideal (139); the clean outputs are made once. At 5 workers the heaviest
    part goes to the owner's worker, which starts it as soon as the owner has finished (given the
    free test instead, the heavy parts would wait for a worker to run out: about 1.3 ×)."""
    from pytest_posbias.probes.settings import settings_for
    from pytest_posbias.run.suite_params import group_weight

    settings = {n: settings_for(n, p) for n, p in (("positional", {"groups": 6}),
                                                    ("phase", {"items": 12, "orderings": 2,
                                                               "samplers": ["left", "midpoint"]}),
                                                    ("stressor", {"videos": 8, "trials": 2}))}
    ids, cost = _main_job()
    kw = {"model_ids": ["sim:u"], "search_frames": 16}
    made, calls, end = _simulate_timed(ids, workers, cost=cost, shares=lambda n: shared_probes(n, **kw),
                                       shared_cost=lambda name: 8 if name.endswith("|clean") else 0, group_of=lambda n: probe_group(n, **kw),
                                       weight_of=lambda g: group_weight(g, settings))
    assert made["stressor|sim:u|16|clean"] == 1 and all(n == 1 for n in made.values()), made
    ideal = sum(calls.values()) / workers
    assert sum(calls.values()) == sum(cost.values()) + 8
    bound = 1.2 if workers == 5 else 1.1
    assert max(calls.values()) <= bound * ideal and end <= bound * ideal + 1, (calls, ideal)


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


def test_a_worker_gets_its_share_of_the_cpu_threads_and_blas_is_capped(monkeypatch):
    """Under -n N a worker sets OMP_NUM_THREADS to cores // N (torch reads it on import) and caps
    the BLAS numpy already loaded; a user's own setting stands."""
    import os

    threadpoolctl = pytest.importorskip("threadpoolctl")
    from pytest_posbias.run import xdist_support

    cpus = len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.delitem(__import__("sys").modules, "torch", raising=False)  # torch may be loaded in this process
    config = SimpleNamespace(workerinput={"workercount": 2}, option=SimpleNamespace(dist="load"))
    with threadpoolctl.threadpool_limits(limits=None):  # restores the BLAS threads afterwards
        xdist_support.configure_xdist(config)
        assert os.environ["OMP_NUM_THREADS"] == str(max(1, cpus // 2))
        blas = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert blas and all(n == max(1, cpus // 2) for n in blas)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    xdist_support.configure_xdist(config)
    assert os.environ["OMP_NUM_THREADS"] == "7"


def test_the_heaviest_probe_group_is_handed_out_first():
    """Group weights are the groups' model calls at most: the Delete 1 part outweighs a trial-based
    stressor, the phase probe outweighs a positional configuration at the default sizes, and the
    scheduler hands out the heaviest remaining scope first (not the one with the most tests)."""
    from collections import OrderedDict

    from pytest_posbias.plugin.xdist_scheduler import heaviest_first
    from pytest_posbias.probes.settings import settings_for
    from pytest_posbias.run.suite_params import group_weight

    settings = {n: settings_for(n) for n in ("positional", "phase", "stressor")}
    g = f"{XDIST_GROUP_PREFIX}{{}}|sim:primacy"
    st = settings["stressor"]
    assert group_weight(g.format("stressor") + "|16|delete1", settings) == st["videos"] * 16
    assert group_weight(g.format("stressor") + "|16|add1", settings) == st["videos"] * st["trials"]
    assert group_weight(g.format("stressor") + "|16|reverse", settings) == st["videos"]
    assert group_weight(g.format("positional") + "|cooking-short", settings) == settings["positional"]["groups"] * 6
    assert group_weight(g.format("phase"), settings) > group_weight(g.format("positional") + "|cooking-short", settings)
    assert group_weight("tests/test_mine.py::test_x", settings) == 1
    assert group_weight(g.format("stressor") + "|x|add1", settings) == 1  # a name it cannot read

    weights = {"few-tests-heavy": 500, "many-tests-light": 10, "middle": 100, "middle-too": 100}
    queue = OrderedDict([("many-tests-light", {f"t{i}": False for i in range(9)}), ("middle", {"m": False}),
                         ("middle-too", {"n": False}), ("few-tests-heavy", {"h": False})])
    taken = []
    while queue:
        heaviest_first(queue, weights.__getitem__)
        taken.append(queue.popitem(last=False)[0])  # as xdist's _assign_work_unit takes the next scope
    assert taken == ["few-tests-heavy", "middle", "middle-too", "many-tests-light"]


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


def test_with_a_cache_that_stores_nothing_the_groups_sharing_a_result_are_one_scope():
    """``--posbias-cache-mode read-only``: a later group could not read the clean outputs from the
    cache, so the stressor parts of one frame count (and the groups sharing a baseline's probe) are
    one scope, made on one worker; groups that share nothing stay apart."""
    kw = {"model_ids": ["sim:a", "sim:b"], "search_frames": 8}
    ids = _suite_ids(["sim:a", "sim:b"])

    def shares(nodeid: str) -> frozenset[str]:
        return shared_probes(nodeid, baseline_id="sim:c", **kw)

    made, ran = _simulate(ids, 4, shares=shares, group_of=lambda n: probe_group(n, **kw), merge_shared=True)
    assert sorted(ran) == sorted(ids) and all(n == 1 for n in made.values()), made
    for frames in (8, 16):  # every part of both models at a frame count on one worker (the baseline's probe)
        assert len({w for t, w in ran.items() if f"-{frames}f" in t}) == 1, ran
    plain, _ = _simulate(_suite_ids(["sim:a"]), 4, shares=lambda n: shared_probes(n, **kw),
                         group_of=lambda n: probe_group(n, **kw), merge_shared=True)
    assert all(n == 1 for n in plain.values())
