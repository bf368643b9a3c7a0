"""Operating characteristics of the decision rules at their boundaries (docs/design.md section 5).

Each case simulates one rule at the boundary of its null (the rate of wrong decisions there is
its size: certify false pass, or detect false failure) and at a point past it (power), over
``--replicates`` seeded replicates, with Clopper–Pearson 95% intervals
(``scipy.stats.binomtest(...).proportion_ci(method="exact")``). A rule holds its size when the
size is at or under α = 0.05 within Monte-Carlo error.

Paired rows (this module):

* ``abs``: ``--baseline`` DPB/MEG, Δ = |μc| − |μb| (``paired.paired_abs_mean_verdict``), MEG
  margin 0.01, 48 groups × 4 orders, per-instance sd 0.18 (sim:unbiased's MEG spread). Certify
  false pass at μc = 0.01, μb = 0 with the baseline's noise ×1, ×2, ×3, ×6; power: pass rate at
  μc = μb = 0. Detect false failure for an unbiased candidate 12× and 25× noisier than the
  baseline (μc = μb = 0) and at the margin (μc = 0.01, μb = 0); power: failure rate at μc = 0.02.
  The same for DPB (margin 0.02, 48 groups × 2 orders, per-instance sd 0.07), plus a candidate
  whose groups have rare +0.35 jumps (2%): a heavy right tail where the t bounds do not hold.
* ``binary``: paired binary outcomes with a margin (``stats.paired_change_verdict``): n = 60
  at margin 0.05 and n = 24 at margin 0.10, discordance all one way (p01 = 0) and two-way
  (p01 = 0.10); certify power at δ = 0 (p10 = p01 = margin/2), detect power at δ = 2·margin;
  n = 300 at margin 0.05, one way (the exact test's rejection region as its cut on Tango's Z,
  ``paired.paired_binary_critical``).
  Margin 0 (fusion): exact McNemar, detect at δ = 0.
* ``stressor``: the paired stressor comparison (``paired.paired_amplification_verdict``),
  margin 0.05, 16 and 60 videos with 4 stressed trials each (quick sizes) and 60 with 30 (the
  defaults); the per-video difference is left-skewed (the candidate's rare clean repeats),
  rare-event, or right-skewed; then the stressed share alone (no clean repeats, so the exact
  clean-flag bound is at its narrowest and the t bound of the share carries the decision): rare
  repeats (per trial 0.05 against none: 1-3 of 16 videos with any repeat at 4 trials), rare
  looping videos (5% of the candidate's, every trial repeats), and skewed share differences from
  whole-video loops (15% of the candidate's videos loop and the rest never repeat, against 10%
  per trial: right-skewed, the certify side; mirrored for detect). Certify power at δ = 0,
  detect power at δ = 0.10 (the candidate's share moved through its non-looping videos' rate, or
  through its share of looping videos where that rate would leave [0, 1]). The decisions are
  vectorised (``stressor_decisions``); tests/unit/stats/test_paired.py checks them against the verdict.
  After these rows: the t bound of the stressed share alone at α/2 on the units with no clean
  repeats, how often it misses the true share difference (``share_bound_misses``).

Rows from ``benchmarks/decision_small.py`` (single-sample rules), when present, are printed
after these: its ``cases(replicates, seed)`` returns rows with ``name``, ``rule``, ``n`` and
either ``size``/``size_ci``/``power``/``power_ci`` or ``rejections``/``replicates``/``power_rejections``.

Run: python benchmarks/decision.py [--replicates 2000] [--cases abs,binary,stressor,small] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_posbias.stats import mcnemar_exact
from pytest_posbias.stats.paired import paired_abs_mean_verdict
from pytest_posbias.stats.paired_binary import (
    NUISANCE_GRID,
    paired_binary_bound,
    paired_binary_critical,
    paired_binary_pvalues,
    tango_score,
)

ALPHA = 0.05
CASE_GROUPS = ("abs", "binary", "stressor", "small")


@dataclass(frozen=True)
class Case:
    """One row: the rule's wrong-decision rate at the boundary and its power past it."""

    name: str
    rule: str
    n: int
    boundary: str
    replicates: int
    rejections: int
    alternative: str
    power_rejections: int

    @property
    def size(self) -> float:
        """Share of replicates decided wrongly at the boundary."""
        return self.rejections / self.replicates

    @property
    def power(self) -> float:
        """Share of replicates decided rightly at the alternative."""
        return self.power_rejections / self.replicates


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """Two-sided 95% Clopper–Pearson interval of k/n."""
    ci = st.binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


# --------------------------------------------------------------------------- |μc| − |μb|

GROUPS, ORDERS, SD, MEG_MARGIN = 48, 4, 0.18, 0.01
DPB_ORDERS, DPB_SD, DPB_MARGIN = 2, 0.07, 0.02  # P = 2: two orders; group DPB sd about 0.05 on the synthetic set


def _abs_rate(rng: np.random.Generator, reps: int, *, mc: float, mb: float, sd_c: float, sd_b: float, mode: str,
              orders: int = ORDERS, margin: float = MEG_MARGIN, jump: float = 0.0, jump_p: float = 0.0) -> int:
    """Replicates in which the abs rule rejects (certify: passes; detect: fails). ``jump``/``jump_p``:
    the candidate's groups also move by +``jump`` with probability ``jump_p`` (centred, so its mean
    stays ``mc``): rare large group effects, a heavy right tail."""
    g = np.repeat(np.arange(GROUPS), orders)
    c = rng.normal(mc, sd_c, (reps, GROUPS * orders))
    if jump:
        c += np.repeat(jump * (rng.random((reps, GROUPS)) < jump_p) - jump * jump_p, orders, axis=1)
    b = rng.normal(mb, sd_b, (reps, GROUPS * orders))
    hits = 0
    for r in range(reps):
        v = paired_abs_mean_verdict(c[r], b[r], g, name="abs", margin=margin, mode=mode, alpha=ALPHA)
        hits += v.passed if mode == "certify" else not v.passed
    return hits


def abs_cases(reps: int, seed: int) -> Iterator[Case]:
    """--baseline DPB/MEG rows."""
    rule = "IU t bounds of ±μc∓μb"
    for k in (1, 2, 3, 6):
        rng = np.random.default_rng([seed, 1, k])
        size = _abs_rate(rng, reps, mc=MEG_MARGIN, mb=0.0, sd_c=SD, sd_b=SD * k, mode="certify")
        power = _abs_rate(rng, reps, mc=0.0, mb=0.0, sd_c=SD, sd_b=SD * k, mode="certify")
        yield Case(f"MEG baseline certify, base noise x{k}", rule, GROUPS, "false pass at μc=0.01, μb=0", reps, size,
                   "pass at μc=μb=0", power)
    for k in (1, 12, 25):
        rng = np.random.default_rng([seed, 2, k])
        mc = MEG_MARGIN if k == 1 else 0.0
        size = _abs_rate(rng, reps, mc=mc, mb=0.0, sd_c=SD, sd_b=SD / k, mode="detect")
        power = _abs_rate(rng, reps, mc=2 * MEG_MARGIN, mb=0.0, sd_c=SD, sd_b=SD / k, mode="detect")
        where = "false fail at μc=0.01, μb=0" if k == 1 else "false fail at μc=μb=0"
        yield Case(f"MEG baseline detect, cand noise x{k}", rule, GROUPS, where, reps, size, "fail at μc=0.02", power)
    dpb = {"orders": DPB_ORDERS, "margin": DPB_MARGIN}
    for k in (1, 2, 3, 6):
        rng = np.random.default_rng([seed, 3, k])
        size = _abs_rate(rng, reps, mc=DPB_MARGIN, mb=0.0, sd_c=DPB_SD, sd_b=DPB_SD * k, mode="certify", **dpb)
        power = _abs_rate(rng, reps, mc=0.0, mb=0.0, sd_c=DPB_SD, sd_b=DPB_SD * k, mode="certify", **dpb)
        yield Case(f"DPB baseline certify, base noise x{k}", rule, GROUPS, "false pass at μc=0.02, μb=0", reps, size,
                   "pass at μc=μb=0", power)
    rng = np.random.default_rng([seed, 4])
    heavy = {"jump": 0.35, "jump_p": 0.02, **dpb}
    size = _abs_rate(rng, reps, mc=DPB_MARGIN, mb=0.0, sd_c=0.035, sd_b=0.035, mode="certify", **heavy)
    power = _abs_rate(rng, reps, mc=0.0, mb=0.0, sd_c=0.035, sd_b=0.035, mode="certify", **heavy)
    yield Case("DPB baseline certify, rare +0.35 jumps (2%)", rule, GROUPS, "false pass at μc=0.02, μb=0", reps, size,
               "pass at μc=μb=0", power)
    for k in (1, 12):
        rng = np.random.default_rng([seed, 5, k])
        mc = DPB_MARGIN if k == 1 else 0.0
        size = _abs_rate(rng, reps, mc=mc, mb=0.0, sd_c=DPB_SD, sd_b=DPB_SD / k, mode="detect", **dpb)
        power = _abs_rate(rng, reps, mc=2 * DPB_MARGIN, mb=0.0, sd_c=DPB_SD, sd_b=DPB_SD / k, mode="detect", **dpb)
        where = "false fail at μc=0.02, μb=0" if k == 1 else "false fail at μc=μb=0"
        yield Case(f"DPB baseline detect, cand noise x{k}", rule, GROUPS, where, reps, size, "fail at μc=0.04", power)


# --------------------------------------------------------------------------- paired binary


def _binary_hits(rng: np.random.Generator, reps: int, n: int, p10: float, p01: float,
                 table: np.ndarray) -> int:
    counts = rng.multinomial(n, [p10, p01, 1 - p10 - p01], size=reps)
    return int(np.sum(table[counts[:, 0], counts[:, 1]] < ALPHA))


def binary_cases(reps: int, seed: int) -> Iterator[Case]:
    """Paired binary rows: the rejection region of the exact test is a table over (n10, n01)."""
    rule = "exact uncond. (Tango score)"
    for n, t in ((60, 0.05), (24, 0.10)):
        cert = paired_binary_pvalues(n, t, alternative="less")
        det = paired_binary_pvalues(n, t, alternative="greater")
        for p01 in (0.0, 0.10):
            rng = np.random.default_rng([seed, 3, n, int(p01 * 100)])
            way = "one-way" if p01 == 0 else "two-way"
            size = _binary_hits(rng, reps, n, t + p01, p01, cert)
            power = _binary_hits(rng, reps, n, t / 2 + p01, t / 2 + p01, cert)
            yield Case(f"binary certify, margin {t:g}, {way}", rule, n, f"false pass at p10={t + p01:g}, p01={p01:g}",
                       reps, size, f"pass at δ=0, p01={t / 2 + p01:g}", power)
            size = _binary_hits(rng, reps, n, t + p01, p01, det)
            power = _binary_hits(rng, reps, n, 2 * t + p01, p01, det)
            yield Case(f"binary detect, margin {t:g}, {way}", rule, n, f"false fail at p10={t + p01:g}, p01={p01:g}",
                       reps, size, f"fail at δ={2 * t:g}, p01={p01:g}", power)
    n, t = 300, 0.05  # the rejection region of the exact test as a table of 0/1 p-values
    x, y = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    z = np.round(tango_score(x, y, n, t), 9)
    cut_c = paired_binary_critical(n, t, ALPHA, alternative="less")
    cut_d = paired_binary_critical(n, t, ALPHA, alternative="greater")
    for mode, table in (("certify", np.where(z <= cut_c, 0.0, 1.0)), ("detect", np.where(z >= cut_d, 0.0, 1.0))):
        rng = np.random.default_rng([seed, 6, 0 if mode == "certify" else 1])
        size = _binary_hits(rng, reps, n, t, 0.0, table)
        power = (_binary_hits(rng, reps, n, t / 2, t / 2, table) if mode == "certify"
                 else _binary_hits(rng, reps, n, 2 * t, 0.0, table))
        alt = f"pass at δ=0, p01={t / 2:g}" if mode == "certify" else f"fail at δ={2 * t:g}, p01=0"
        yield Case(f"binary {mode}, margin {t:g}, one-way", rule, n,
                   f"false {'pass' if mode == 'certify' else 'fail'} at p10={t:g}, p01=0", reps, size, alt, power)
    n = 60
    rng = np.random.default_rng([seed, 4])
    table = np.full((n + 1, n + 1), np.nan)
    for x in range(n + 1):
        for y in range(n + 1 - x):
            table[x, y] = mcnemar_exact(x, y, alternative="greater")
    size = _binary_hits(rng, reps, n, 0.10, 0.10, table)
    power = _binary_hits(rng, reps, n, 0.20, 0.05, table)
    yield Case("fusion (margin 0) detect", "exact McNemar", n, "false fail at p10=p01=0.10", reps, size,
               "fail at p10=0.20, p01=0.05", power)


# --------------------------------------------------------------------------- paired stressor comparison

STRESS_MARGIN = 0.05
STRESS_SIZES = ((16, 4), (60, 4), (60, 30))  # (videos, stressed trials per video): quick sizes and the defaults


@dataclass(frozen=True)
class Arm:
    """One model's per-video units: clean repetition rate, the share of videos that loop (every
    stressed trial repeats) and the per-trial stressed repetition rate of the other videos."""

    clean: float
    stressed: float
    loops: float = 0.0

    def share(self) -> float:
        """Expected stressed repetition share of a video."""
        return self.loops + (1 - self.loops) * self.stressed

    def moved(self, d: float) -> Arm:
        """The arm with its expected stressed share moved by ``d``: through the stressed rate of the
        non-looping videos while it stays in [0, 1], else through the share of looping videos."""
        q = self.stressed + d / (1 - self.loops)
        if 0.0 <= q <= 1.0:
            return Arm(self.clean, q, self.loops)
        return Arm(self.clean, self.stressed, self.loops + d / (1 - self.stressed))


# (candidate, baseline) at δ = E[S_c − S_b] − (P(F_c) − P(F_b)) = 0.05 each
SCENARIOS = {
    "left-skewed": (Arm(0.10, 0.18), Arm(0.02, 0.05)),  # the candidate's rare clean repeats
    "rare-event": (Arm(0.03, 0.10), Arm(0.03, 0.05)),
    "right-skewed": (Arm(0.02, 0.15), Arm(0.10, 0.18)),  # the baseline's rare clean repeats
    # stressed repeats alone and rare: per trial 0.05, so 1-3 of 16 videos with any repeat at 4 trials
    "rare repeats": (Arm(0.0, 0.05), Arm(0.0, 0.0)),
    # whole videos loop: 5% of the candidate's, no other repeat (0-3 of 16 videos)
    "rare loops": (Arm(0.0, 0.0, 0.05), Arm(0.0, 0.0)),
    # the stressed-share difference right-skewed (certify side): 15% of the candidate's videos loop,
    # the rest never repeat; the baseline repeats 10% of trials everywhere
    "cand loops": (Arm(0.0, 0.0, 0.15), Arm(0.0, 0.10)),
    # left-skewed (detect side): 15% of the baseline's videos loop, the candidate repeats 20% everywhere
    "base loops": (Arm(0.0, 0.20), Arm(0.0, 0.0, 0.15)),
}


def _exact_bounds(n: int, alpha: float) -> Callable[[int, int], tuple[float, float]]:
    """(lower, upper) exact bounds of the clean-flag difference, computed once per distinct outcome."""
    known: dict[tuple[int, int], tuple[float, float]] = {}

    def bounds(x: int, y: int) -> tuple[float, float]:
        if (x, y) not in known:
            known[x, y] = (paired_binary_bound(x, y, n, alpha, side="lower", anchor=0.0),
                           paired_binary_bound(x, y, n, alpha, side="upper", anchor=0.0))
        return known[x, y]

    return bounds


def _shares(rng: np.random.Generator, reps: int, n: int, trials: int, arm: Arm) -> np.ndarray:
    """Stressed repetition shares of ``reps`` × ``n`` videos (looping videos: every trial repeats)."""
    s = rng.binomial(trials, arm.stressed, (reps, n)) / trials
    if arm.loops > 0:
        s = np.where(rng.random((reps, n)) < arm.loops, 1.0, s)
    return s


def stressor_units(rng: np.random.Generator, reps: int, n: int, trials: int,
                   arms: tuple[Arm, Arm]) -> tuple[np.ndarray, ...]:
    """(candidate share, candidate clean flag, baseline share, baseline clean flag), each reps × n."""
    cand, base = arms
    fc = rng.random((reps, n)) < cand.clean
    fb = rng.random((reps, n)) < base.clean
    sc = _shares(rng, reps, n, trials, cand)
    sb = _shares(rng, reps, n, trials, base)
    return sc, fc, sb, fb


def stressor_decisions(units: tuple[np.ndarray, ...], bounds: Callable[[int, int], tuple[float, float]],
                       mode: str) -> np.ndarray:
    """The decision of paired_amplification_verdict per replicate, vectorised: detect fails when
    LB_S − UB_F > margin, certify passes when UB_S − LB_F < margin (t bound at α/2 of the share
    difference, exact bound at α/2 of the clean-flag difference); a zero standard error decides nothing."""
    sc, fc, sb, fb = units
    n = sc.shape[1]
    ds = sc - sb
    mean = ds.mean(axis=1)
    se = ds.std(axis=1, ddof=1) / math.sqrt(n)
    q = float(st.t.ppf(1 - ALPHA / 2, n - 1))
    n10 = np.sum(fc & ~fb, axis=1)
    n01 = np.sum(~fc & fb, axis=1)
    fb_lo, fb_hi = np.array([bounds(int(x), int(y)) for x, y in zip(n10, n01, strict=True)]).T
    decided = se > 0
    if mode == "detect":
        return decided & (mean - q * se - fb_hi > STRESS_MARGIN)
    return decided & (mean + q * se - fb_lo < STRESS_MARGIN)


def _stressor_hits(rng: np.random.Generator, reps: int, n: int, trials: int, arms: tuple[Arm, Arm],
                   bounds: Callable[[int, int], tuple[float, float]], mode: str) -> int:
    """Replicates in which the rule rejects (detect: fails; certify: passes)."""
    return int(np.sum(stressor_decisions(stressor_units(rng, reps, n, trials, arms), bounds, mode)))


def stressor_cases(reps: int, seed: int) -> Iterator[Case]:
    """Paired stressor comparison rows."""
    rule = "t(share) + exact(clean), Bonf."
    all_bounds = {n: _exact_bounds(n, ALPHA / 2) for n in {n for n, _ in STRESS_SIZES}}
    for n, trials in STRESS_SIZES:
        bounds = all_bounds[n]
        for k, (label, (cand, base)) in enumerate(SCENARIOS.items()):
            past, better = (cand.moved(STRESS_MARGIN), base), (cand.moved(-STRESS_MARGIN), base)
            rng = np.random.default_rng([seed, 5, n, trials, k])
            size = _stressor_hits(rng, reps, n, trials, (cand, base), bounds, "detect")
            power = _stressor_hits(rng, reps, n, trials, past, bounds, "detect")
            yield Case(f"stressor vs base detect, {label}, {trials} trials", rule, n, "false fail at δ=0.05", reps,
                       size, "fail at δ=0.10", power)
            size = _stressor_hits(rng, reps, n, trials, (cand, base), bounds, "certify")
            power = _stressor_hits(rng, reps, n, trials, better, bounds, "certify")
            yield Case(f"stressor vs base certify, {label}, {trials} trials", rule, n, "false pass at δ=0.05", reps,
                       size, "pass at δ=0", power)


def share_bound_misses(reps: int, seed: int) -> Iterator[str]:
    """The t bound of the stressed-share difference alone, at α/2 on the side each mode decides
    with (certify: upper, detect: lower), on the units with no clean repeats: the share of samples
    in which it lies on the wrong side of the true difference (nominal α/2); samples with a zero
    standard error, on which the rule refuses to decide, are not counted as misses."""
    for label, mode in (("rare repeats", "certify"), ("cand loops", "certify"), ("base loops", "detect")):
        cand, base = SCENARIOS[label]
        true = cand.share() - base.share()
        for n, trials in STRESS_SIZES:
            sc, _, sb, _ = stressor_units(np.random.default_rng([seed, 7, n, trials]), reps, n, trials, (cand, base))
            ds = sc - sb
            mean, se = ds.mean(axis=1), ds.std(axis=1, ddof=1) / math.sqrt(n)
            q = float(st.t.ppf(1 - ALPHA / 2, n - 1))
            wrong = mean + q * se < true if mode == "certify" else mean - q * se > true
            miss = int(np.sum(wrong & (se > 0)))  # a zero standard error: the rule refuses to decide
            lo, hi = clopper_pearson(miss, reps)
            yield (f"  share t bound alone, {label}, {mode} side, {n} videos x {trials} trials: misses "
                   f"{miss / reps:.3f} [{lo:.3f}, {hi:.3f}] (nominal {ALPHA / 2:g})")


# --------------------------------------------------------------------------- table


def _field(row: Any, key: str) -> Any:
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


def _fmt_rate(rate: float | None, ci: Any) -> str:
    if rate is None:
        return "—"
    lo, hi = ci if ci is not None else (math.nan, math.nan)
    return f"{rate:6.3f} [{lo:.3f}, {hi:.3f}]"


def row_text(row: Any) -> str:
    """One printed row from a Case or a decision_small row (dict or object)."""
    reps = _field(row, "replicates")
    size, size_ci = _field(row, "size"), _field(row, "size_ci")
    power, power_ci = _field(row, "power"), _field(row, "power_ci")
    if size_ci is None and reps and _field(row, "rejections") is not None:
        size_ci = clopper_pearson(_field(row, "rejections"), reps)
    if power_ci is None and reps and _field(row, "power_rejections") is not None:
        power_ci = clopper_pearson(_field(row, "power_rejections"), reps)
    return (f"{_field(row, 'name')!s:<52} {_field(row, 'rule')!s:<30} {_field(row, 'n')!s:>4} "
            f"{_fmt_rate(size, size_ci):>24} {_fmt_rate(power, power_ci):>24}")


def small_cases(reps: int, seed: int) -> list[Any]:
    """The single-sample rows of benchmarks/decision_small.py, or none when it is absent."""
    try:
        from benchmarks.decision_small import cases
    except ImportError:
        print("(benchmarks/decision_small.py not present: no single-sample rows)")
        return []
    return list(cases(reps, seed))


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when a paired rule's size exceeds α beyond Monte-Carlo error
    (the lower end of its Clopper–Pearson interval above α)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=2000, help="replicates per case (>= 1000 for the table)")
    ap.add_argument("--cases", default=",".join(CASE_GROUPS), help=f"comma-separated subset of {', '.join(CASE_GROUPS)}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    chosen = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(CASE_GROUPS))
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)}; known: {', '.join(CASE_GROUPS)}")
    if args.replicates < 1:
        ap.error("--replicates must be >= 1")
    print(f"alpha = {ALPHA}, {args.replicates} replicates per case, seed {args.seed}, nuisance grid {NUISANCE_GRID}")
    print(f"{'case':<52} {'rule':<30} {'n':>4} {'size at boundary [95% CI]':>24} {'power [95% CI]':>24}")
    bad = 0
    makers = {"abs": abs_cases, "binary": binary_cases, "stressor": stressor_cases}
    for group in chosen:
        t0 = time.perf_counter()
        rows = small_cases(args.replicates, args.seed) if group == "small" else list(makers[group](args.replicates, args.seed))
        for row in rows:
            print(row_text(row), flush=True)
            if isinstance(row, Case) and clopper_pearson(row.rejections, row.replicates)[0] > ALPHA:
                bad += 1
        if group == "stressor":
            for line in share_bound_misses(args.replicates, args.seed):
                print(line, flush=True)
        print(f"  ({group}: {time.perf_counter() - t0:.0f} s)", flush=True)
    if bad:
        print(f"{bad} paired rule(s) above α beyond Monte-Carlo error")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
