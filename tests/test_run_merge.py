"""The run log merge, and the xdist controller's follower that reads the workers' logs as they grow."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_posbias import SCHEMA_VERSION
from pytest_posbias.engine import RunLogLines
from pytest_posbias.run_merge import RunLogFollower, merge_run_log_lines


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
def test_following_growing_logs_merges_as_reading_the_finished_logs_does(tmp_path, seed):
    """Two workers append to their logs in chunks that cut lines anywhere; the follower polls
    between the chunks. Its merge equals the merge of the finished files, line for line."""
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    data = {w: _lines(w, rng) for w in ("gw0", "gw1")}
    follower = RunLogFollower(run_dir)
    written = dict.fromkeys(data, 0)
    while any(written[w] < len(data[w]) for w in data):
        for w in data:
            n = min(len(data[w]) - written[w], rng.randrange(1, 40_000))
            with (run_dir / f"log-{w}.jsonl").open("ab") as fh:
                fh.write(data[w][written[w]:written[w] + n])
            written[w] += n
        follower.poll()
    followed = follower.merge()
    whole = merge_run_log_lines(run_dir)
    assert followed == whole
    header, pairs = whole
    assert header["workers"] == ["gw0", "gw1"] and header["started"].endswith("00:00:00")
    kinds = [r["kind"] for r, _ in pairs]
    assert kinds[0] == "model" and "direction" in kinds and kinds.count("model") == 1
    follower.poll()  # after the merge: nothing more is read, and the records are the caller's
    with pytest.raises(RuntimeError, match="merged already"):
        follower.merge()


def test_a_poll_that_fails_leaves_the_merge_to_read_every_log_again(tmp_path, monkeypatch):
    rng = random.Random(5)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "log-gw0.jsonl").write_bytes(_lines("gw0", rng))
    follower = RunLogFollower(run_dir)
    calls = {"n": 0}
    real_feed = RunLogLines.feed

    def feed_failing_once(self, lines):
        calls["n"] += 1
        if calls["n"] == 1:
            real_feed(self, list(lines)[:10])  # part of the lines taken in, then a failure
            raise OSError("disk went away")
        real_feed(self, lines)

    monkeypatch.setattr(RunLogLines, "feed", feed_failing_once)
    follower.poll()
    follower.poll()  # stopped polling: nothing is read twice
    assert calls["n"] == 1
    assert follower.merge() == merge_run_log_lines(run_dir)


def test_a_torn_last_line_is_skipped_and_a_log_without_a_header_is_an_error(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _lines("gw0", random.Random(1))
    (run_dir / "log-gw0.jsonl").write_bytes(good + b'{"kind": "request", "key": "torn')
    follower = RunLogFollower(run_dir)
    follower.poll()
    header, pairs = follower.merge()
    assert header["workers"] == ["gw0"] and not any(r.get("key") == "torn" for r, _ in pairs)
    (run_dir / "log-gw1.jsonl").write_text('{"kind": "request", "key": "k"}\n')
    with pytest.raises(Exception, match="no header line"):
        merge_run_log_lines(run_dir)


def test_lines_that_are_json_but_not_records_are_skipped(tmp_path):
    p = Path(tmp_path / "log-main.jsonl")
    p.write_text(json.dumps({"kind": "header", "schema_version": SCHEMA_VERSION}) + "\n[1, 2]\n\"text\"\n{\"kind\": \"x\"}\n")
    lines = RunLogLines(p)
    lines.feed(p.read_text().split("\n"))
    header, records = lines.result()
    assert header["kind"] == "header" and [r for r, _ in records] == [{"kind": "x"}]


def test_a_line_that_is_not_utf8_is_skipped_by_the_merge_and_by_the_follower(tmp_path):
    """A damaged line (bytes that are not UTF-8: a torn write, a bad block) is skipped as a line
    that is not JSON is; it used to raise UnicodeDecodeError out of the merge, and with it out of
    the plugin's sessionfinish (no run.jsonl, no report, no --posbias-json)."""
    rng = random.Random(7)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good = _lines("gw0", rng).split(b"\n")
    bad = b'{"kind": "request", "key": "bad\xff\xfe"}'
    damaged = b"\n".join([*good[:5], bad, *good[5:]]) + b'{"kind": "request", "key": "torn\xc3'
    follower = RunLogFollower(run_dir)
    path = run_dir / "log-gw0.jsonl"
    for i in range(0, len(damaged), 9_000):  # written while the follower polls
        with path.open("ab") as fh:
            fh.write(damaged[i:i + 9_000])
        follower.poll()
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    (clean_dir / "log-gw0.jsonl").write_bytes(b"\n".join(good))
    header, pairs = merge_run_log_lines(run_dir)
    assert len(pairs) > 200 and (header, pairs) == merge_run_log_lines(clean_dir)
    assert follower.merge() == (header, pairs)
