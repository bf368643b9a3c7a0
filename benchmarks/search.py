"""Property search vs VideoSTF's random walk at the same query budget: prints a table.

For each simulated profile and property, per item, the queries to the first break:

* ``search`` — the hypothesis property search (``pytest_posbias.probes.search``), the suite's
  code path, budget B queries before the first break (shrinking not counted here; its queries
  are shown apart);
* ``walk`` — VideoSTF's black-box attack (§4.4): a fixed walk over random perturbations, one
  query each, stopping at the first break, capped at the same B. For the stressor property the
  walk is the stressor probe's (``ST.variants`` with the probe's seeded generator, the walk the
  attack gate replays) for each of the eight VideoSTF stressors; for the order property it is the
  phase probe's seeded orderings (identity excluded).

Both run on the same items (clean-benign videos, searchable questions) through one engine and
cache. Columns: items attacked, broken, ASR, median and mean (AQ) queries to the first break
over broken items, and AQ(walk) / AQ(search). Numbers from this script are the README's.

Run: python benchmarks/search.py [--budget 30] [--items 24] [--videos 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

from pytest_posbias.config import PosbiasConfig
from pytest_posbias.probes.phase import _answer, item_order, orderings
from pytest_posbias.probes.search import run_search
from pytest_posbias.probes.search_mcq import McqProperty
from pytest_posbias.probes.search_stressor import StressorProperty
from pytest_posbias.probes.stressor import (
    _clean_spec,
    _request,
    measured_output,
    repeats,
    select_videos,
)
from pytest_posbias.run.context import RunContext
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video import stressors as ST


def _row(method: str, profile: str, prop: str, qs: list[int | None], extra: str = "") -> dict[str, Any]:
    hits = [q for q in qs if q is not None]
    return {"method": method, "profile": profile, "property": prop, "attacked": len(qs), "broken": len(hits),
            "asr": len(hits) / len(qs) if qs else float("nan"),
            "median": float(np.median(hits)) if hits else float("nan"),
            "aq": float(np.mean(hits)) if hits else float("nan"), "extra": extra}


def order_rows(ctx: Any, model: str, n: int, budget: int) -> list[dict[str, Any]]:
    spec = ctx.phase_spec()
    props = [McqProperty(ctx, model, it, "order", spec) for it in item_order(ctx, ctx.manifest())[:n]]
    search_q: list[int | None] = []
    walk_q: list[int | None] = []
    shrink = 0
    for p in props:
        r = run_search(ctx, p, budget=budget, shrink_budget=60, seed=ctx.seed)
        if r.status not in ("broken", "held"):
            continue
        search_q.append(r.queries_to_first_break)
        shrink += r.shrink_queries
        perms = orderings(p.item, budget + 1)[1:]  # the phase probe's seeded orderings, identity excluded
        ref = _answer(ctx.engine.run([p.request(tuple(range(p.k)))])[0], tuple(range(p.k))).content
        hit = None
        for q, perm in enumerate(perms, start=1):
            a = _answer(ctx.engine.run([p.request(perm)])[0], perm).content
            if a >= 0 and a != ref:
                hit = q
                break
        walk_q.append(hit)
    return [_row("search", model, "order", search_q, f"shrink queries {shrink}"),
            _row("walk (seeded orderings)", model, "order", walk_q)]


def stressor_rows(ctx: Any, model: str, n: int, budget: int) -> list[dict[str, Any]]:
    spec = ctx.stressor_spec(ctx.probe_settings("stressor")["frames"][0])
    videos = select_videos(ctx, ctx.manifest(), n)
    search_q: list[int | None] = []
    walks: dict[str, list[int | None]] = {s: [] for s in ST.STRESSORS}
    shrink = 0
    cleans = [_clean_spec(ctx, v, spec.frames, spec) for v in videos]
    for i, v in enumerate(videos):
        p = StressorProperty(ctx, model, v, videos[(i + 1) % len(videos)], spec)
        r = run_search(ctx, p, budget=budget, shrink_budget=60, seed=ctx.seed)
        if r.status not in ("broken", "held"):
            continue  # clean output repetitive or lost: VideoSTF attacks clean-benign videos only
        search_q.append(r.queries_to_first_break)
        shrink += r.shrink_queries
        foreign = cleans[(i + 1) % len(cleans)]
        for name in ST.STRESSORS:  # the stressor probe's variants and walk (same generator keys)
            variants = ST.variants(cleans[i], name, rng=ctx.rng("variants", v.id, name, spec.frames), count=spec.trials,
                                   foreign=foreign)[:budget]
            hit = None
            for q, var in enumerate(variants, start=1):
                g = ctx.engine.run([_request(model, var.frames, spec, {"video": v.id, "condition": name, "variant": q - 1,
                                                                       "record": var.record})])[0]
                if measured_output(g) and repeats(g.text):
                    hit = q
                    break
            walks[name].append(hit)
    rows = [_row("search", model, "stressor", search_q, f"shrink queries {shrink}")]
    rows += [_row(f"walk ({name})", model, "stressor", qs) for name, qs in walks.items()]
    return rows


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1 (items, videos and budgets)."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return v


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=_positive, default=30)
    ap.add_argument("--items", type=_positive, default=24)
    ap.add_argument("--videos", type=_positive, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=None, help="a manifest (default: the synthetic set, built on first use)")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        for model, props in (("sim:letter-bias", ("order",)), ("sim:unbiased", ("order", "stressor")),
                             ("sim:looping", ("stressor",))):
            opts = RunOptions(models=(model,), cache=str(Path(d) / ".posbias"), seed=args.seed, data=args.data or None)
            ctx = RunContext(opts, PosbiasConfig(), rootdir=root, worker="main", run_id=f"bench-{model}")
            if "order" in props:
                rows += order_rows(ctx, model, args.items, args.budget)
            if "stressor" in props:
                rows += stressor_rows(ctx, model, args.videos, args.budget)
            ctx.close()
    print(f"queries to the first break, budget {args.budget} per item (seed {args.seed})")
    print(f"{'profile':<16} {'property':<9} {'method':<26} {'items':>5} {'broken':>6} {'ASR':>6} {'median Q':>8} "
          f"{'AQ':>6} {'AQ walk/search':>14}  note")
    search_aq = {(r["profile"], r["property"]): r["aq"] for r in rows if r["method"] == "search"}
    for r in rows:
        base = search_aq.get((r["profile"], r["property"]), float("nan"))
        ratio = r["aq"] / base if r["method"] != "search" and base and not np.isnan(base) else float("nan")
        def g(x: float, w: int) -> str:  # undefined (no break) as a dash, as in the README's table
            return f"{'–' if np.isnan(x) else format(x, '.3g'):>{w}}"

        print(f"{r['profile']:<16} {r['property']:<9} {r['method']:<26} {r['attacked']:>5} {r['broken']:>6} {r['asr']:>6.2f} "
              f"{g(r['median'], 8)} {g(r['aq'], 6)} {g(ratio, 14)}  {r['extra']}")


if __name__ == "__main__":
    main()
