"""The run log (engine.run_log): versioned, strict JSON, robust to a torn line and to numpy keys and
values, and a reference text written once per log and once in the merged log."""

from __future__ import annotations

import json

import pytest

from pytest_posbias.engine import Generation, RunLog, read_run_log


def test_run_log_is_versioned_and_survives_a_torn_line(tmp_path):
    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1", "seed": 0})
    log.write({"kind": "request", "key": "k1", "generation": Generation("hi").to_dict(), "cache_hit": False})
    log.write({"kind": "observation", "probe": "p", "value": float("nan")})
    log.close()
    with (tmp_path / "log.jsonl").open("a") as fh:
        fh.write('{"kind": "request", "key": "k2", "gen')  # a crash in the middle of a line
    header, records = read_run_log(tmp_path / "log.jsonl")
    first = json.loads((tmp_path / "log.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "header" and first["schema_version"] == 1
    assert header["run_id"] == "r1"
    assert [r["kind"] for r in records] == ["request", "observation"]
    assert records[1]["value"] is None  # strict JSON: NaN becomes null


def test_run_log_nan_inside_numpy_values_is_strict_json(tmp_path):
    """NaN held by a numpy float32 (not a float subclass), an array or a tuple is null too:
    the write must neither raise nor emit a bare NaN token."""
    import numpy as np

    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    values = [np.float32("nan"), np.array([np.nan, 0.5]), (float("inf"), np.float32(0.25)), np.float64("-inf")]
    for v in values:
        log.write({"kind": "observation", "probe": "p", "value": v})
    log.close()
    lines = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    parsed = [json.loads(line, parse_constant=lambda c: pytest.fail(f"non-strict JSON token {c}")) for line in lines]
    assert [r["value"] for r in parsed] == [None, [None, 0.5], [None, 0.25], None]


def test_run_log_writes_a_dict_mixing_int_and_str_keys(tmp_path):
    """A record whose dict mixes int and str keys (a per-slot table keyed 1..P beside a "total")
    is written with the keys JSON gives them, not a TypeError from ``sort_keys`` that ends the run;
    NaN inside it is still null."""
    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    log.write({"kind": "observation", "probe": "p", "by_slot": {1: 0.5, 2: float("nan"), "total": 3, None: "x"}})
    log.close()
    [line] = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    # json's own names for those keys, one type at a time: "1", "null"
    assert json.dumps({1: 0, None: 0}) == '{"1": 0, "null": 0}'
    assert json.loads(line)["by_slot"] == {"1": 0.5, "2": None, "total": 3, "null": "x"}


def test_run_log_writes_a_dict_keyed_by_numpy_scalars(tmp_path):
    """Counts keyed by numpy integers (``dict(zip(*np.unique(x, return_counts=True)))``), alone or
    beside string keys, are written with the keys JSON gives the equal Python numbers."""
    import numpy as np

    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    slots, counts = np.unique(np.array([2, 1, 2, 3]), return_counts=True)
    log.write({"kind": "observation", "by_slot": dict(zip(slots, counts, strict=True))})
    log.write({"kind": "observation", "by_slot": {np.int64(1): np.float32("nan"), "total": 3, np.float64(0.5): 1}})
    log.close()
    lines = (tmp_path / "log.jsonl").read_text().splitlines()[1:]
    expected = {json.dumps(int(k)): int(c) for k, c in zip(slots.tolist(), counts.tolist(), strict=True)}
    assert json.loads(lines[0])["by_slot"] == expected == {"1": 1, "2": 2, "3": 1}
    assert json.loads(lines[1])["by_slot"] == {"1": None, "total": 3, "0.5": 1}


def test_a_reference_text_is_written_once_per_log_and_once_in_the_merge(tmp_path):
    from pytest_posbias.engine import RunLog, read_run_log, reference_id, run_log_references
    from pytest_posbias.run.merge import merge_run_logs

    refs = ["A red circle moves. " * 500, "It stops."]
    run_dir = tmp_path / "runs" / "r"
    for w in ("gw0", "gw1"):
        log = RunLog(run_dir / f"log-{w}.jsonl", {"run_id": "r", "worker": w, "started": "2026-01-01T00:00:00"})
        for i in range(5):  # five observations of the same videos name the texts, they do not copy them
            rid = log.reference(refs)
            log.write({"kind": "observation", "probe": "positional", "type": "instance", "i": i, "w": w,
                       "slots": [{"references_id": rid}]})
        log.close()
        _h, recs = read_run_log(run_dir / f"log-{w}.jsonl")
        assert sum(r["kind"] == "reference" for r in recs) == 1
        assert (run_dir / f"log-{w}.jsonl").stat().st_size < len(json.dumps(refs)) + 2000
    _header, merged = merge_run_logs(run_dir)
    assert [r["id"] for r in merged if r["kind"] == "reference"] == [reference_id(refs)]
    assert run_log_references(merged) == {reference_id(refs): refs}
    assert sum(r["kind"] == "observation" for r in merged) == 10
    assert reference_id(refs) != reference_id([*refs, "x"]) and reference_id(["a\ud800"])  # any text has an id


def test_a_deeply_nested_damaged_line_is_skipped_like_a_torn_one(tmp_path):
    """A damaged line nested too deeply for the JSON parser is skipped; the records around it stay."""
    log = RunLog(tmp_path / "log.jsonl", {"run_id": "r1"})
    log.write({"kind": "verdict", "name": "g1"})
    log.close()
    with (tmp_path / "log.jsonl").open("a") as fh:
        fh.write("[" * 200_000 + "\n")
        fh.write(json.dumps({"kind": "verdict", "name": "g2"}) + "\n")
    header, records = read_run_log(tmp_path / "log.jsonl")
    assert header["run_id"] == "r1" and [r["name"] for r in records] == ["g1", "g2"]


def test_read_run_header_reads_a_log_whose_later_line_is_not_utf8(tmp_path):
    """read_run_header gives the header of a log that read_run_log reads, a damaged non-UTF-8 line after it included."""
    from pytest_posbias.engine import read_run_header

    path = tmp_path / "log.jsonl"
    RunLog(path, {"run_id": "r1"}).close()
    with path.open("ab") as fh:
        fh.write(b'{"kind": "verdict", "name": "\xff"}\n')
    assert read_run_log(path)[0]["run_id"] == "r1"
    assert read_run_header(path)["run_id"] == "r1"


def test_a_log_without_a_header_or_of_another_schema_is_a_config_error(tmp_path):
    """A log whose header line is missing (torn) or names another schema version is a ConfigError naming the file."""
    from pytest_posbias.errors import ConfigError

    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"kind": "head\n{"kind": "verdict"}\n')
    with pytest.raises(ConfigError, match="no header line"):
        read_run_log(torn)
    other = tmp_path / "other.jsonl"
    other.write_text('{"kind": "header", "schema_version": 999}\n')
    with pytest.raises(ConfigError, match="schema version 999"):
        read_run_log(other)
