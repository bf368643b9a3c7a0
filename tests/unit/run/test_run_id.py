"""The id of a run (run.run_id): a UTC timestamp and a random suffix, so ids sort by start time and
two runs started in the same second get different folders."""

from __future__ import annotations

import datetime as dt
import re

from pytest_posbias.run.run_id import new_run_id


def test_a_run_id_is_the_utc_second_it_was_made_and_a_hex_suffix():
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    rid = new_run_id()
    after = dt.datetime.now(dt.UTC)
    m = re.fullmatch(r"(\d{8}T\d{6}Z)-([0-9a-f]{12})", rid)
    assert m, rid
    made = dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    assert before <= made <= after


def test_ids_made_in_the_same_second_differ_and_sort_by_time():
    ids = [new_run_id() for _ in range(5000)]  # 48 random bits: a collision among 5,000 has p < 1e-7
    assert len(set(ids)) == len(ids)
    stamps = [i.split("-")[0] for i in ids]
    assert stamps == sorted(stamps)
