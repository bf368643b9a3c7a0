"""Start-up benchmark: what the installed plugin adds to a pytest run of an unrelated project.

A trivial project (one passing test, no conftest) is run alternately with the plugin and with
``-p no:posbias``; the overhead is the median of the per-pair differences (with its range), so
that a machine whose load drifts during the benchmark affects both sides of each pair alike.
Then ``python -X importtime`` lists the modules the plugin's run imports beyond the run without
it (self time, cumulative time), largest first, and any entry points' plugins that a
dependency brings into every run (hypothesis' pytest plugin imports all of hypothesis at the
end of each run when it is installed: it is the ``search`` extra).

Run: python benchmarks/startup.py [--pairs 11] [--top 12]
The limit it checks: at most 50 ms median overhead (exit 1 above it).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIMIT_S = 0.050
_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)$")


def _pytest(project: Path, *extra: str, importtime: bool = False) -> tuple[float, str]:
    """Wall seconds of one ``python -m pytest -q`` run in ``project``, and its stderr."""
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "pytest", "-q",
           "-p", "no:cacheprovider", *extra]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env, check=False)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} failed in {project} (exit {proc.returncode}):\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return dt, proc.stderr


def _imports(stderr: str) -> dict[str, tuple[int, int, int]]:
    """module -> (self us, cumulative us, nesting depth) from ``-X importtime`` output."""
    out = {}
    for line in stderr.splitlines():
        m = _LINE.match(line)
        if m:
            out[m.group(4)] = (int(m.group(1)), int(m.group(2)), len(m.group(3)) // 2)
    return out


def _plugin_import_s(repeats: int) -> float:
    """Median seconds of ``import pytest_posbias.plugin`` in a fresh interpreter that has imported
    pytest (pytest loads the entry point through its assertion-rewriting importer, which
    ``-X importtime`` does not list)."""
    code = ("import time, pytest; t = time.perf_counter(); import pytest_posbias.plugin; "
            "print(time.perf_counter() - t)")
    return statistics.median(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout) for _ in range(repeats))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=11, help="alternating pairs of runs (default 11)")
    ap.add_argument("--top", type=int, default=12, help="import-time rows to print (default 12)")
    args = ap.parse_args()
    if args.pairs < 1:
        raise SystemExit(f"--pairs must be >= 1; got {args.pairs}")
    with tempfile.TemporaryDirectory(prefix="posbias-startup-") as d:
        project = Path(d)
        (project / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        _pytest(project)  # warm the file cache and bytecode of both sides
        _pytest(project, "-p", "no:posbias")
        with_plugin, without, diffs = [], [], []
        for k in range(args.pairs):
            order = (False, True) if k % 2 else (True, False)  # alternate which side goes first
            got = {}
            for on in order:
                got[on] = _pytest(project, *(() if on else ("-p", "no:posbias")))[0]
            with_plugin.append(got[True])
            without.append(got[False])
            diffs.append(got[True] - got[False])
        on_imports = _imports(_pytest(project, importtime=True)[1])
        off_imports = _imports(_pytest(project, "-p", "no:posbias", importtime=True)[1])
    overhead = statistics.median(diffs)
    plugin_s = _plugin_import_s(args.pairs)
    print(f"{'measure':<44} {'value':>12}")
    print(f"{'pairs of runs (alternating)':<44} {args.pairs:>12d}")
    print(f"{'median wall, plugin installed':<44} {statistics.median(with_plugin) * 1e3:>9.1f} ms")
    print(f"{'median wall, -p no:posbias':<44} {statistics.median(without) * 1e3:>9.1f} ms")
    print(f"{'median overhead of the pairs':<44} {overhead * 1e3:>9.1f} ms")
    print(f"{'overhead range (min .. max)':<44} {min(diffs) * 1e3:>6.1f} .. {max(diffs) * 1e3:.1f} ms")
    print(f"{'limit':<44} {LIMIT_S * 1e3:>9.1f} ms")
    print(f"{'import pytest_posbias.plugin (median)':<44} {plugin_s * 1e3:>9.1f} ms")
    extra = {m: v for m, v in on_imports.items() if m not in off_imports}
    print(f"\nmodules imported only with the plugin: {len(extra)} "
          f"(self time sum {sum(v[0] for v in extra.values()) / 1e3:.1f} ms), largest cumulative first:")
    print(f"{'module':<52} {'self ms':>8} {'cumul ms':>9}")
    for name, (own, cum, _) in sorted(extra.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{name:<52} {own / 1e3:>8.1f} {cum / 1e3:>9.1f}")
    heavy = [m for m in ("numpy", "scipy", "jinja2", "matplotlib", "hypothesis") if m in on_imports]
    print(f"\nheavy packages in the plugin's run: {', '.join(heavy) or 'none'}"
          + (f" (also without the plugin: {', '.join(m for m in heavy if m in off_imports)})" if heavy else ""))
    return 0 if overhead <= LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
