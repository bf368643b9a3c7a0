"""The report's front page, candidate vs. baseline and trends across releases.

Real run logs at quick sizes: the MEG gates (four-video configurations, 8 groups) against
sim:middle-weak (drops detail in the middle slots: MEG fails), sim:unbiased, and sim:middle-weak
at another seed. The front page is rendered in headless Chromium at 1400×900 and read back from
the DOM (element boxes written into the page by an inline script before --dump-dom).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.suite_project import write_suite_project

from pytest_posbias.report.render import render

pytestmark = [pytest.mark.usefixtures("heavy_modules"), pytest.mark.slow]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]

BOXES_SCRIPT = """<script>
(function () {
  function box(e) { var r = e.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, text: e.textContent.trim().slice(0, 300)}; }
  var out = {viewport: {w: window.innerWidth, h: window.innerHeight},
             height: document.documentElement.scrollHeight,
             decision: box(document.getElementById('decision')),
             cards: [].map.call(document.querySelectorAll('.card'), box),
             failing: [].map.call(document.querySelectorAll('.failing'), box),
             links: [].map.call(document.querySelectorAll('.faillink'), box),
             svgs: [].map.call(document.querySelectorAll('svg'), box)};
  var pre = document.createElement('pre'); pre.id = 'posbias-boxes'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    return path


def dom_boxes(html: str, tmp: Path, *, size: str = "1400,900") -> dict:
    """The page in headless Chromium at ``size``: the boxes the inline script measured."""
    # the report's CSP forbids scripts (it runs none); this test copy allows the one measuring script
    page = html.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';", 1)
    page = page.replace("</body>", BOXES_SCRIPT + "</body>", 1)
    f = tmp / "measured.html"
    f.write_text(page, encoding="utf-8")
    proc = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile-dom'}",
                           f"--window-size={size}", "--dump-dom", f.as_uri()], capture_output=True, text=True, timeout=180)
    m = re.search(r'<pre id="posbias-boxes">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"'))


def screenshot(html_path: Path, tmp: Path, *, size: str, name: str) -> np.ndarray:
    shot = tmp / name
    proc = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / ('profile-' + name)}",
                           f"--window-size={size}", f"--screenshot={shot}", html_path.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    return np.asarray(Image.open(shot).convert("RGB")).astype(int)


def _run(root: Path, small_set: Path, model: str, *extra: str) -> Path:
    write_suite_project(root, small_set, ("test_positional.py",), "[tool.posbias.probes.positional]\ngroups = 8", model=None)
    # the fragment judge: the page is the subject, and the embedding judge would load a second model per run
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "meg and not slow", "--posbias-model", model, "-p", "no:randomly",
                           "-p", "no:cacheprovider", "--posbias-judge", "fragment", *extra], cwd=root, capture_output=True,
                          text=True, timeout=1200)
    logs = list((root / ".posbias" / "runs").glob("*/run.jsonl"))
    assert len(logs) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return logs[0]


@pytest.fixture(scope="module")
def logs(tmp_path_factory, small_set, heavy_modules) -> dict[str, Path]:
    """Run logs of the MEG gates: sim:middle-weak (seed 0, and seed 1 on the cooking and leisure
    configurations) and sim:unbiased."""
    base = tmp_path_factory.mktemp("front-runs")
    return {"weak": _run(base / "weak", small_set, "sim:middle-weak"),
            "unbiased": _run(base / "unbiased", small_set, "sim:unbiased"),
            # a third release on half the configurations (CI time): its gates' trends have three points
            "weak1": _run(base / "weak1", small_set, "sim:middle-weak", "--posbias-seed", "1", "-k", "cooking or leisure")}


def _verdicts(log: Path) -> list[dict]:
    return [json.loads(x) for x in log.read_text().splitlines() if '"kind": "verdict"' in x]


def _meg_per_instance(log: Path, model: str) -> dict[tuple, dict[tuple, float]]:
    """spec -> {(group, order): MEG_i = (C2 + C3)/2 − (C1 + C4)/2} from the instance records."""
    out: dict = {}
    for line in log.read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "observation" and r.get("type") == "instance" and r.get("model") == model and r.get("P") == 4 \
                and r.get("valid", True) and r.get("variant", "main") == "main":
            c = [s["coverage"] for s in r["slots"]]
            if None not in c and any(c):  # an instance with no slot covered is a lost unit for MEG
                out.setdefault(r["spec"], {})[(str(r["group"]), tuple(r["order"]))] = (c[1] + c[2]) / 2 - (c[0] + c[3]) / 2
    return out


def test_front_page_says_do_not_ship_and_shows_failing_meg_on_the_first_screen(logs, tmp_path):
    failing = [v for v in _verdicts(logs["weak"]) if not v["passed"]]
    failing_meg = sorted(v["name"] for v in failing if v["extra"].get("gate") == "meg")
    assert failing_meg, "sim:middle-weak must fail MEG at these sizes"
    boxes = dom_boxes(render([logs["weak"]]), tmp_path)
    # the layout width is the screen's; positions are page coordinates (scroll 0), so "within the first
    # 900 px" does not depend on the height --dump-dom gives the viewport (it subtracts window chrome)
    assert boxes["viewport"]["w"] == 1400
    d = boxes["decision"]
    assert d["text"].startswith("Do not ship") and "detect mode, α = 0.05" in d["text"]
    assert d["top"] >= 0 and d["bottom"] <= 900
    # every failing MEG configuration is linked from its suite's card, visible within the first 900 px
    shown = {}
    for link in boxes["links"]:
        inside = [f for f in boxes["failing"] if f["top"] - 1 <= link["top"] and link["bottom"] <= f["bottom"] + 1]
        if inside and link["bottom"] <= 900 and link["right"] <= 1400:
            shown[link["text"]] = link
    assert failing_meg and set(failing_meg) <= set(shown), (failing_meg, sorted(shown))
    card = boxes["cards"][0]
    assert card["bottom"] <= 900 and "MEG" in card["text"] and f"{len(failing)} failed" in card["text"]
    assert all(s["right"] <= 1400 for s in boxes["svgs"])  # no figure wider than the screen


def test_front_page_screenshots_at_1400x900_and_full_page(logs, tmp_path):
    html = render([logs["weak"], logs["unbiased"]])
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    boxes = dom_boxes(html, tmp_path)
    front = screenshot(page, tmp_path, size="1400,900", name="front.png")
    assert front.shape == (900, 1400, 3)
    red = (np.abs(front[..., 0] - 179) < 12) & (np.abs(front[..., 1] - 38) < 12) & (np.abs(front[..., 2] - 30) < 12)
    d = boxes["decision"]
    assert red[int(d["top"]) + 2:int(d["bottom"]) - 2, 40:400].mean() > 0.5  # the red do-not-ship banner is drawn there
    height = min(int(boxes["height"]), 16000)
    full = screenshot(page, tmp_path, size=f"1400,{height}", name="full.png")
    assert full.shape[0] == height
    assert boxes["svgs"]
    for s in boxes["svgs"]:  # every figure is drawn (not blank) and fits the page width
        if s["bottom"] > height or s["bottom"] - s["top"] < 20:
            continue
        crop = full[int(s["top"]):int(s["bottom"]), int(max(0, s["left"])):int(min(1400, s["right"]))]
        assert crop.size and (crop.min(axis=2) < 128).mean() > 0.003, s
        assert s["right"] <= 1400
    shutil.copy(tmp_path / "front.png", logs["weak"].parent / "front.png")


def test_candidate_vs_baseline_shows_the_paired_meg_difference_on_every_configuration(logs, tmp_path):
    out = tmp_path / "compare.html"
    proc = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "report", str(logs["weak"]), str(logs["unbiased"]),
                           "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    cand, base = _meg_per_instance(logs["weak"], "sim:middle-weak"), _meg_per_instance(logs["unbiased"], "sim:unbiased")
    configs = sorted(set(cand) & set(base))
    assert len(configs) >= 4
    table = html[html.index('<table class="paired">'):]
    table = table[:table.index("</table>")]
    for spec in configs:
        keys = sorted(set(cand[spec]) & set(base[spec]))
        c = np.array([cand[spec][k] for k in keys])
        b = np.array([base[spec][k] for k in keys])
        expected = abs(c.mean()) - abs(b.mean())  # Δ = |mean candidate| − |mean baseline| on the paired instances
        row = re.search(rf"<tr class=\"([a-z-]+)\"><td>{re.escape(spec)}</td><td>MEG</td>"
                        r'<td class="num">([^<]+)</td><td class="num">([^<]+)</td><td class="num">([^<]+)</td>'
                        r'<td class="num">\[([^,]+), ([^\]]+)\]</td><td class="num">(\d+) ', table)
        assert row, spec
        num = [float(x.replace("−", "-")) for x in row.group(2, 3, 4, 5, 6)]
        assert num[0] == pytest.approx(c.mean(), abs=1e-3) and num[1] == pytest.approx(b.mean(), abs=1e-3)
        assert num[2] == pytest.approx(expected, abs=1e-3)
        assert num[3] <= num[2] <= num[4]  # the paired CI holds the estimate
        assert int(row.group(7)) == len(keys)
        if num[3] > 0:
            assert row.group(1) == "worse"
    worse = html[html.index('<span class="worse-list">'):html.index('<span class="better-list">')]
    failing = {v["extra"]["spec"] for v in _verdicts(logs["weak"]) if not v["passed"] and v["extra"].get("gate") == "meg"}
    assert failing and all(f"MEG {spec}" in worse for spec in failing)  # the front page lists what got worse
    chips = re.findall(r'<span class="chip worse">([^<(]+?)(?: \(now fails\))?</span>', worse)
    assert len(chips) == len(set(chips))  # once each (a paired difference and its flipped gate share a name)


def test_history_draws_a_trend_per_gate(logs, tmp_path):
    hist = tmp_path / "artifacts"
    for k, name in enumerate(("unbiased", "weak1", "weak")):
        (hist / f"release-{k}").mkdir(parents=True)
        shutil.copy(logs[name], hist / f"release-{k}" / "run.jsonl")
    (hist / "notes.jsonl").write_text('{"not": "a run log"}\n')
    out = tmp_path / "history.html"
    proc = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "report", "--history", str(hist), "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    gates = {(v["nodeid"].split("::")[0], v["name"]) for name in ("unbiased", "weak1", "weak") for v in _verdicts(logs[name])}
    figs = re.findall(r'<figure class="trend" id="[^"]+" data-gate="([^"]+)" data-points="(\d+)"><svg', html)
    assert sorted(g for g, _ in figs) == sorted(name for _, name in gates)
    every = {n for n in {name for _, name in gates}
             if all(any(v["name"] == n for v in _verdicts(logs[r])) for r in ("unbiased", "weak1", "weak"))}
    assert every and all(int(p) == 3 for g, p in figs if g in every)
    assert html.count("<tr><td class=\"num\">") == 3  # three releases listed, the non-log file skipped
    boxes = dom_boxes(html.replace('<main>', '<main><div id="decision"></div>', 1), tmp_path)
    assert boxes["svgs"] and all(s["right"] <= 1400 for s in boxes["svgs"])
