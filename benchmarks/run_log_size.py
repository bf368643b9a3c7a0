"""Run-log size against the size of the data and the number of observations.

Builds a manifest from the synthetic set's cooking/short videos and P = 4 groups whose
references are long (``--mb`` MB of text per video, in sentences of about 10 kB), runs the
MEG gate of that configuration (``test_meg[sim:unbiased-cooking-short-P4]``: cyclic orders,
4 instances per group) in a fresh project, and prints the size of everything the run left under ``<cache>/runs/`` (the run logs)
for 1x and 2x the reference data and 1x and 2x the groups (observations). A log that stores
each reference once grows with the data (the 2x-data column about doubles) and barely with the
observations (the 2x-groups row adds the instance records, not another copy of the references);
a log that copies the references into every observation grows with their product.

Run: python benchmarks/run_log_size.py [--mb 1.1] [--groups 2] [--repo CHECKOUT]
(the synthetic set is built under fixtures/synthetic on first use)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCE_BYTES = 10_000


def long_references(video_id: str, megabytes: float) -> list[str]:
    """Sentences of about ``SENTENCE_BYTES`` characters, ``megabytes`` MB in all, distinct per video."""
    words = [f"{video_id}-w{i % 97}" for i in range(SENTENCE_BYTES // 12)]
    base = " ".join(words)
    n = max(1, round(megabytes * 1e6 / len(base)))
    return [f"Sentence {k} of {video_id}: {base}." for k in range(n)]


def build_manifest(out: Path, *, megabytes: float, groups: int) -> Path:
    """A manifest of the cooking/short videos (references of ``megabytes`` MB each) and ``groups`` P4 groups."""
    sys.path.insert(0, str(ROOT))
    from pytest_posbias.run.context import synthetic_manifest

    src = synthetic_manifest(ROOT)
    videos, group_rows = {}, []
    for line in src.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "video" and rec["domain"] == "cooking" and rec["bucket"] == "short":
            rec = {**rec, "path": str((src.parent / rec["path"]).resolve()), "references": long_references(rec["id"], megabytes)}
            rec.pop("scene", None)
            videos[rec["id"]] = rec
        elif rec.get("type") == "group" and rec["domain"] == "cooking" and rec["bucket"] == "short" and rec["P"] == 4:
            group_rows.append(rec)
    if len(group_rows) < groups:
        raise SystemExit(f"--groups: the synthetic set has {len(group_rows)} cooking/short P4 groups; got {groups}")
    out.write_text("".join(json.dumps(r) + "\n" for r in [*videos.values(), *group_rows[:groups]]))
    return out


def run_size(*, megabytes: float, groups: int, repo: Path = ROOT) -> tuple[int, int, float]:
    """(bytes under <cache>/runs, run log files, manifest MB) of one MEG run on that manifest, with
    the ``pytest_posbias`` and suites of the checkout ``repo``."""
    with tempfile.TemporaryDirectory(prefix="posbias-logsize-") as tmp:
        proj = Path(tmp)
        manifest = build_manifest(proj / "manifest.jsonl", megabytes=megabytes, groups=groups)
        (proj / "suites").mkdir()
        for f in ("conftest.py", "test_positional.py"):
            (proj / "suites" / f).write_text((repo / "suites" / f).read_text())
        (proj / "pyproject.toml").write_text(f"""
[tool.pytest.ini_options]
testpaths = ["suites"]
[tool.posbias]
data = "{manifest}"
cache = ".posbias"
[tool.posbias.probes.positional]
groups = {groups}
""")
        env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg"}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                               "--posbias-model", "sim:unbiased", "--posbias-fixed", "--posbias-report", "report.html",
                               "suites/test_positional.py::test_meg[sim:unbiased-cooking-short-P4]"],
                              cwd=proj, env=env, capture_output=True, text=True, timeout=1800)
        # the size is what is measured, not the verdict: a run that wrote its log counts whatever it
        # decided (6 when the simulated summaries of these artificial references cover no slot)
        if proc.returncode not in (0, 1, 6) or "[posbias] run log:" not in proc.stdout:
            raise SystemExit(f"the run failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        logs = [p for p in (proj / ".posbias" / "runs").rglob("*") if p.is_file()]
        return sum(p.stat().st_size for p in logs), len(logs), manifest.stat().st_size / 1e6


def main(argv: list[str] | None = None) -> None:
    """Print the run-log size for 1x/2x reference data and 1x/2x groups."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1.1, help="MB of reference text per video at 1x (default 1.1)")
    ap.add_argument("--groups", type=int, default=2, help="P4 groups at 1x (4 instances each; default 2)")
    ap.add_argument("--repo", type=Path, default=ROOT,
                    help="the checkout whose pytest_posbias makes the runs (default this one): compare two versions")
    args = ap.parse_args(argv)
    print(f"{'data':>6} {'groups':>6} {'instances':>9} {'manifest MB':>11} {'run logs MB':>11} {'files':>5}")
    for data in (1, 2):
        for scale in (1, 2):
            size, files, manifest_mb = run_size(megabytes=args.mb * data, groups=args.groups * scale, repo=args.repo)
            print(f"{data:>5}x {args.groups * scale:>6} {4 * args.groups * scale:>9} {manifest_mb:>11.1f} "
                  f"{size / 1e6:>11.2f} {files:>5}", flush=True)


if __name__ == "__main__":
    main()
