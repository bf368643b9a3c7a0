"""The terminal summary (report.summary): full gate ids grouped by suite, the calls line (one cache
count, wall time, tokens, reuse in words), the progress text and each gate's cost line in words."""

from __future__ import annotations


def _verdict(name: str, *, passed: bool, est: float = 0.1, calls: dict | None = None):
    from pytest_posbias.stats import Verdict

    return Verdict(name=name, estimate=est, ci_low=est - 0.05, ci_high=est + 0.05, threshold=0.1, n=12, p_value=0.01,
                   passed=passed, mode="detect", reason="r", lower=-0.1, upper=0.1, unit="groups",
                   extra={"calls": calls or {}})


def test_terminal_summary_keeps_full_gate_ids_grouped_by_suite():
    from pytest_posbias.report.summary import verdict_lines

    long = "test_meg[sim:middle-weak-cooking-short-P4-with-a-very-long-configuration-name-that-goes-on-and-on-"
    ids = [f"suites/test_positional.py::{long}{k}]" for k in range(3)] + ["suites/test_stressors.py::test_rr[8]"]
    rows = [{"nodeid": n, "verdict": _verdict(n, passed=k != 1), "p_bh": 0.02} for k, n in enumerate(ids)]
    lines = verdict_lines(rows, width=60)
    assert all(len(t) <= 60 for t, p in lines if p is not None and not t.lstrip().startswith("estimate"))
    heads = [t for t, p in lines if p is None]
    assert heads == ["suites/test_positional.py — positional bias (DPB, MEG, coverage): 3 gates, 1 failed",
                     "suites/test_stressors.py — temporal stressors and repetition: 1 gate, 0 failed"]
    # every gate's full id can be read back from its wrapped lines (never cut), the failure first
    names, cur = [], None
    for t, p in lines:
        if p is None:
            continue
        if t.startswith(("  PASS ", "  FAIL ")):
            cur = [t[7:]]
            names.append(cur)
        elif not t.lstrip().startswith("estimate"):
            cur.append(t.strip())
    got = ["".join(parts) for parts in names]
    assert got == [ids[1].split("::")[1], ids[0].split("::")[1], ids[2].split("::")[1], "test_rr[8]"]
    assert len(set(got)) == 4


def test_calls_line_one_cache_count_wall_time_tokens_and_reuse_wording():
    from pytest_posbias.report.summary import calls_line

    calls = {"made": 120, "cache_hits": 30, "failed": 2, "retries": 1, "model_seconds": 99.0, "wall_seconds": 12.34,
             "prompt_tokens": 50_000, "visual_tokens": 40_000, "output_tokens": 7_000, "shared": 40}
    one = calls_line(calls, verdict_calls=[{"shared": 40}])
    assert one.startswith("model calls: 120 made, 30 served from the cache, 2 failed (1 retries of transient errors)")
    assert "wall time 12.3 s" in one and "99" not in one  # wall time, not the summed client time
    assert "tokens 50k in (40k visual), 7000 out" in one
    assert "tokens 900 out" in calls_line({"made": 3, "output_tokens": 900})  # an unreported count is left out
    assert "reused" not in one and "shared" not in one  # a single gate cannot share between gates
    two = calls_line(calls, verdict_calls=[{"shared": 0}, {"shared": 25}, {"shared": 15}], workers=2)
    assert "2 gates reused probe results already computed in this run, saving 40 requests" in two
    assert "summed over 2 workers" in two
    assert two.count("cache") == 1
    three = calls_line({"made": 216, "cache_hits": 0, "rereads": 216, "failed": 0})
    assert three.startswith("model calls: 216 made, 0 served from the cache, 0 failed")  # a cold cache reads as cold
    assert "216 repeated requests answered from this run's own calls" in three


def test_progress_text_rate_eta_and_cache_in_words():
    from pytest_posbias.report.summary import plural, progress_text

    assert progress_text(120, 216, 30, 30.0) == "model calls 120/216 (55%), 4/s, ETA 24 s; 30 more answered from the cache"
    assert progress_text(216, 216, 0, 54.0) == "model calls 216/216 (100%), 4/s, ETA 0 s"
    assert progress_text(0, 10, 0, 0.0) == "model calls 0/10 (0%), 0/s, ETA –"  # no rate yet: no made-up ETA
    assert progress_text(10, 1000, 0, 10.0).endswith("ETA 16 min")
    assert (plural(1, "gate"), plural(0, "gate"), plural(2, "gate")) == ("1 gate", "0 gates", "2 gates")


def test_each_gate_has_a_cost_line_in_words():
    import dataclasses

    from pytest_posbias.report.summary import cost_text, verdict_lines
    from pytest_posbias.stats import rate_verdict

    assert cost_text({"made": 1}) == "1 model call made"
    assert cost_text({"made": 12, "failed": 1, "cache_hits": 30, "shared": 40, "wall_seconds": 8.24}) == (
        "12 model calls made (1 failed), 30 answered from the cache of earlier runs, "
        "40 reused from a probe another gate ran; 8.2 s waiting on the model")
    v = rate_verdict(5, 100, name="order flip rate", threshold=0.15)
    v = dataclasses.replace(v, extra={**v.extra, "calls": {"made": 0, "cache_hits": 216}})
    lines = [t for t, _ in verdict_lines([{"nodeid": "suites/test_phase_order.py::test_order_flip[m]", "verdict": v,
                                           "p_bh": 0.5}])]
    assert "       cost: 0 model calls made, 216 answered from the cache of earlier runs" in lines


def test_a_progress_file_that_is_not_utf8_is_left_out(tmp_path):
    """A worker's progress file with bytes that are not UTF-8 is left out of the controller's line."""
    from pytest_posbias.report.summary import worker_progress_line, write_progress

    write_progress(tmp_path / "progress-gw0.txt", "model calls 3/4 (75%)")
    (tmp_path / "progress-gw1.txt").write_bytes(b"model calls \xff\xfe 1/4")
    line = worker_progress_line(tmp_path, tests_done=1, tests_planned=4)
    assert line == "1/4 tests · gw0: model calls 3/4 (75%)"


def test_writing_progress_never_fails_the_run(tmp_path):
    """A progress message that cannot be encoded as UTF-8 is written replaced, or not at all, without raising."""
    from pytest_posbias.report.summary import write_progress

    write_progress(tmp_path / "progress-gw0.txt", "decoding clip-\udcff.mp4")
    assert [p.name for p in tmp_path.iterdir()] in ([], ["progress-gw0.txt"])
