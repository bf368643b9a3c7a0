"""The ``-n`` scheduler (``plugin.xdist_scheduler``) driven by a simulated xdist: a probe group per
worker, a shared result made once by its first group and read by the others, the heaviest group
first, and the main job's calls spread within a tenth of the ideal."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_posbias.run.suite_params import XDIST_GROUP_PREFIX, probe_group, shared_probes


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
