"""The HTML report: written after a run, rendered again from the run log alone, inert, viewable."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_posbias.report.render import highlight_repeats, render

SUITES = Path(__file__).resolve().parent.parent / "suites"
pytestmark = pytest.mark.usefixtures("heavy_modules")
EVIL = '<script>alert("pwned")</script></textarea><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, small_set, heavy_modules) -> Path:
    """A real run: the three suites (small settings) against sim:middle-weak, in a project directory."""
    root = tmp_path_factory.mktemp("report-project")
    (root / "suites").mkdir()
    for f in ("conftest.py", "test_positional.py", "test_phase_order.py", "test_stressors.py"):
        shutil.copy(SUITES / f, root / "suites" / f)
    (root / "pyproject.toml").write_text(f"""
[tool.pytest.ini_options]
testpaths = ["suites"]
[tool.posbias]
data = "{small_set}"
cache = ".posbias"
[tool.posbias.probes.positional]
groups = 5
[tool.posbias.probes.phase]
items = 24
orderings = 4
[tool.posbias.probes.stressor]
videos = 6
trials = 3
""")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "--model", "sim:looping", "-p", "no:randomly", "-q",
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
    assert "Reproduce: <code>pytest -m not slow --model sim:looping" in html
    # each verdict states its cost (model calls, cache hits, model time); a sequential gate says where it stopped
    costs = re.findall(r'<td class="num cost">(\d+) calls, (\d+) cached, ([0-9.e+-]+) s', html)
    assert len(costs) == html.count('<td class="num cost">') - html.count('<td class="num cost">–')
    assert costs and any(int(made) > 0 for made, _, _ in costs)
    # a gate deciding on a probe an earlier gate already ran says how many requests it shares
    assert re.search(r"\+ [1-9]\d* shared with an earlier gate", html)
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
            rec["slots"][0]["references"][0] = EVIL
            rec["text"] = [EVIL]
        if rec.get("kind") == "observation" and rec.get("type") == "example":
            rec["text"] = EVIL + " " + EVIL
        if rec.get("kind") == "verdict":
            rec["reason"] = EVIL
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
    page = run_dir / "reports" / "latest.html"
    shot = tmp_path / "report.png"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                           "--window-size=1400,7000", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line or "Refused to" in line]
    assert console == []
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 7000)
    # the dark header band and the red FAIL badge are drawn: the page rendered, not a blank screen
    assert img.getpixel((700, 20)) == (18, 38, 58)
    import numpy as np

    arr = np.asarray(img).astype(int)
    fail_red = (np.abs(arr[..., 0] - 179) < 12) & (np.abs(arr[..., 1] - 38) < 12) & (np.abs(arr[..., 2] - 30) < 12)
    assert fail_red.sum() > 50  # the FAIL badges (sim:looping fails its repetition gates)
    plot_blue = (np.abs(arr[..., 0] - 0) < 20) & (np.abs(arr[..., 1] - 114) < 20) & (np.abs(arr[..., 2] - 178) < 20)
    assert plot_blue.sum() > 200  # the coverage curves (Okabe-Ito blue) are drawn
    shutil.copy(shot, run_dir / "reports" / "screenshot.png")


def test_highlight_repeats_marks_only_repeated_5grams():
    marks = highlight_repeats("a b c d e x a b c d e y")
    assert [t for t, m in marks if m] == ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"]
    assert dict(marks)["x"] is False
