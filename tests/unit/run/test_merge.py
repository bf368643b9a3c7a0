"""The run log merge, and the xdist controller's follower that reads the workers' logs as they grow."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_posbias import SCHEMA_VERSION
from pytest_posbias.engine import RunLogLines
from pytest_posbias.run.merge import merge_run_log_lines


def _records(worker: str, rng: random.Random) -> list[dict]:
    """Requests (some keys sent by both workers, some failed, some re-read), observations whose
    sort prefix ties, a model record and one line of another kind."""
    ok = {"finish_reason": "stop", "text": "a caption", "error": None}
    err = {"finish_reason": "error", "text": "", "error": "HTTP 503"}
    recs: list[dict] = [{"kind": "model", "spec": "sim:primacy", "identity": {"worker": worker}}]
    for i in range(300):
        key = f"k{rng.randrange(200):03d}"
        recs.append({"kind": "request", "key": key, "spec": f"s{i % 3}", "probe": rng.choice(["phase", "positional"]),
                     "cache_hit": rng.random() < 0.2, "generation": err if rng.random() < 0.1 else ok,
                     "request": {"prompt": "é " * rng.randrange(1, 400)}})
    for i in range(60):
        recs.append({"kind": "observation", "probe": "positional", "type": "instance", "i": i, "w": worker,
                     "text": ["x" * rng.randrange(5000)]})
    recs.append({"kind": "direction", "value": worker})
    return recs


def _lines(worker: str, rng: random.Random) -> bytes:
    head = {"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": "r", "worker": worker,
            "started": f"2026-12-01T00:00:0{worker[-1]}"}
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in [head, *_records(worker, rng)]).encode()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_workers_logs_merge_in_an_order_that_does_not_depend_on_the_worker_names(tmp_path, seed):
    """Two workers' logs merge into one: the header of the first to start, one model record, and
    the same records whichever worker wrote which log."""
    rng = random.Random(seed)
    data = {w: _lines(w, rng) for w in ("gw0", "gw1")}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for w in data:
        (run_dir / f"log-{w}.jsonl").write_bytes(data[w])
    header, pairs = merge_run_log_lines(run_dir)
    assert header["workers"] == ["gw0", "gw1"] and header["started"].endswith("00:00:00")
    kinds = [r["kind"] for r, _ in pairs]
    assert kinds[0] == "model" and "direction" in kinds and kinds.count("model") == 1
    swapped = tmp_path / "swapped"
    swapped.mkdir()
    (swapped / "log-gw0.jsonl").write_bytes(data["gw1"].replace(b'"gw1"', b'"gw0"'))
    (swapped / "log-gw1.jsonl").write_bytes(data["gw0"].replace(b'"gw0"', b'"gw1"'))
    _, swapped_pairs = merge_run_log_lines(swapped)
    assert sorted(json.dumps(r, sort_keys=True) for r, _ in swapped_pairs if r["kind"] == "request") == sorted(
        json.dumps(r, sort_keys=True) for r, _ in pairs if r["kind"] == "request")


def test_a_torn_last_line_is_skipped_and_a_log_without_a_header_is_an_error(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _lines("gw0", random.Random(1))
    (run_dir / "log-gw0.jsonl").write_bytes(good + b'{"kind": "request", "key": "torn')
    header, pairs = merge_run_log_lines(run_dir)
    assert header["workers"] == ["gw0"] and not any(r.get("key") == "torn" for r, _ in pairs)
    (run_dir / "log-gw1.jsonl").write_text('{"kind": "request", "key": "k"}\n')
    with pytest.raises(Exception, match="no header line"):
        merge_run_log_lines(run_dir)


@pytest.mark.parametrize("left", [b"", b'{"kind": "header", "schema_ver'])
def test_a_worker_log_holding_no_line_is_skipped_not_the_whole_merge(tmp_path, left):
    """A worker killed while opening its log (an empty file, or only a torn header) holds nothing to keep:
    the other workers' logs still merge into the run log and report, instead of a 'no header line' error."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "log-gw0.jsonl").write_bytes(_lines("gw0", random.Random(1)))
    (run_dir / "log-gw1.jsonl").write_bytes(left)
    header, pairs = merge_run_log_lines(run_dir)
    assert header["workers"] == ["gw0"] and pairs


def test_lines_that_are_json_but_not_records_are_skipped(tmp_path):
    p = Path(tmp_path / "log-main.jsonl")
    p.write_text(json.dumps({"kind": "header", "schema_version": SCHEMA_VERSION}) + "\n[1, 2]\n\"text\"\n{\"kind\": \"x\"}\n")
    lines = RunLogLines(p)
    lines.feed(p.read_text().split("\n"))
    header, records = lines.result()
    assert header["kind"] == "header" and [r for r, _ in records] == [{"kind": "x"}]


def test_a_line_that_is_not_utf8_is_skipped_by_the_merge(tmp_path):
    """A damaged line (bytes that are not UTF-8: a torn write, a bad block) is skipped as a line
    that is not JSON is; it used to raise UnicodeDecodeError out of the merge, and with it out of
    the plugin's sessionfinish (no run.jsonl, no report, no --posbias-json)."""
    rng = random.Random(7)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _lines("gw0", rng).split(b"\n")
    bad = b'{"kind": "request", "key": "bad\xff\xfe"}'
    damaged = b"\n".join([*good[:5], bad, *good[5:]]) + b'{"kind": "request", "key": "torn\xc3'
    (run_dir / "log-gw0.jsonl").write_bytes(damaged)
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    (clean_dir / "log-gw0.jsonl").write_bytes(b"\n".join(good))
    header, pairs = merge_run_log_lines(run_dir)
    assert len(pairs) > 200 and (header, pairs) == merge_run_log_lines(clean_dir)


def test_a_line_nested_too_deeply_is_skipped_by_the_merge(tmp_path):
    """A worker-log line nested too deeply for the JSON parser is skipped; the merge keeps every other record."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _lines("gw0", random.Random(3))
    (run_dir / "log-gw0.jsonl").write_bytes(good + b"[" * 200_000 + b"\n")
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "log-gw0.jsonl").write_bytes(good)
    assert merge_run_log_lines(run_dir)[1] == merge_run_log_lines(clean)[1]
