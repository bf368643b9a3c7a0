"""The run context (``run.context.RunContext``): seeded generators keyed by the run seed, the
per-process memo and the shared requests it counts, thresholds and probe settings, the conditions
each phase gate asks for, the stressor probe's parts around one clean part, refused arguments, the
run log's header and observations, and the progress lines. Probe runs use the small synthetic set
with ``sim:unbiased`` at small sizes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.errors import ConfigError
from pytest_posbias.models.plan import CURRENT_TEST
from pytest_posbias.probes import conditions as C
from pytest_posbias.run.context import RunContext, environment
from pytest_posbias.run_options import RunOptions


@pytest.fixture
def make(tmp_path):
    made = []

    def ctx(manifest=None, probes=None, run_id="r1", progress=None, **options):
        opts = {"sequential": False, "cache": str(tmp_path / "cache"), **options}
        c = RunContext.create(RunOptions(data=str(manifest) if manifest else None, **opts),
                              PosbiasConfig(probes=probes or {}), rootdir=tmp_path, worker="main", run_id=run_id,
                              progress=progress)
        made.append(c)
        return c

    yield ctx
    for c in made:
        c.close()


def _header(ctx):
    ctx.runlog.close()
    return json.loads(ctx.runlog.path.read_text().splitlines()[0])


def test_rng_is_seeded_by_the_run_seed_and_the_keys(make, tmp_path):
    """The same seed and keys draw the same numbers; another key or seed others; the global one is untouched."""
    a, b = make(seed=7), make(seed=7, run_id="r2", cache=str(tmp_path / "c2"))
    other_seed = make(seed=8, run_id="r3", cache=str(tmp_path / "c3"))
    np.random.seed(0)
    before = np.random.random()
    np.random.seed(0)
    draw = a.rng("phase-items", 3).random(4)
    assert np.array_equal(draw, b.rng("phase-items", 3).random(4))
    assert not np.array_equal(draw, a.rng("phase-items", 4).random(4))
    assert not np.array_equal(draw, other_seed.rng("phase-items", 3).random(4))
    assert np.random.random() == before


def test_memo_computes_once_and_counts_requests_read_by_another_test(make):
    """A memoised result is computed once; read by another test, its requests count as shared;
    read again by the test that computed it, nothing is counted."""
    ctx = make()
    computed = []

    def fn():
        computed.append(1)
        return SimpleNamespace(calls={"made": 5, "cache_hits": 2, "failed": 1})

    token = CURRENT_TEST.set("t.py::a")
    try:
        first = ctx.memo("k", fn)
        assert ctx.memo("k", fn) is first and ctx.engine.stats.shared == 0
    finally:
        CURRENT_TEST.reset(token)
    token = CURRENT_TEST.set("t.py::b")
    try:
        assert ctx.memo("k", fn) is first
    finally:
        CURRENT_TEST.reset(token)
    assert computed == [1] and ctx.engine.stats.shared == 5 + 2


def test_thresholds_follow_the_command_lines_overrides(make):
    """An override from the command line replaces the gate's threshold for every model."""
    ctx = make(models=("sim:unbiased",), threshold_overrides={"order": 0.07})
    assert ctx.threshold("order", "sim:unbiased") == 0.07
    assert ctx.thresholds("sim:unbiased")["order"] == 0.07


def test_probe_settings_apply_the_projects_table_over_the_defaults(make):
    """``[tool.posbias.probes.phase]`` keys replace the defaults; the others stay."""
    from pytest_posbias.probes.settings import DEFAULTS

    ctx = make(probes={"phase": {"items": 5}})
    s = ctx.probe_settings("phase")
    assert s["items"] == 5 and s["budget"] == DEFAULTS["phase"]["budget"]
    assert ctx.phase_spec().items == 5


def test_refused_arguments_name_what_is_allowed(make):
    """An unknown paired test, phase gate or stressor part is an error naming the choices."""
    with pytest.raises(ConfigError, match="bootstrap or permutation"):
        make(paired_test="wilcoxon")
    ctx = make()
    with pytest.raises(ConfigError, match="'swing'"):
        ctx.phase("sim:unbiased", "swing")
    with pytest.raises(ConfigError, match="'rotate'"):
        ctx.stressor("sim:unbiased", 16, part="rotate")


@pytest.mark.parametrize("gate, ordered, identity", [
    ("order", [C.phase(0)], []),
    ("parity", [C.phase(0), C.rerun(0)], []),
    ("phase", [*C.phases(3), C.rerun(0)], []),
    ("fusion", [], C.fusion_conditions(3)),
])
def test_each_phase_gate_asks_for_its_conditions(make, small_set, gate, ordered, identity):
    """Order: phase 0 in every ordering; parity and phase: with the re-run of phase 0 (the floor);
    fusion: the S phases, their shifted grids and the unions in the identity ordering only."""
    ctx = make(small_set, probes={"phase": {"items": 2, "orderings": 3, "resolution": 64}})
    res = ctx.phase("sim:unbiased", gate)
    assert set(res.condition_answers) == {*ordered, *identity}
    for c in ordered:
        assert res.condition_answers[c].shape == (2, 3)
    for c in identity:
        assert res.condition_answers[c].shape == (2, 1)
    assert ctx.phase("sim:unbiased", gate) is res  # memoised


def test_stressor_parts_share_one_clean_part(make, small_set):
    """Each stressor part reads the one clean part: its clean outputs are the clean part's and asks
    no clean request again; the joined result holds every stressor's variants; asked again, every
    part is memoised (no new call)."""
    from pytest_posbias.video.stressors import STRESSORS

    ctx = make(small_set, probes={"stressor": {"videos": 2, "trials": 1, "frames": [8], "resolution": 64}})
    clean = ctx.stressor("sim:unbiased", 8, part="clean")
    after_clean = ctx.engine.stats.made
    shuffle = ctx.stressor("sim:unbiased", 8, part="shuffle")
    assert shuffle.clean.texts == clean.clean.texts and shuffle.videos == clean.videos
    assert ctx.engine.stats.made - after_clean <= sum(len(s.texts) for s in shuffle.variants["shuffle"])
    joined = ctx.stressor("sim:unbiased", 8)
    assert set(joined.variants) == set(STRESSORS) and joined.clean.texts == clean.clean.texts
    made = ctx.engine.stats.made
    ctx.stressor("sim:unbiased", 8)
    assert ctx.engine.stats.made == made


def test_the_run_log_header_records_the_run_with_credentials_redacted(make):
    """Run id, worker, models (sim:unbiased when none is given), seed, mode and thresholds; an
    endpoint's user-info never reaches the log."""
    ctx = make(seed=3, api_base="http://user:s3cret@localhost:9/v1")
    head = _header(ctx)
    assert (head["run_id"], head["worker"], head["models"], head["seed"]) == ("r1", "main", ["sim:unbiased"], 3)
    assert "order" in head["thresholds"]["sim:unbiased"]
    assert "s3cret" not in ctx.runlog.path.read_text()


def test_observations_go_to_the_run_log_with_probe_and_worker(make):
    """An observation is a run-log record naming its probe and this process's worker."""
    ctx = make()
    ctx.observe("phase", {"type": "item", "item": "q1"})
    ctx.runlog.close()
    rec = json.loads(ctx.runlog.path.read_text().splitlines()[-1])
    assert rec == {"kind": "observation", "probe": "phase", "worker": "main", "type": "item", "item": "q1"}


def test_progress_lines_only_for_batches_that_take_a_while(make, monkeypatch):
    """A short batch prints nothing; a long one a line, then at most one per interval, and the last."""
    from pytest_posbias.run import context as context_module

    lines: list[str] = []
    ctx = make(progress=lines.append)
    now = [100.0]
    monkeypatch.setattr(context_module.time, "monotonic", lambda: now[0])
    ctx.engine.progress(1, 10, 0, 0.5)  # under PROGRESS_AFTER_S
    assert lines == []
    ctx.engine.progress(2, 10, 0, 3.0)
    ctx.engine.progress(3, 10, 0, 3.1)  # too soon after the last line
    now[0] += 0.1
    ctx.engine.progress(10, 10, 0, 3.2)  # the last: always
    assert len(lines) == 2
    ctx.note("a note")
    assert lines[-1] == "a note"


def test_environment_names_python_and_the_packages():
    """The environment record: the Python version and this package's installed version."""
    import sys

    env = environment()
    assert env["python"] == sys.version.split()[0] and "pytest-posbias" in env["packages"]


def test_a_test_reading_another_tests_probe_counts_its_requests_once_per_probe(make):
    """A sequential gate reads the looks of a probe another gate computed, each look a nested sample of the same
    probe and each read at two of its own looks: it rests on the largest look's requests, counted once (the
    sum over reads counted a 192-request probe as 576)."""
    ctx = make()

    def result(n):
        return lambda: SimpleNamespace(calls={"made": n, "cache_hits": 0})

    token = CURRENT_TEST.set("t.py::a")
    try:
        ctx.memo("p|12", result(96), family="p")
        ctx.memo("p|24", result(192), family="p")
        ctx.memo("q|24", result(40), family="q")
    finally:
        CURRENT_TEST.reset(token)
    for test in ("t.py::b", "t.py::c"):
        token = CURRENT_TEST.set(test)
        try:
            for key in ("p|12", "p|12", "p|24", "p|24", "q|24"):
                ctx.memo(key, result(0), family=key.split("|")[0])
        finally:
            CURRENT_TEST.reset(token)
    assert ctx.engine.stats.shared == 2 * (192 + 40)
