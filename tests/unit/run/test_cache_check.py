"""A damaged, truncated, garbage or read-only generation cache is a named problem at the start of a
run, before any model call: one line naming the file and the choices (move it aside, run
read-only, another folder); an answer the cache cannot store is counted.

Placed with ``run/cache_check.py``, its subject; the tests of a run on a damaged cache run the order
suite through pytester."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.engine import Engine, Generation, GenerationCache, Request
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.run.cache_check import CacheError, check_cache
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore


def filled_cache(folder: Path, n: int = 40) -> Path:
    """A cache folder whose database holds ``n`` answers; its path."""
    cache = GenerationCache(folder / "generations.sqlite")
    cache.put_many([(f"k{i:04d}", "sim:x", Generation("an answer " * 40, 80, "stop")) for i in range(n)])
    cache.close()
    return folder / "generations.sqlite"


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        raise ValueError(how)


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a folder) made read-only for this process: permissions for a normal user,
    the immutable attribute for root (who ignores permissions); skips where neither works."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("cannot make a path read-only for root here (chattr +i)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def checkpointed(path: Path) -> None:
    """Fold the write-ahead log into the database file (so a damaged file is all there is)."""
    conn = sqlite3.connect(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()


# --------------------------------------------------------------------------- check_cache


@pytest.mark.parametrize("how, said", [
    ("half", "malformed"),
    ("garbage", "not an SQLite database"),
    ("empty", "the file is empty (0 bytes)"),
])
def test_a_damaged_cache_is_one_line_naming_the_file_and_the_choices(tmp_path, how, said):
    path = filled_cache(tmp_path / "c", n=400)
    checkpointed(path)
    damage(path, how)
    t0 = time.monotonic()
    with pytest.raises(CacheError) as err:
        check_cache(tmp_path / "c")
    assert time.monotonic() - t0 < 10
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and said in msg, msg
    assert "--posbias-cache-repair=move-aside" in msg and "--posbias-cache=DIR" in msg
    assert path.exists()  # never moved without being asked


def test_move_aside_renames_the_damaged_cache_and_a_new_one_starts(tmp_path):
    path = filled_cache(tmp_path / "c")
    checkpointed(path)
    damage(path, "half")
    now = _dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=_dt.UTC)
    found = check_cache(tmp_path / "c", repair="move-aside", now=now)
    moved = tmp_path / "c" / "generations.sqlite.damaged-20260102T030405Z"
    assert found.moved_to == moved and moved.exists() and not path.exists()
    assert "malformed" in found.damage and any(str(moved) in line for line in found.lines())
    cache = GenerationCache(path)  # the run's new cache
    assert len(cache) == 0
    cache.close()
    assert check_cache(tmp_path / "c").lines() == []


def test_a_row_with_broken_json_is_counted_at_start_and_made_again_as_a_miss(tmp_path, synthetic_clips):
    store = FrameStore()
    backend = SimBackend("unbiased", store)
    reqs = [Request("sim:unbiased", (TextPart("Describe the video."), VideoPart(FrameSpec.from_video(p, [0, 20, 40]))))
            for p in synthetic_clips[:3]]
    Engine(GenerationCache(tmp_path / "c" / "generations.sqlite"), backend_for=lambda m: backend).run(reqs)
    conn = sqlite3.connect(str(tmp_path / "c" / "generations.sqlite"))
    conn.execute("UPDATE generations SET payload = '{\"text\": \"cut' WHERE rowid = 1")
    conn.commit()
    conn.close()
    found = check_cache(tmp_path / "c")
    assert (found.rows, found.unreadable) == (3, 1)
    assert any("1 cached answers" in line and "unreadable" in line for line in found.lines())
    cache = GenerationCache(tmp_path / "c" / "generations.sqlite")
    eng = Engine(cache, backend_for=lambda m: backend)
    gens = eng.run(reqs)  # no JSONDecodeError: the bad row is a miss
    assert all(g.ok for g in gens)
    assert (eng.stats.made, eng.stats.cache_hits, cache.unreadable) == (1, 2, 1)
    assert check_cache(tmp_path / "c").unreadable == 0  # its row was replaced


def test_rows_of_valid_json_but_the_wrong_shape_are_unreadable_made_again_and_never_scored(tmp_path, synthetic_clips):
    from pytest_posbias.probes.stressor import accept_description

    store = FrameStore()
    backend = SimBackend("unbiased", store)
    reqs = [Request("sim:unbiased", (TextPart("Describe the video."), VideoPart(FrameSpec.from_video(p, [0, 20, i]))))
            for p in synthetic_clips[:2] for i in (30, 40, 50)]
    first = Engine(GenerationCache(tmp_path / "c" / "generations.sqlite"), backend_for=lambda m: backend).run(reqs)
    good = first[0].to_dict()
    bad = [{"text": 5}, {**good, "letter_logprobs": {"A": float("nan")}}, {**good, "finish_reason": "done"},
           {**good, "n_tokens": -3}, ["a list"], {**good, "text": None}]
    conn = sqlite3.connect(str(tmp_path / "c" / "generations.sqlite"))
    for rowid, payload in enumerate(bad, start=1):
        conn.execute("UPDATE generations SET payload = ? WHERE rowid = ?", (json.dumps(payload), rowid))
    conn.commit()
    conn.close()
    found = check_cache(tmp_path / "c")
    assert (found.rows, found.unreadable) == (6, 6)
    assert any("6 cached answers" in line and "unreadable" in line for line in found.lines())
    cache = GenerationCache(tmp_path / "c" / "generations.sqlite")
    eng = Engine(cache, backend_for=lambda m: backend)
    gens = eng.run(reqs, accept=accept_description)  # no TypeError in the rule: a damaged row never reaches it
    assert [g.text for g in gens] == [g.text for g in first]  # made again: none read from a damaged row
    assert (eng.stats.made, eng.stats.cache_hits, eng.stats.unusable, cache.unreadable) == (6, 0, 0, 6)
    assert check_cache(tmp_path / "c").unreadable == 0  # every row was replaced
    cache.close()


def test_a_damaged_row_of_unusable_answers_is_as_if_no_run_had_got_one(tmp_path):
    cache = GenerationCache(tmp_path / "c" / "generations.sqlite", run_id="r1")
    cache.record_unusable([("k1", "sim:x", Generation("", 0, "stop"), "empty"),
                           ("k2", "sim:x", Generation("", 0, "stop"), "empty")])
    cache._conn.execute("UPDATE unusable SET payload = '{\"text\": []}' WHERE key = 'k1'")
    cache._conn.execute("UPDATE unusable SET runs = 'many' WHERE key = 'k2'")
    assert cache.unusable(["k1", "k2"]) == {} and cache.unreadable == 2
    cache.close()


def test_a_read_only_cache_folder_stops_the_run_naming_it(tmp_path):
    filled_cache(tmp_path / "c")
    with read_only(tmp_path / "c"):
        with pytest.raises(CacheError, match=r"the cache folder .*/c cannot be written .*--posbias-cache=DIR"):
            check_cache(tmp_path / "c")
        with pytest.raises(CacheError, match="read-only needs a writable folder too"):
            check_cache(tmp_path / "c", mode="read-only")


def test_an_unwritable_cache_folder_path_is_named():
    with pytest.raises(CacheError, match=r"/proc/posbias-x/cache cannot be written"):
        check_cache(Path("/proc/posbias-x/cache"))


def test_a_read_only_database_file_stops_the_run_or_is_used_read_only_when_asked(tmp_path):
    path = filled_cache(tmp_path / "c", n=5)
    checkpointed(path)
    with read_only(path):
        with pytest.raises(CacheError) as err:
            check_cache(tmp_path / "c")
        msg = str(err.value)
        assert str(path) in msg and "cannot be written" in msg and "--posbias-cache-mode=read-only" in msg, msg
        found = check_cache(tmp_path / "c", mode="read-only")
        assert found.read_only and found.rows == 5
        cache = GenerationCache(path, read_only=True)
        seen = []
        cache.on_unstored = lambda n, why: seen.append((n, why))
        assert len(cache.get_many(["k0000", "k0001", "nope"])) == 2
        cache.put_many([("new", "sim:x", Generation("x", 1, "stop"))])
        assert cache.unstored == 1 and seen and "read-only" in seen[0][1]
        cache.close()


def test_an_answer_the_database_refuses_to_store_is_counted_not_lost_silently(tmp_path):
    cache = GenerationCache(filled_cache(tmp_path / "c", n=2))
    cache._conn.execute("PRAGMA query_only=1")  # the database refuses every write from now on (as a full disk would)
    cache.put_many([("a", "sim:x", Generation("x", 1, "stop")), ("b", "sim:x", Generation("y", 1, "stop"))])
    assert cache.unstored == 2 and "attempt to write a readonly database" in cache.unstored_reason
    assert len(cache) == 2  # nothing half-written
    cache.close()


def test_bad_mode_and_repair_values_are_named(tmp_path):
    with pytest.raises(CacheError, match="--posbias-cache-mode must be one of read-write, read-only"):
        check_cache(tmp_path, mode="ro")
    with pytest.raises(CacheError, match="--posbias-cache-repair must be one of stop, move-aside"):
        check_cache(tmp_path, repair="fix")


# --------------------------------------------------------------------------- a run


def project(pytester: pytest.Pytester) -> None:
    """The order suite on the synthetic set; the model is given on the command line."""
    write_suite_project(pytester.path, None, ("test_phase_order.py",), model=None)


def test_a_run_on_a_damaged_cache_stops_at_start_with_exit_4_and_no_model_call(pytester):
    project(pytester)
    path = filled_cache(pytester.path / ".posbias", n=200)
    checkpointed(path)
    damage(path, "half")
    t0 = time.monotonic()
    res = pytester.runpytest("suites", "-m", "option_order", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    elapsed = time.monotonic() - t0
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert elapsed < 10
    [line] = [ln for ln in out.splitlines() if "is damaged" in ln]
    assert str(path) in line and "--posbias-cache-repair=move-aside" in line
    assert "Traceback" not in out and "DatabaseError" not in out.replace("(DatabaseError", "")
    assert "model calls" not in out and not (pytester.path / ".posbias" / "runs").exists()


def test_a_run_on_a_read_only_cache_folder_stops_at_start(pytester):
    project(pytester)
    filled_cache(pytester.path / ".posbias")
    with read_only(pytester.path / ".posbias"):
        res = pytester.runpytest("suites", "-m", "option_order", "--posbias-model", "sim:unbiased", "-p", "no:randomly")
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    # the start-up check of writable paths (config) or the cache check names the folder, whichever runs first
    assert ("cannot be written" in out or "is not writable" in out) and ".posbias" in out
    assert ".open-lock" not in out and "model calls" not in out


@pytest.mark.usefixtures("heavy_modules")
def test_move_aside_and_read_only_runs_go_on_and_say_what_they_did(pytester, small_set):
    project(pytester)
    path = filled_cache(pytester.path / ".posbias", n=50)
    checkpointed(path)
    damage(path, "garbage")
    args = ("suites", "-m", "option_order", "--posbias-model", "sim:unbiased", "-p", "no:randomly", f"--posbias-data={small_set}",
            "--posbias-fixed")
    res = pytester.runpytest(*args, "--posbias-cache-repair=move-aside", "--posbias-json=first.json")
    out = res.stdout.str()
    assert res.ret == 0, out[-3000:]
    assert "was moved aside to" in out and list((pytester.path / ".posbias").glob("generations.sqlite.damaged-*"))
    made = json.loads((pytester.path / "first.json").read_text())["calls"]["made"]
    assert made > 0
    checkpointed(path)
    with read_only(path):
        res2 = pytester.runpytest(*args, "--posbias-json=second.json")  # read-write: stops
        assert res2.ret == pytest.ExitCode.USAGE_ERROR
        assert "--posbias-cache-mode=read-only" in res2.stdout.str() + res2.stderr.str()
        res3 = pytester.runpytest(*args, "--posbias-cache-mode=read-only", "--posbias-seed=1",
                                  "--posbias-json=third.json")
    out3 = res3.stdout.str()
    calls = json.loads((pytester.path / "third.json").read_text())["calls"]
    assert res3.ret == 0, out3[-3000:]
    assert "is used read-only" in out3
    assert calls["unstored"] == calls["made"] - calls["failed"] > 0  # a new seed: new requests, none stored
    assert f"{calls['unstored']} answers not stored in the cache" in out3


def test_under_xdist_the_controller_checks_once_before_any_worker_starts(pytester):
    pytest.importorskip("xdist")
    project(pytester)
    path = filled_cache(pytester.path / ".posbias", n=50)
    checkpointed(path)
    damage(path, "empty")
    res = pytester.runpytest_subprocess("suites", "-m", "option_order", "--posbias-model", "sim:unbiased", "-p", "no:randomly",
                                        "-n", "2", timeout=120)
    out = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert len([ln for ln in out.splitlines() if "is damaged" in ln]) == 1, out[-3000:]
    # no worker started: none of xdist's worker lines ("[gw0] ...", "created: 2/2 workers"); the project's own
    # path may hold "gw0" when this test itself runs under xdist
    worker_lines = [ln for ln in out.replace(str(pytester.path), "<project>").splitlines() if "gw0" in ln or "workers" in ln]
    assert "0 bytes" in out and "INTERNALERROR" not in out and not worker_lines, out[-3000:]


@pytest.mark.usefixtures("heavy_modules")
def test_a_read_only_run_makes_the_calls_a_read_write_run_makes_and_leaves_the_file_unchanged(pytester, small_set):
    write_suite_project(pytester.path, small_set, ("test_stressors.py",),
                        "[tool.posbias.probes.stressor]\nvideos = 8\ntrials = 4", model=None)
    args = ("suites", "-m", "attack and not slow", "-k", "add1", "--posbias-model", "sim:looping", "-p", "no:randomly")
    res = pytester.runpytest(*args, "--posbias-cache=.rw", "--posbias-json=rw.json")
    path = pytester.path / ".ro" / "generations.sqlite"
    GenerationCache(path).close()  # a fresh cache, as the read-write run had
    checkpointed(path)
    before = path.read_bytes()
    res2 = pytester.runpytest(*args, "--posbias-cache=.ro", "--posbias-cache-mode=read-only", "--posbias-json=ro.json")
    rw, ro = (json.loads((pytester.path / f).read_text())["calls"] for f in ("rw.json", "ro.json"))
    assert rw["rereads"] > 0 and rw["made"] > 0, res.stdout.str()[-3000:]  # the selection repeats requests
    assert (ro["made"], ro["rereads"], ro["cache_hits"]) == (rw["made"], rw["rereads"], 0), res2.stdout.str()[-3000:]
    assert ro["unstored"] == ro["made"] - ro["failed"]
    assert f"{ro['rereads']} repeated requests answered from this run's own calls" in res2.stdout.str()
    assert path.read_bytes() == before
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_row_with_an_integer_too_large_for_a_float_is_counted_unreadable_at_start(tmp_path):
    """check_cache counts a row whose seconds is a 400-digit integer as unreadable."""
    path = filled_cache(tmp_path, n=3)
    conn = sqlite3.connect(str(path))
    conn.execute("UPDATE generations SET payload = ? WHERE key = 'k0000'",
                 ('{"text": "a", "n_tokens": 1, "finish_reason": "stop", "seconds": 1' + "0" * 400 + "}",))
    conn.commit()
    conn.close()
    got = check_cache(tmp_path)
    assert (got.rows, got.unreadable) == (3, 1)


def test_an_unusable_table_of_another_shape_is_named_before_any_model_call(tmp_path):
    """A cache whose ``unusable`` table lacks its columns is a CacheError at start naming the file and the table."""
    path = filled_cache(tmp_path, n=2)
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE unusable (key TEXT PRIMARY KEY, note TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="unusable"):
        check_cache(tmp_path)


def test_a_generations_table_without_a_payload_column_is_named_at_start(tmp_path):
    """A database whose generations table lacks the payload column is a CacheError naming the file."""
    path = tmp_path / "generations.sqlite"
    conn = sqlite3.connect(str(path))
    conn.execute("CREATE TABLE generations (key TEXT PRIMARY KEY, answer TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="generations.sqlite cannot be read"):
        check_cache(tmp_path)


@pytest.mark.parametrize("columns", ["key TEXT PRIMARY KEY, answer TEXT", "key TEXT PRIMARY KEY, payload TEXT"])
def test_a_generations_table_of_another_shape_is_damage_that_move_aside_repairs(tmp_path, columns):
    """A generations table lacking the columns a run reads or writes (payload; model and created, which every
    stored answer needs) is damage: named at start, and moved aside when asked (it was refused, or passed)."""
    path = tmp_path / "generations.sqlite"
    conn = sqlite3.connect(str(path))
    conn.execute(f"CREATE TABLE generations ({columns})")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="generations.sqlite"):
        check_cache(tmp_path)
    found = check_cache(tmp_path, repair="move-aside", now=_dt.datetime(2026, 1, 2, tzinfo=_dt.UTC))
    assert found.moved_to is not None and found.moved_to.exists() and not path.exists()


def test_a_failed_call_stored_in_the_cache_is_counted_unreadable_at_start(tmp_path):
    """check_cache counts a stored failed call as unreadable, as the run's lookup does (it asks it again)."""
    path = filled_cache(tmp_path, n=3)
    conn = sqlite3.connect(str(path))
    conn.execute("UPDATE generations SET payload = ? WHERE key = 'k0001'",
                 (json.dumps(Generation("", 0, "error", error="timeout").to_dict()),))
    conn.commit()
    conn.close()
    got = check_cache(tmp_path)
    assert (got.rows, got.unreadable) == (3, 1)
