"""The HTML report: written after a run, rendered again from the run log alone, inert, viewable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.report.render import highlight_repeats, render
from pytest_posbias.run_options import RunOptions

pytestmark = pytest.mark.usefixtures("heavy_modules")
EVIL = '<script>alert("pwned")</script></textarea><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, small_set, heavy_modules) -> Path:
    """A real run: the three suites (small settings) against sim:middle-weak, in a project directory."""
    root = tmp_path_factory.mktemp("report-project")
    write_suite_project(root, small_set, ("test_positional.py", "test_phase_order.py", "test_stressors.py"), """
[tool.posbias.probes.positional]
groups = 5
[tool.posbias.probes.phase]
items = 24
orderings = 4
[tool.posbias.probes.stressor]
videos = 10
trials = 3
""", model=None)
    # each gate decided at its own level (--posbias-multiplicity=none): this report is about how failing
    # gates are shown, and at these sizes Holm over the run's gates may keep a looping model's few failures
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "--posbias-model", "sim:looping",
                           "--posbias-multiplicity=none", "-p", "no:randomly", "-q",
                           "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True, timeout=900)
    assert "[posbias] report:" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root


def _strip_stamp(html: str) -> str:
    return re.sub(r"Rendered \S+ by", "Rendered <time> by", html)


def test_report_written_and_rerendered_from_the_log_alone(run_dir):
    reports = sorted((run_dir / "reports").glob("*.html"))
    names = [p.name for p in reports]
    assert "latest.html" in names and any(re.match(r"sim-looping-\d{8}T\d{6}Z\.html", n) for n in names)
    latest = (run_dir / "reports" / "latest.html").read_text()
    [log] = list((run_dir / ".posbias" / "runs").glob("*/run.jsonl"))
    again = render([log])
    assert _strip_stamp(again) == _strip_stamp(latest)  # byte-identical apart from the render timestamp
    assert render([log], rendered_at="X") == render([log], rendered_at="X")
    # the CLI renders the same page without a model
    out = run_dir / "cli.html"
    subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "report", str(log), "-o", str(out)], check=True, capture_output=True)
    assert _strip_stamp(out.read_text()) == _strip_stamp(latest)


def test_report_is_self_contained_and_has_every_section(run_dir):
    html = (run_dir / "reports" / "latest.html").read_text()
    for section in ("1. Verdicts", "2. Positional bias", "3. Frame phase and option order", "4. Temporal stressors",
                    "5. Examples from failing gates", "6. Run details"):
        assert section in html
    assert html.count("<svg") >= 5  # coverage curves, flip rates, heat maps, distributions ...
    assert "data:image/jpeg;base64," in html  # frame thumbnails inline
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)  # nothing fetched from the network
    assert "<mark>" in html  # repeated n-grams of a looping output highlighted
    assert "Reproduce: <code>pytest -m &#39;not slow&#39; --posbias-model sim:looping" in html  # shell-quoted (shlex.join)
    # each verdict states its cost (model calls, cache hits, model time); a sequential gate says where it stopped
    costs = re.findall(r'<td class="num cost">(\d+) calls, (\d+) cached, (?:\d+ repeated, )?([0-9.e+-]+) s', html)
    assert len(costs) == html.count('<td class="num cost">') - html.count('<td class="num cost">–')
    assert costs and any(int(made) > 0 for made, _, _ in costs)
    # a gate deciding on a probe an earlier gate already ran says how many requests that saved
    assert re.search(r"reused probe results computed earlier in the run: saved [1-9]\d* requests", html)
    # one cache-hit count in the run details: the session totals, the same numbers as the terminal
    [log] = list((run_dir / ".posbias" / "runs").glob("*/run.jsonl"))
    calls = json.loads(log.read_text().splitlines()[0])["calls"]
    line = re.search(r'<td class="calls">([^<]+)<', html).group(1)
    assert line.startswith(f"model calls: {calls['made']} made, {calls['cache_hits']} served from the cache, "
                           f"{calls['failed']} failed")
    assert "wall time" in line and "request records (" not in html and html.count("served from the cache") == 1
    # the front page: a decision, one card per suite, failing configurations open and passing ones closed
    assert 'class="decision noship"' in html and html.count('<div class="card ') == 3
    opened = re.findall(r'<details class="config"( open)?><summary><span class="badge (fail|pass)">', html)
    assert opened and all((o == " open") == (b == "fail") for o, b in opened)
    assert re.search(r"stopped at \d+ of \d+ (groups|items|videos)", html)
    # a sequential gate runs its probe on growing prefixes: the positional table keeps one row per
    # configuration and model (the final look), not one per look
    table = html[html.index("<h3>DPB and MEG</h3>"):html.index("<h3>Output allocation per slot</h3>")]
    rows = re.findall(r"<tr><td>([A-Z][a-z]+-[24] (?:Short|Long))</td><td>sim:looping</td>", table)
    assert rows and len(rows) == len(set(rows))
    assert "frame 1 of" in html  # thumbnails of the frames behind a looping description


def test_untrusted_text_stays_inert(run_dir, tmp_path):
    [log] = list((run_dir / ".posbias" / "runs").glob("*/run.jsonl"))
    lines = log.read_text().splitlines()
    out = []
    for line in lines:
        rec = json.loads(line)
        if rec.get("kind") == "observation" and rec.get("type") == "instance" and rec.get("thumbnails"):
            rec["slots"][0]["summary"] = EVIL
            rec["text"] = [EVIL]
        if rec.get("kind") == "observation" and rec.get("type") == "example":
            rec["text"] = EVIL + " " + EVIL
        if rec.get("kind") == "verdict":
            rec["reason"] = EVIL
        if rec.get("kind") == "reference":  # the reference texts the slots name by id
            rec["texts"][0] = EVIL
        out.append(json.dumps(rec))
    bad = tmp_path / "evil.jsonl"
    bad.write_text("\n".join(out) + "\n")
    html = render([bad])
    assert "<script>alert" not in html and "<img src=x" not in html and "</textarea><img" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;&lt;/textarea&gt;" in html


def test_report_opens_in_headless_chromium_without_errors(run_dir, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    from e2e.test_report_front import dom_boxes, screenshot

    page = run_dir / "reports" / "latest.html"
    html = page.read_text()
    boxes = dom_boxes(html, tmp_path)
    height = min(int(boxes["height"]), 16000)
    shot = tmp_path / "report.png"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                           f"--window-size=1400,{height}", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line or "Refused to" in line]
    assert console == []
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, height)
    # the dark header band and the red FAIL badges are drawn: the page rendered, not a blank screen
    assert img.getpixel((700, 10)) == (18, 38, 58)
    import numpy as np

    arr = np.asarray(img).astype(int)
    fail_red = (np.abs(arr[..., 0] - 179) < 12) & (np.abs(arr[..., 1] - 38) < 12) & (np.abs(arr[..., 2] - 30) < 12)
    assert fail_red.sum() > 50  # the FAIL badges (sim:looping fails its repetition gates)
    plot_blue = (np.abs(arr[..., 0] - 0) < 20) & (np.abs(arr[..., 1] - 114) < 20) & (np.abs(arr[..., 2] - 178) < 20)
    assert plot_blue.sum() > 200  # the coverage curves (Okabe-Ito blue) are drawn
    # every figure is drawn (dark strokes inside its box) and no figure is wider than the page
    drawn = 0
    for s in boxes["svgs"]:
        if s["bottom"] > height or s["bottom"] - s["top"] < 20 or s["right"] - s["left"] < 20:
            continue  # closed <details> (zero size) or past the screenshot
        assert s["right"] <= 1400, s
        crop = arr[int(s["top"]):int(s["bottom"]), int(max(0, s["left"])):int(s["right"])]
        assert (crop.min(axis=2) < 128).mean() > 0.003, s
        drawn += 1
    assert drawn >= 8
    # the front screen at 1400x900: the decision and the suite cards are on it
    assert boxes["decision"]["text"].startswith("Do not ship") and boxes["decision"]["bottom"] <= 900
    assert len(boxes["cards"]) == 3 and all(c["bottom"] <= 900 for c in boxes["cards"])
    front = screenshot(page, tmp_path, size="1400,900", name="front.png")
    assert front.shape == (900, 1400, 3)
    shutil.copy(shot, run_dir / "reports" / "screenshot.png")
    shutil.copy(tmp_path / "front.png", run_dir / "reports" / "front.png")


def test_highlight_repeats_marks_only_repeated_5grams():
    marks = highlight_repeats("a b c d e x a b c d e y")
    assert [t for t, m in marks if m] == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]
    assert dict(marks)["x"] is False


# --------------------------------------------------------------------------- terminal summary


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


PROGRESS_TESTS = """
import time

from pytest_posbias.plugin import progress_writer


def test_one(request):
    w = progress_writer(request.config)
    w("model calls 3/6, ETA 1 s")
    w("model calls 6/6, ETA 0 s")


def test_two():
    pass


def test_three():
    pass
"""


def test_progress_lines_do_not_repeat_the_file_header(pytester):
    pytester.makepyfile(test_progress_probe=PROGRESS_TESTS)
    res = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    out = res.stdout.str()
    assert res.ret == 0, out
    assert "\n[posbias] model calls 3/6, ETA 1 s\n[posbias] model calls 6/6, ETA 0 s\n" in out  # own lines, none blank
    assert out.count("test_progress_probe.py") == 1, out  # the header once: results continue below the lines


XDIST_PROGRESS_TESTS = """
import time

import pytest

from pytest_posbias.plugin import progress_writer


@pytest.mark.parametrize("k", range(4))
def test_slow(request, k):
    w = progress_writer(request.config)
    w(f"model calls {k + 1}/4, ETA 1 s")
    time.sleep(3)
"""


@pytest.mark.slow
def test_xdist_controller_prints_the_workers_progress(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_xdist_probe=XDIST_PROGRESS_TESTS)
    res = pytester.runpytest_subprocess("-n", "2", "-p", "no:randomly", "-p", "no:cacheprovider", timeout=120)
    out = res.stdout.str()
    assert res.ret == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("[posbias] ")]
    assert lines, out
    assert any(re.search(r"\d/4 tests · gw[01]: model calls \d/4, ETA 1 s", ln) for ln in lines), lines


def test_severity_legend_does_not_cover_the_bars():
    from pytest_posbias.report.figures import stacked_figure

    fig = stacked_figure(["clean", "Delete", "Insert", "Replace", "Reverse", "Shuffle"],
                         {"benign": [0.5, 0.2, 0.1, 0.0, 0.3, 0.9], "ordinary": [0.3, 0.3, 0.1, 0.2, 0.3, 0.1],
                          "severe": [0.2, 0.5, 0.8, 0.8, 0.4, 0.0]}, title="severity shares")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert len(bars) == 18
    assert not any(legend.overlaps(b) for b in bars)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # right of the axes
    import matplotlib.pyplot as plt

    plt.close(fig)


def _tiny_run_log(path, run_id, started, verdicts):
    from pytest_posbias.engine import SCHEMA_VERSION

    lines = [{"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": run_id, "started": started,
              "models": ["sim:unbiased"]}]
    for name, est, passed in verdicts:
        lines.append({"kind": "verdict", "nodeid": f"suites/test_positional.py::test_meg[{name}]", "name": name,
                      "estimate": est, "ci_low": est - 0.01, "ci_high": est + 0.01, "lower": -0.02, "upper": 0.02,
                      "passed": passed})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_history_flags_undecided_runs_duplicate_run_ids_and_skipped_files(tmp_path):
    from pytest_posbias.report.history import find_run_logs, history
    from pytest_posbias.report.render import Run

    _tiny_run_log(tmp_path / "r1" / "run.jsonl", "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    _tiny_run_log(tmp_path / "r2" / "run.jsonl", "b", "2026-02-01T00:00:00", [])  # a crashed run: no verdict
    _tiny_run_log(tmp_path / "r3" / "copy.jsonl", "a", "2026-01-01T00:00:00", [("MEG cooking", 0.0, True)])
    (tmp_path / "junk.jsonl").write_text('{"not": "a run log"}\n')
    skipped: list[str] = []
    paths = find_run_logs(tmp_path, skipped)
    assert len(paths) == 3 and skipped == [f"{tmp_path / 'junk.jsonl'}: not a posbias run log (no run-log header on its first line)"]
    data = history([Run(p) for p in paths])
    assert [r["run_id"] for r in data["releases"]] == ["a", "b"]  # the copy of run a is not a release
    assert data["duplicates"] == [{"path": str(tmp_path / "r3" / "copy.jsonl"), "run_id": "a",
                                   "same_as": str(tmp_path / "r1" / "run.jsonl")}]
    assert [r["undecided"] for r in data["releases"]] == [False, True]


def test_the_end_of_the_run_renders_with_the_cyclic_collector_off_and_turns_it_back_on(tmp_path, monkeypatch):
    """``finish_run`` merges the log and renders the report with gc off (collections walking the
    merged records took a third of the render), and leaves gc as it found it."""
    import gc

    from pytest_posbias.engine import RunLog
    from pytest_posbias.report import render as render_module
    from pytest_posbias.run.finish import finish_run

    run_dir = tmp_path / ".posbias" / "runs" / "r1"
    log = RunLog(run_dir / "log-main.jsonl", {"run_id": "r1", "started": "2026-12-01T00:00:00+00:00", "models": ["sim:unbiased"]})
    log.write({"kind": "request", "key": "k1", "spec": "s", "probe": "p", "cache_hit": False, "generation": {"text": "a"}})
    log.close()
    seen: list[bool] = []

    def fake_write_reports(paths, **_kw):
        seen.append(gc.isenabled())
        return []

    monkeypatch.setattr(render_module, "write_reports", fake_write_reports)
    assert gc.isenabled()
    path = finish_run(config_rootdir=tmp_path, options=RunOptions(cache=".posbias"), verdict_rows=[], calls={}, run_id="r1")
    assert path == run_dir / "run.jsonl" and path.is_file()
    assert seen == [False]
    assert gc.isenabled()


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


def test_a_gate_failing_alone_but_passing_the_run_decision_is_counted_apart(tmp_path):
    """A gate whose own verdict fails but whose run-level (Holm) decision passes: the history counts
    a release's failures and "fails in the latest release" by the run-level decision; the suite card
    gives both counts."""
    from pytest_posbias.report.front import suite_cards
    from pytest_posbias.report.history import history
    from pytest_posbias.report.render import Run

    log = tmp_path / "r1" / "run.jsonl"
    _tiny_run_log(log, "a", "2026-01-01T00:00:00", [("MEG cooking", -0.05, False), ("MEG leisure", -0.06, False)])
    records = [json.loads(x) for x in log.read_text().splitlines()]
    for r, adjusted in zip([r for r in records if r["kind"] == "verdict"], (True, False), strict=True):
        r["adjusted_passed"] = adjusted  # cooking fails alone, passes after Holm; leisure fails both
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = Run(log)
    data = history([run])
    assert data["releases"][0]["n_fail"] == 1
    assert {g["gate"]: g["failing_last"] for g in data["gates"]} == {"MEG cooking": False, "MEG leisure": True}
    (card,) = suite_cards(run.verdicts)
    assert card["n_fail"] == 2 and card["n_fail_run"] == 1
    records = [{k: v for k, v in r.items() if k != "adjusted_passed"} for r in records]  # a log without the field
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert history([Run(log)])["releases"][0]["n_fail"] == 2 and suite_cards(Run(log).verdicts)[0]["n_fail_run"] is None
