"""The report's figures drawn by helper processes beside this one: the same bytes as in one
process, and drawn here wherever a helper cannot be had, dies, hangs or fails on a figure."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time

import pytest

from pytest_posbias.report import figure_pool, figures

CALLS = [  # one call of every deferrable figure function, with data like the report's
    ("coverage_curves", ([{"title": f"panel {k}", "series": [{"model": "sim:a", "mean": [0.5, 0.4, 0.45, 0.6],
                                                                 "low": [0.4, 0.3, 0.35, 0.5], "high": [0.6, 0.5, 0.55, 0.7]}]}
                          for k in range(3)],), {}),
    ("heatmap", ([[0.1, None], [0.3, 0.9]], ["a", "b"], ["x", "y"]), {"title": "disagreement"}),
    ("bars", (["g1", "g2"], {"m": [0.2, None]}), {"title": "flips", "ylabel": "rate", "ref": {"floor": 0.05}}),
    ("lines", ({"m": ([0.1, 0.5, 1.0], [0.9, 0.8, 0.7])},), {"title": "risk", "xlabel": "coverage", "ylabel": "acc"}),
    ("distributions", ({"clean": [0.1, 0.2, 0.3], "reverse": [0.4, 0.5]},), {"title": "RI", "ylabel": "RI"}),
    ("stacked", (["clean", "add"], {"benign": [0.7, 0.5], "ordinary": [0.2, 0.3], "severe": [0.1, 0.2]}), {"title": "sev"}),
    ("forest", ([{"label": "dpb[x]", "estimate": 0.1, "low": 0.05, "high": 0.2, "passed": False}],),
     {"title": "worst", "xlabel": "estimate", "lower": -0.05, "upper": 0.05}),
    ("trend", ([{"release": "#1", "estimate": 0.1, "low": 0.0, "high": 0.2, "passed": True}],),
     {"title": "meg", "ylabel": "estimate"}),
]


def _page(calls) -> str:
    return "<html>" + "".join(f"<figure>{getattr(figures, n)(*a, **k)}</figure>" for n, a, k in calls) + "</html>"


@pytest.fixture
def processes(monkeypatch):
    """Sets how many processes draw (this one included) and starts the helpers; ends them after."""
    figure_pool.stop_figure_helpers()

    def use(n: int, *, ready: bool = True) -> list:
        monkeypatch.setenv("POSBIAS_FIGURE_PROCESSES", str(n))
        figure_pool.start_figure_helpers()
        helpers = list(figure_pool._HELPERS)
        for h in helpers if ready else ():  # their imports done, as in a run that started them early
            assert h.wait_ready(lambda: True)
        return helpers

    yield use
    figure_pool.stop_figure_helpers()


def test_every_figure_function_is_deferred_and_helpers_draw_the_same_bytes(processes):
    direct = _page(CALLS)
    helpers = processes(3)
    assert len(helpers) == 2 and all(h.alive() for h in helpers)
    with figure_pool.deferred() as batch:
        page = _page(CALLS)
    assert len(batch) == len(CALLS)
    assert "<svg" not in page and page.count("<!--posbias-figure-") == len(CALLS)  # nothing drawn yet
    assert batch.fill(page) == direct
    assert 1 <= batch.drawn_by_helpers <= len(CALLS)  # this process drew the others
    with figure_pool.deferred() as again:  # the helpers serve the next report too
        page = _page(CALLS)
    assert again.fill(page) == direct and all(h.alive() for h in helpers)


def test_one_process_draws_every_figure_itself(processes):
    assert processes(1) == []
    with figure_pool.deferred() as batch:
        page = _page(CALLS[:3])
    assert batch.fill(page) == _page(CALLS[:3])
    assert batch.drawn_by_helpers == 0


def test_no_helper_to_be_had_draws_every_figure_here(processes, monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise OSError("Resource temporarily unavailable")

    monkeypatch.setattr(subprocess, "Popen", no_subprocess)
    assert processes(2) == []
    with figure_pool.deferred() as batch:
        page = _page(CALLS[:4])
    assert batch.fill(page) == _page(CALLS[:4])
    assert batch.drawn_by_helpers == 0


def test_a_helper_killed_before_a_batch_leaves_its_figures_to_this_process(processes):
    [helper] = processes(2)
    os.kill(helper.proc.pid, signal.SIGKILL)
    helper.proc.wait()
    with figure_pool.deferred() as batch:
        page = _page(CALLS[:4])  # too few figures to start helpers at fill time
    assert batch.fill(page) == _page(CALLS[:4])
    assert batch.drawn_by_helpers == 0 and figure_pool._HELPERS == []  # the dead helper is dropped


def test_a_serial_run_starts_helpers_only_for_a_batch_worth_it(monkeypatch):
    figure_pool.stop_figure_helpers()
    monkeypatch.setenv("POSBIAS_FIGURE_PROCESSES", "2")
    try:
        with figure_pool.deferred() as few:
            page = _page(CALLS[: figure_pool.START_AT_FILL_MIN - 1])
        assert few.fill(page) == _page(CALLS[: figure_pool.START_AT_FILL_MIN - 1])
        assert figure_pool._HELPERS == [] and few.drawn_by_helpers == 0
        many = (CALLS * 2)[: figure_pool.START_AT_FILL_MIN]
        with figure_pool.deferred() as batch:
            page = _page(many)
        assert batch.fill(page) == _page(many)
        assert len(figure_pool._HELPERS) == 1  # started at fill time; it joins in once its imports are done
    finally:
        figure_pool.stop_figure_helpers()


def test_a_helper_that_hangs_is_ended_and_its_figure_drawn_here(processes, monkeypatch):
    [helper] = processes(2)
    monkeypatch.setattr(figure_pool, "HELPER_TIMEOUT_S", 1.0)
    os.kill(helper.proc.pid, signal.SIGSTOP)
    try:
        with figure_pool.deferred() as batch:
            page = _page(CALLS[:3])
        assert batch.fill(page) == _page(CALLS[:3])
    finally:
        with contextlib.suppress(ProcessLookupError):  # ended by then, as it should be
            os.kill(helper.proc.pid, signal.SIGCONT)
    assert batch.drawn_by_helpers == 0 and helper.proc.wait(timeout=10) is not None and figure_pool._HELPERS == []


def test_a_figure_that_fails_in_a_helper_fails_here_as_in_one_process(processes):
    processes(2)
    with figure_pool.deferred() as batch:
        good = figures.lines({"m": ([0.0, 1.0], [0.5, 0.5])}, title="t", xlabel="x", ylabel="y")
        bad = figures.lines({"m": ([0.0, 1.0], [0.5])}, title="x and y differ in length", xlabel="x", ylabel="y")
    with pytest.raises(Exception) as drawn:
        batch.fill(bad + good)
    assert isinstance(drawn.value, ValueError) and "same first dimension" in str(drawn.value)
    with pytest.raises(ValueError, match=re.escape(str(drawn.value))):  # the error a call in one process gives
        figures.lines({"m": ([0.0, 1.0], [0.5])}, title="x and y differ in length", xlabel="x", ylabel="y")


def test_fill_replaces_only_its_own_placeholders():
    with figure_pool.deferred() as outer:
        a = figures.lines({"m": ([0.0], [0.5])}, title="a", xlabel="x", ylabel="y")
        with figure_pool.deferred() as inner:
            b = figures.lines({"m": ([0.0], [0.7])}, title="b", xlabel="x", ylabel="y")
        c = figures.lines({"m": ([0.0], [0.9])}, title="c", xlabel="x", ylabel="y")
    forged = "<!--posbias-figure-0000000000000000-0-->"
    page = outer.fill(a + b + c + forged)
    assert page.count("<svg") == 2 and b in page and forged in page  # the inner batch's and a stranger's kept
    assert inner.fill(page).count("<svg") == 3
    assert len(outer) == 2 and len(inner) == 1


def test_outside_a_batch_figures_are_drawn_at_once():
    svg = figures.bars(["g"], {"m": [0.3]}, title="t", ylabel="y")
    assert svg.startswith("<svg")


@pytest.mark.parametrize("raw, expected", [("0", 0), ("1", 1), ("3", 3)])
def test_figure_processes_setting(monkeypatch, raw, expected):
    monkeypatch.setenv("POSBIAS_FIGURE_PROCESSES", raw)
    assert figure_pool.figure_processes() == expected


def test_a_figure_processes_setting_that_is_not_a_number_is_named_and_draws_here(monkeypatch):
    monkeypatch.setenv("POSBIAS_FIGURE_PROCESSES", "junk")
    with pytest.warns(RuntimeWarning, match="POSBIAS_FIGURE_PROCESSES='junk' is not a whole number"):
        assert figure_pool.figure_processes() == 1


def test_a_helper_still_starting_takes_no_figure_and_this_process_does_not_wait_for_it(processes):
    [helper] = processes(2, ready=False)
    os.kill(helper.proc.pid, signal.SIGSTOP)  # stopped in its imports: it never says it is ready
    try:
        with figure_pool.deferred() as batch:
            page = _page(CALLS[:3])
        assert batch.fill(page) == _page(CALLS[:3])
        assert batch.drawn_by_helpers == 0 and not helper.ready and helper.alive()  # not ended: it may join later
    finally:
        os.kill(helper.proc.pid, signal.SIGCONT)
    assert helper.wait_ready(lambda: True)  # and it does, for the next batch
    with figure_pool.deferred() as batch:
        page = _page(CALLS)
    assert batch.fill(page) == _page(CALLS) and batch.drawn_by_helpers >= 1


def test_a_hung_helper_does_not_block_on_a_call_larger_than_the_pipe(processes, monkeypatch):
    [helper] = processes(2)
    monkeypatch.setattr(figure_pool, "HELPER_TIMEOUT_S", 2.0)
    os.kill(helper.proc.pid, signal.SIGSTOP)
    xs = [i / 40_000 for i in range(40_000)]  # a pickled call of ~400 KB: more than a pipe holds
    try:
        big = [("lines", ({"m": (xs, xs)},), {"title": t, "xlabel": "x", "ylabel": "y"}) for t in ("a", "b")]
        with figure_pool.deferred() as batch:  # two: the helper takes one of them
            page = _page(big)
        t0 = time.monotonic()
        assert batch.fill(page) == _page(big)
        assert time.monotonic() - t0 < 30
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper.proc.pid, signal.SIGCONT)
    assert batch.drawn_by_helpers == 0 and helper.proc.wait(timeout=10) is not None


def test_a_helper_draws_the_parents_package_not_one_in_the_working_directory(processes, tmp_path, monkeypatch):
    shadow = tmp_path / "pytest_posbias"  # another copy where the helper starts (an old checkout)
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the shadow copy was imported')\n")
    monkeypatch.chdir(tmp_path)
    assert len(processes(2)) == 1  # ready: it imported this process's package
    with figure_pool.deferred() as batch:
        page = _page(CALLS)
    assert batch.fill(page) == _page(CALLS) and batch.drawn_by_helpers >= 1


def test_a_change_to_matplotlibs_settings_in_this_process_reaches_no_figure(processes):
    import matplotlib

    helpers_drew = _page(CALLS)
    processes(2)
    with matplotlib.rc_context({"lines.linewidth": 4.0, "font.size": 14}):  # a user's conftest or test
        assert _page(CALLS) == helpers_drew
        with figure_pool.deferred() as batch:
            page = _page(CALLS)
        assert batch.fill(page) == helpers_drew and batch.drawn_by_helpers >= 1  # no page mixed of the two
        assert matplotlib.rcParams["lines.linewidth"] == 4.0  # and the user's setting stays


def test_the_xdist_controller_starts_helpers_once_a_worker_has_a_run_log(monkeypatch, tmp_path):
    import threading
    from types import SimpleNamespace

    from pytest_posbias import xdist_support

    started = []
    monkeypatch.setattr(figure_pool, "start_figure_helpers", lambda: started.append(1))
    monkeypatch.setattr(xdist_support, "LOG_POLL_S", 0.05)
    config = SimpleNamespace(workerinput=None, option=SimpleNamespace(dist="load"),
                             getoption=lambda name, default=None: default)
    stop = threading.Event()
    followed = xdist_support.start_log_follower(config, tmp_path, stop)
    try:
        time.sleep(0.4)
        assert started == []  # `pytest -n N` of other tests: no posbias run, no helper
        (tmp_path / "log-gw0.jsonl").write_text("")
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        assert started == [1]  # once
    finally:
        stop.set()
        xdist_support.stop_log_follower(followed)
        xdist_support.unfreeze_after_merge(followed)
