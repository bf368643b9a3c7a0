"""Screenshots of the HTML report for docs/report.md, from a real run on a simulated model.

Runs the MEG gates of this repository's suites on ``sim:middle-weak`` (a model with a known
middle-slot weakness, so the report shows failing gates), writes the report, and screenshots
sections of it with headless Chromium into ``docs/images/``::

    python scripts/docs_screenshots.py                       # run, then screenshot
    python scripts/docs_screenshots.py --report PATH.html    # screenshot a report you have
    python scripts/docs_screenshots.py --site site --out /tmp/site-shots   # look at the built docs site

Each shot is ``chromium --headless --no-sandbox --disable-gpu --screenshot`` of the page in a
1400 px wide window (the report's first screen is 1400×900), cropped with Pillow to a band of
rows (headless Chromium's screenshot does not scroll to an anchor).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# (file name, first and last pixel row of the report page it shows, at 1400 px wide)
REPORT_SHOTS = (("report-front.png", 0, 900), ("report-verdicts.png", 860, 1900))
SITE_PAGES = ("index.html", "concepts/gates/index.html", "reference/options/index.html", "reference/api/index.html")


def chromium() -> str:
    """The headless browser's executable (chromium or chromium-browser on PATH)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("docs_screenshots: no chromium on PATH (apt-get install chromium)")


def screenshot(url: str, out: Path, *, width: int = 1400, height: int = 900) -> Path:
    """Render ``url`` in headless Chromium and write a PNG of its window to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=120)
    if not out.is_file() or out.stat().st_size == 0:
        raise SystemExit(f"docs_screenshots: chromium wrote no screenshot for {url}")
    return out


def run_report(folder: Path) -> Path:
    """Run the MEG gates on sim:middle-weak in this repository; return the report's path."""
    report = folder / "report.html"
    cmd = [sys.executable, "-m", "pytest", "suites", "-p", "no:randomly", "-q", "-m", "meg and not slow",
           "--model", "sim:middle-weak", f"--posbias-cache={folder / 'cache'}", f"--posbias-report={report}"]
    rc = subprocess.run(cmd, cwd=REPO).returncode
    if rc != 1 or not report.is_file():  # the MEG gates of sim:middle-weak fail: exit 1 with a report
        raise SystemExit(f"docs_screenshots: expected exit 1 and a report from {' '.join(cmd)}; got exit {rc}")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, help="screenshot this report instead of running the suites")
    ap.add_argument("--site", type=Path, help="screenshot pages of this built docs site instead of a report")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "images",
                    help="folder of the PNGs (default docs/images)")
    args = ap.parse_args(argv)
    if args.site:
        for page in SITE_PAGES:
            path = (args.site / page).resolve()
            shot = screenshot(path.as_uri(), args.out / (page.replace("/", "-").replace(".html", "") + ".png"))
            print(shot)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        report = args.report.resolve() if args.report else run_report(Path(tmp))
        from PIL import Image

        page = screenshot(report.as_uri(), Path(tmp) / "page.png", height=max(b for _, _, b in REPORT_SHOTS))
        with Image.open(page) as img:
            for name, top, bottom in REPORT_SHOTS:
                args.out.mkdir(parents=True, exist_ok=True)
                img.crop((0, top, img.width, bottom)).save(args.out / name)
                print(args.out / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
