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

from pytest_posbias.report.render import render
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
