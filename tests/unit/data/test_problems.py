"""Data problems (``data.problems``): a record round-trips through the run log's JSON, older plain
messages are read as problems, one problem logged by several workers counts once, and the summary
lists the kinds in their documented order with the first example of each."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_posbias.data.problems import (
    PROBLEM_KINDS,
    DataProblem,
    problems_in_records,
    summarize_problems,
    unique_problems,
)

kinds = st.sampled_from([*PROBLEM_KINDS, "a-kind-from-a-newer-version"])
problems = st.builds(DataProblem, kinds, st.text(max_size=20), st.text(max_size=40), st.text(max_size=20),
                     st.none() | st.integers(min_value=1, max_value=10**6))


@given(problems)
def test_a_problem_round_trips_through_the_run_logs_json(p):
    assert DataProblem.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert DataProblem.coerce(p.to_dict()) == p and DataProblem.coerce(p) is p


def test_a_plain_message_is_read_as_an_other_problem_about_its_item():
    p = DataProblem.coerce("video 'v3': not a readable video")
    assert (p.kind, p.item, p.message) == ("other", "video 'v3'", "not a readable video")


def test_a_line_that_is_not_an_integer_is_dropped_not_trusted():
    assert DataProblem.from_dict({"kind": "bad-line", "item": "x", "line": True}).line is None
    assert DataProblem.from_dict({"kind": "bad-line", "item": "x", "line": "7"}).line is None
    assert DataProblem.from_dict({"kind": "bad-line", "item": "x", "line": 7}).line == 7


def test_the_text_names_the_file_and_line_or_the_item_and_its_file():
    assert str(DataProblem("bad-line", "m.jsonl", "not JSON", "m.jsonl", 4)) == "m.jsonl:4: not JSON"
    assert str(DataProblem("missing-video", "video 'v1'", "not found", "clips/v1.mp4")) == \
        "video 'v1' (clips/v1.mp4): not found"
    assert str(DataProblem("duplicate-id", "video 'v1'", "seen twice")) == "video 'v1': seen twice"


@given(st.lists(problems, max_size=12), st.randoms(use_true_random=False))
def test_repeats_count_once_in_first_seen_order(ps, rnd):
    logged = [p for p in ps for _ in range(rnd.randint(1, 3))]  # each worker or look logs it again
    got = unique_problems(logged)
    assert len({p.key() for p in got}) == len(got)
    assert [p.key() for p in got] == list(dict.fromkeys(p.key() for p in ps))


def test_the_summary_orders_kinds_as_documented_unknown_kinds_last():
    ps = [DataProblem("zz-new", "a", "x"), DataProblem("too-short", "b", "short"),
          DataProblem("missing-video", "c", "gone"), DataProblem("missing-video", "d", "gone too"),
          DataProblem("missing-video", "c", "gone")]
    rows = summarize_problems(ps)
    assert [r["kind"] for r in rows] == ["missing-video", "too-short", "zz-new"]
    assert rows[0] == {"kind": "missing-video", "label": PROBLEM_KINDS["missing-video"], "count": 2,
                       "example": "c: gone"}
    assert rows[2]["label"] == "zz-new"


def test_the_problems_of_a_run_log_are_the_manifests_and_those_found_later_once_each():
    records = [
        {"kind": "observation", "probe": "data", "problems": [DataProblem("missing-video", "v1", "gone").to_dict()]},
        {"kind": "observation", "probe": "data", "type": "problem",
         "problem": DataProblem("truncated-video", "v2", "cut").to_dict()},
        {"kind": "observation", "probe": "data", "problems": [DataProblem("missing-video", "v1", "gone").to_dict()]},
        {"kind": "observation", "probe": "phase", "problems": [DataProblem("other", "v9", "not data").to_dict()]},
        {"kind": "verdict", "probe": "data", "problems": [DataProblem("other", "v8", "not an observation").to_dict()]},
    ]
    assert [(p.kind, p.item) for p in problems_in_records(records)] == [("missing-video", "v1"),
                                                                         ("truncated-video", "v2")]
