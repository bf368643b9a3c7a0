"""Retention of the cache folder: ``posbias cache prune`` and ``[tool.posbias] keep_runs``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_posbias.cli import main
from pytest_posbias.config import parse_config
from pytest_posbias.engine import Generation, GenerationCache, RunLog
from pytest_posbias.errors import ConfigError
from pytest_posbias.run.finish import finish_run
from pytest_posbias.run.retention import prune_runs
from pytest_posbias.run_options import RunOptions

NOW = 1_800_000_000.0
DAY = 86400.0


def runs(cache: Path, ages_days: dict[str, float], now: float = NOW) -> None:
    """Run folders named by id, each with a log, last written ``age`` days before ``now``."""
    for name, age in ages_days.items():
        d = cache / "runs" / name
        d.mkdir(parents=True)
        (d / "run.jsonl").write_text("x" * 1000)
        for p in (d / "run.jsonl", d):
            os.utime(p, (now - age * DAY, now - age * DAY))


def left(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "runs").iterdir())


def test_keep_runs_keeps_the_newest_n_and_never_the_ones_asked_to_keep(tmp_path):
    runs(tmp_path, {"r1": 5, "r2": 4, "r3": 3, "r4": 2, "r5": 1})
    res = prune_runs(tmp_path, keep_runs=2, keep=["r1"], now=NOW)  # r1 (this run) counts first among the 2
    assert left(tmp_path) == ["r1", "r5"]
    assert sorted(p.name for p in res.removed) == ["r2", "r3", "r4"] and res.freed_bytes == 3000 and res.kept == 2
    prune_runs(tmp_path, keep_runs=1, now=NOW)
    assert left(tmp_path) == ["r5"]


def test_a_run_still_writing_its_log_counts_as_new(tmp_path):
    runs(tmp_path, {"old-but-busy": 9, "r2": 2})
    os.utime(tmp_path / "runs" / "old-but-busy" / "run.jsonl", (NOW, NOW))  # its log was just written
    prune_runs(tmp_path, keep_runs=1, now=NOW)
    assert left(tmp_path) == ["old-but-busy"]


def test_older_than_removes_by_age_and_dry_run_removes_nothing(tmp_path):
    runs(tmp_path, {"r1": 40, "r2": 31, "r3": 29, "r4": 0.5})
    dry = prune_runs(tmp_path, older_than_days=30, now=NOW, dry_run=True)
    assert len(dry.removed) == 2 and left(tmp_path) == ["r1", "r2", "r3", "r4"] and "would remove 2" in dry.line()
    prune_runs(tmp_path, older_than_days=30, now=NOW)
    assert left(tmp_path) == ["r3", "r4"]


def test_old_answers_are_deleted_from_the_cache_on_request(tmp_path):
    cache = GenerationCache(tmp_path / "generations.sqlite")
    cache.put_many([(f"k{i}", "sim:x", Generation("a", 1, "stop")) for i in range(4)])
    now = time.time()
    cache._conn.execute("UPDATE generations SET created = ? WHERE key IN ('k0', 'k1')", (now - 10 * DAY,))
    res = prune_runs(tmp_path, answers_older_than_days=7, now=now)
    assert res.answers_removed == 2 and set(cache.get_many(["k0", "k1", "k2", "k3"])) == {"k2", "k3"}
    cache.close()


@pytest.mark.parametrize("kw, name", [({"keep_runs": 0}, "keep_runs"), ({"keep_runs": 1.5}, "keep_runs"),
                                      ({"older_than_days": -1}, "older_than_days"),
                                      ({"answers_older_than_days": 0}, "answers_older_than_days")])
def test_bad_values_are_named(tmp_path, kw, name):
    with pytest.raises(ConfigError, match=name):
        prune_runs(tmp_path, **kw)


def test_keep_runs_setting_is_validated():
    assert parse_config({"keep_runs": 3}).get("keep_runs") == 3
    with pytest.raises(ConfigError, match="keep_runs"):
        parse_config({"keep_runs": 0})


def test_the_command_prunes_and_says_what_it_removed(tmp_path, capsys):
    runs(tmp_path / ".posbias", {"a": 3, "b": 2, "c": 1})
    assert main(["cache", "prune", "--cache", str(tmp_path / ".posbias"), "--keep-runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "removed 2 run folders" in out and "kept 1" in out and left(tmp_path / ".posbias") == ["c"]
    assert main(["cache", "prune", "--cache", str(tmp_path / ".posbias")]) == 2
    assert "--keep-runs" in capsys.readouterr().err
    assert main(["cache", "prune", "--cache", str(tmp_path / "nope"), "--keep-runs", "1"]) == 2
    (tmp_path / "reports").mkdir()  # a folder that is no cache: named, not "removed 0, kept 0"
    assert main(["cache", "prune", "--cache", str(tmp_path / "reports"), "--keep-runs", "1"]) == 2
    assert "not a posbias cache folder" in capsys.readouterr().err


def test_keep_runs_is_applied_at_the_end_of_a_run_keeping_this_one(tmp_path):
    cache = tmp_path / ".posbias"
    runs(cache, {"20250101T000000Z-aaaaaa": 30, "20250102T000000Z-bbbbbb": 20}, now=time.time())
    this = "20260101T000000Z-cccccc"
    log = RunLog(cache / "runs" / this / "log-main.jsonl", {"run_id": this, "worker": "main", "models": ["sim:x"]})
    log.close()
    old = time.time() - 400 * DAY  # even when this run's folder looks oldest, it stays
    os.utime(cache / "runs" / this / "log-main.jsonl", (old, old))
    os.utime(cache / "runs" / this, (old, old))
    path = finish_run(config_rootdir=tmp_path, options=RunOptions(cache=".posbias", keep_runs=1,
                                                                  report=str(tmp_path / "r.html")),
                      verdict_rows=[], calls={}, run_id=this)
    assert path == cache / "runs" / this / "run.jsonl" and path.exists()
    assert left(cache) == [this]


def test_a_run_folder_that_could_not_be_removed_is_not_reported_removed(tmp_path):
    """A run folder that prune could not delete (here a symbolic link to an archive) is not listed as removed."""
    archive = tmp_path / "archive"
    runs(tmp_path / "elsewhere", {"old": 30})
    (tmp_path / "elsewhere" / "runs" / "old").rename(archive)
    (tmp_path / "c" / "runs").mkdir(parents=True)
    (tmp_path / "c" / "runs" / "old").symlink_to(archive, target_is_directory=True)
    runs(tmp_path / "c", {"new": 0})
    result = prune_runs(tmp_path / "c", keep_runs=1, now=NOW)
    still = [p for p in result.removed if p.exists()]
    assert not still, f"reported removed but still there: {still}"


def test_a_stray_file_in_runs_is_ignored_and_not_counted(tmp_path):
    """A folder in runs/ that is not a folder (a stray file) is ignored, and keep_runs counts only run folders."""
    runs(tmp_path, {"a": 3, "b": 2, "c": 1})
    (tmp_path / "runs" / "notes.txt").write_text("not a run")
    result = prune_runs(tmp_path, keep_runs=2, now=NOW)
    assert [p.name for p in result.removed] == ["a"] and result.kept == 2
    assert (tmp_path / "runs" / "notes.txt").exists()


def test_a_run_folder_removed_by_a_concurrent_prune_is_skipped(tmp_path, monkeypatch):
    """A run folder that vanishes while prune_runs looks at it is neither an error nor counted."""
    import shutil

    runs(tmp_path, {"a": 3, "b": 2, "c": 1})
    real_is_dir = Path.is_dir

    def is_dir_then_removed(self: Path) -> bool:
        found = real_is_dir(self)
        if found and self.name == "b" and self.parent.name == "runs":
            shutil.rmtree(self)  # the other process's prune, right after this one listed the folder
        return found

    monkeypatch.setattr(Path, "is_dir", is_dir_then_removed)
    result = prune_runs(tmp_path, keep_runs=1, now=NOW)
    assert [p.name for p in result.removed] == ["a"] and result.kept == 1


def test_keep_runs_never_removes_a_concurrent_run_still_writing(tmp_path):
    """Two runs share a cache: the one ending with keep_runs = 1 keeps itself and must not delete the other,
    which is still writing its worker log (no run.jsonl yet): its finished calls would be lost."""
    runs(tmp_path, {"this": 0})
    busy = tmp_path / "runs" / "other"
    busy.mkdir()
    (busy / "log-gw0.jsonl").write_text("x")
    os.utime(busy / "log-gw0.jsonl", (NOW, NOW))
    prune_runs(tmp_path, keep_runs=1, keep=["this"], now=NOW)
    assert left(tmp_path) == ["other", "this"]


def test_a_file_removed_by_a_concurrent_prune_while_sized_is_no_error(tmp_path, monkeypatch):
    """A run folder's file that another process's prune deletes while this one sums the folder's bytes is
    skipped: the prune (and the end of the run that called it, before its report) does not raise."""
    runs(tmp_path, {"a": 3, "b": 1})
    real_is_file = Path.is_file

    def is_file_then_removed(self: Path) -> bool:
        found = real_is_file(self)
        if found and self.parent.name == "a":
            self.unlink()  # the other prune, between this one's listing and its stat
        return found

    monkeypatch.setattr(Path, "is_file", is_file_then_removed)
    result = prune_runs(tmp_path, keep_runs=1, now=NOW)
    assert [p.name for p in result.removed] == ["a"] and left(tmp_path) == ["b"]


def test_an_interrupted_run_without_its_merged_log_is_pruned_once_a_day_idle(tmp_path):
    """A folder with worker logs and no run.jsonl, idle for more than a day, is an interrupted run: keep_runs removes it."""
    runs(tmp_path, {"this": 0})
    stale = tmp_path / "runs" / "stale"
    stale.mkdir()
    (stale / "log-gw0.jsonl").write_text("x")
    for p in (stale / "log-gw0.jsonl", stale):
        os.utime(p, (NOW - 2 * 86400, NOW - 2 * 86400))
    prune_runs(tmp_path, keep_runs=1, keep=["this"], now=NOW)
    assert left(tmp_path) == ["this"]
