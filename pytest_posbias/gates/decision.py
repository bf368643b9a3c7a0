"""The run-level release decision over every gate the run holds (docs/concepts/statistics.md, "The
run-level decision", for the rules and the exit statuses):

* **detect mode**: Holm's step-down adjustment (Holm 1979) over the gates' valid p-values,
  p̃_(i) = max_{j <= i} min(1, (m − j + 1) · p_(j)); a gate fails the run when its own verdict
  failed *and* p̃ <= α, which controls the family-wise error rate at α under any dependence;
* **certify mode**, and certify-type gates (the equivalence TOST) in a detect run: an
  intersection–union test (Berger 1982, Technometrics 24, 295) of level α, p̃ = p;
* ``multiplicity = "none"``: each gate's own decision.

A gate below its measurement floor, or inconclusive in certify mode, is *not measured* (exit 6,
:mod:`~pytest_posbias.exitcodes`) and left out of the Holm family; a group-sequential gate enters it
with the design's z-ordering p-value (:func:`sequential_p_value`; Jennison & Turnbull 2000, section 8.4).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import multivariate_normal, norm
from scipy.stats import t as t_dist

from ..config import MAX_RESAMPLES, check_alpha
from ..errors import ConfigError
from ..exitcodes import DO_NOT_SHIP, LABELS, NOT_MEASURED, SHIP
from ..gate_registry import GATES
from ..stats import Verdict
from ..stats.intervals import _expanded_p
from ..stats.power import detectable_effect as rate_detectable_effect
from ..stats.sequential import MIN_MEAN_UNITS, _violation, gsd_boundaries, gsd_sizes
from ..stats.verdicts import _num

MULTIPLICITY: tuple[str, ...] = ("holm", "none")
POWER = 0.80  # the power at which a verdict states its smallest detectable violation
SEQUENTIAL_LOOKS = 4  # gates.LOOKS: analyses of the group-sequential design the suites use
OPT_IN_MARK = "opt in with"  # a skip reason with these words is an opt-in gate the user did not opt into
NO_DATA_MARK = "no usable"  # the suites' skip of a gate whose data hold none of its items (Manifest.missing)


def skip_kind(reason: object) -> str:
    """What a gate test's skip was: ``opt-in not selected``, ``no data`` (the suites' skip for data
    holding none of the gate's items: the gate was selected and measured nothing) or ``skipped by
    the test`` (a skip mark, ``skipif`` or ``importorskip`` the user wrote: asked for)."""
    r = str(reason)
    return "opt-in not selected" if OPT_IN_MARK in r else "no data" if NO_DATA_MARK in r else "skipped by the test"


def holm_adjust(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm step-down adjusted p-values, in the input order.

    p̃_(i) = max_{j <= i} min(1, (m − j + 1) · p_(j)) for the ascending order p_(1) <= ... <= p_(m)
    (Holm 1979). Rejecting every hypothesis with p̃ <= α controls the family-wise error rate at α.
    A p-value that is NaN or outside [0, 1] is no evidence and counts as 1.
    """
    p = np.asarray(p_values, dtype=float).ravel()
    p = np.where((p >= 0.0) & (p <= 1.0), p, 1.0)
    order = np.argsort(p, kind="stable")
    m = p.size
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(steps)
    return out


def sequential_p_value(*, nominal_p: float, look: int, n_max: int, alpha: float, looks: int = SEQUENTIAL_LOOKS,
                      active: Sequence[bool] | None = None) -> float:
    """p-value of a failing group-sequential gate in the z-statistic (likelihood-ratio) ordering
    (Jennison & Turnbull 2000, §8.4), valid at every level.

    The design (:func:`~pytest_posbias.stats.sequential.gsd_step`) has efficacy boundaries c_1..c_K on the
    z scale at information fractions τ_k = n_k / n_max (O'Brien–Fleming-type spending); a gate
    fails at the first look whose z-statistic crosses its boundary. For a failure with nominal
    one-sided p-value ``nominal_p`` (z = Φ⁻¹(1 − p)), under the null at the boundary,

        p = Σ_j P(Z_i < c_i for live i < j, Z_j >= max(c_j, z)),   corr(Z_i, Z_j) = sqrt(τ_i / τ_j),

    the probability of failing at any look with a z-statistic at least as large: <= α, α at a
    crossing exactly on the last boundary, shrinking with z (the stagewise ordering would charge
    every earlier look's α). ``active`` marks the looks that could stop the gate (a mean gate cannot
    stop before ``MIN_MEAN_UNITS`` units). ``look`` is accepted for the record; the ordering does
    not depend on it. Gates that did not fail get p = 1 from the caller.
    """
    if not 0 < alpha < 1:
        raise ConfigError(f"`alpha` must be in (0, 1); got {alpha!r}")
    if n_max < 1:
        raise ConfigError(f"`n_max` must be >= 1; got {n_max!r}")
    p = float(nominal_p)
    if math.isnan(p):
        return 1.0
    p = min(max(p, 0.0), 1.0)
    sizes = gsd_sizes(n_max, looks)
    act = [True] * len(sizes) if active is None else [bool(x) for x in active][: len(sizes)]
    if len(act) < len(sizes):
        raise ConfigError(f"`active` must mark each of the {len(sizes)} looks; got {len(act)}")
    if p <= 0.0:
        return 0.0
    taus = [s / n_max for s in sizes]
    cs = gsd_boundaries(taus, alpha)
    z = float(norm.isf(p))
    live = [j for j in range(len(sizes)) if act[j]]
    rng = np.random.default_rng(0)  # fixed QMC seed, as for the boundaries: the same outcome, the same p

    def below(j: int, x: float) -> float:  # F_j(x) = P(Z_i < c_i for live i < j, Z_j < x)
        idx = [i for i in live if i < j] + [j]
        if len(idx) == 1:
            return float(norm.cdf(x))
        cov = np.array([[math.sqrt(min(taus[i], taus[m]) / max(taus[i], taus[m])) for m in idx] for i in idx])
        return float(multivariate_normal(mean=np.zeros(len(idx)), cov=cov).cdf(
            np.array([*(cs[i] for i in idx[:-1]), x]), rng=rng))

    # the first crossing at live look j with Z_j >= max(c_j, z) has probability F_j(∞) − F_j(max(c_j, z)),
    # F_j(∞) = P(no crossing before j) taken as F_j at 8, a bound past any z-statistic here
    total = sum(below(j, 8.0) - below(j, max(cs[j], z)) for j in live)
    return float(min(1.0, max(0.0, total)))


def gate_p_value(v: Verdict) -> float:
    """The gate's p-value for the run's multiple test, valid at every level: its own for a
    fixed-sample or certify-mode gate; for a group-sequential detect gate the z-ordering p-value
    (:func:`sequential_p_value`) from the reported p = min(1, p_k · α / a_k), a_k = 1 − Φ(c_k),
    and 1 when it did not fail or reported p = 1 (its nominal p is then not recoverable)."""
    p = float(v.p_value)
    if not 0.0 <= p <= 1.0:  # NaN or out of range: no valid p-value
        return 1.0
    ex = v.extra or {}
    # a certify-type gate's repeated p decides it on its own (IUT)
    if not str(ex.get("design", "")).startswith("group-sequential") or v.mode == "certify":
        return p
    n_max = int(ex.get("n_max") or 0)
    done = list(ex.get("looks") or [])
    if v.passed or n_max < 1 or not done or p >= 1.0:  # no crossing: the z-ordering p-value counts failures only
        return 1.0
    sizes = gsd_sizes(n_max, SEQUENTIAL_LOOKS)
    k = min(len(done), len(sizes)) - 1
    a_k = float(norm.sf(gsd_boundaries([s / n_max for s in sizes], v.alpha)[k]))
    active = [ex.get("kind") != "mean" or s >= MIN_MEAN_UNITS for s in sizes]  # unknown kind: every look counts
    return sequential_p_value(nominal_p=p * a_k / v.alpha, look=k, n_max=n_max, alpha=v.alpha, active=active)


def inconclusive(v: Verdict) -> bool:
    """A verdict whose data could not decide (:attr:`~pytest_posbias.stats.Verdict.inconclusive`),
    marked ``extra["inconclusive"]``, or the form :func:`~pytest_posbias.stats.inconclusive_verdict`
    gives (no interval, p = 1) in a run log written without the field."""
    if getattr(v, "inconclusive", False):
        return True
    ex = v.extra or {}
    if "inconclusive" in ex:
        return bool(ex["inconclusive"])
    return math.isnan(v.ci_low) and math.isnan(v.ci_high) and v.p_value == 1.0


def not_measured_reason(v: Verdict) -> str | None:
    """Why a gate did not measure (it neither passes nor fails on evidence), or None.

    Below the measurement floor or with no unit measured (n = 0, also for a verdict that never went
    through the floor), either mode; inconclusive in certify mode (with the first clause
    of the verdict's ``inconclusive_why``: too few units, zero spread, references that cannot show
    the effect), or inconclusive and not passed in detect mode (non-finite unit values: lost units,
    never a measured failure).
    """
    m = (v.extra or {}).get("measurement") or {}
    if m and not m.get("floor_met", True):
        return "below its measurement floor"
    if not v.n >= 1:
        return "no unit measured"
    if v.mode == "certify" and not v.passed and inconclusive(v):
        why = str((v.extra or {}).get("inconclusive_why") or "the data cannot certify compliance")
        return f"inconclusive ({re.split(r'[,:(]', why, maxsplit=1)[0].strip()})"
    if not v.passed and getattr(v, "inconclusive", False):
        return "inconclusive (unit values not measured)"
    return None


def detectable_effect(v: Verdict, *, power: float = POWER) -> float:
    """Distance past the nearest bound that the gate detects with probability ``power`` at its n
    and observed variance (one-sided test at α): d = (z_{1−α} + z_{power}) · se, with
    se = (ci_high − ci_low) / (2 z_{1−α}) from the verdict's 1 − 2α interval (normal
    approximation). Infinite when the verdict has no interval. For an exact binomial rate gate
    (a ceiling) the exact figure of :func:`pytest_posbias.stats.detectable_effect` (``kind='rate'``)
    at the verdict's n instead."""
    if not 0 < power < 1:
        raise ConfigError(f"`power` must be in (0, 1); got {power!r}")
    method = str((v.extra or {}).get("method", ""))
    if (method.startswith("exact binomial") and math.isinf(v.lower) and 0.0 <= v.upper < 1.0 and v.n >= 1
            and power > v.alpha):
        return rate_detectable_effect(kind="rate", n=int(v.n), threshold=float(v.upper), alpha=float(v.alpha),
                                       power=float(power)) - float(v.upper)
    lo, hi = float(v.ci_low), float(v.ci_high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return math.inf
    za = float(norm.isf(v.alpha))
    se = max(hi - lo, 0.0) / (2 * za)
    return float((za + norm.ppf(power)) * se)


@dataclass(frozen=True)
class PowerNote:
    """What a verdict could detect: the smallest violating value detected with 80% power
    (``detectable``), the violating value at 2× the threshold (``target``), whether the gate
    could not detect the target (``underpowered``) and the units that would (``n_needed``,
    from se ∝ 1/sqrt(n)); ``why_none`` says why ``detectable`` is infinite."""

    detectable: float
    target: float
    underpowered: bool
    n_needed: int | None
    why_none: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (infinite values as strings)."""
        return {"detectable": _num(self.detectable), "target": _num(self.target), "underpowered": self.underpowered,
                "n_needed": self.n_needed, **({"why_none": self.why_none} if self.why_none else {})}


def power_note(v: Verdict, *, power: float = POWER) -> PowerNote:
    """The verdict's :class:`PowerNote` (see :func:`detectable_effect`). The target lies twice the threshold
    past an upper bound (u + |u|: |MEG| = 0.04 for t = 0.02; the side of the estimate for a two-sided
    region), half the bound past a lower-only bound (l − |l|/2), 0.05 past a bound at 0. A detectable value
    outside the gate's value range (:attr:`~pytest_posbias.gate_registry.GateSpec.value_range`) is no
    violation the metric can take: nothing inside it is detected."""
    lower, upper = float(v.lower), float(v.upper)
    d = detectable_effect(v, power=power)
    if not (math.isfinite(upper) or math.isfinite(lower)):
        return PowerNote(math.nan, math.nan, False, None)
    target, dist = _violation(lower, upper, above=not (math.isfinite(v.estimate) and v.estimate < (lower + upper) / 2))
    side_up = math.isfinite(v.upper) and target > v.upper
    detectable = (v.upper + d) if side_up else (v.lower - d)
    under = not d <= dist
    ratio = d / dist if dist > 0 else math.inf
    need_f = v.n * ratio * ratio  # a product overflows to inf (a power would raise) at a threshold near 0
    need = math.ceil(need_f) if under and math.isfinite(need_f) and v.n > 0 else None
    if not math.isfinite(d):
        return PowerNote(math.inf, target, under, need, "no interval, so no power to detect a violation")
    spec = GATES.get(str((v.extra or {}).get("gate", "")))
    if spec is not None and not spec.value_range[0] <= detectable <= spec.value_range[1]:
        lo, hi = spec.value_range
        return PowerNote(math.inf, target, True, need, f"no violation inside the metric's range [{lo:g}, {hi:g}] "
                                                       "is detected with 80% power")
    return PowerNote(detectable, target, under, need)


@dataclass(frozen=True)
class GateDecision:
    """One gate in the run-level decision: its own decision and the adjusted one.

    ``status``: ``pass``, ``fail`` (fails the run on measured evidence), ``inconclusive`` (a detect-mode
    gate whose data could not decide: it does not fail the run, and it shows nothing) or ``not measured``;
    ``family``: ``holm`` (detect gates in the Holm family), ``iut`` (certify-type gates:
    adjusted = own), ``none`` (no adjustment chosen) or ``-`` (not measured).
    """

    nodeid: str
    own_passed: bool
    p_value: float
    p_adjusted: float
    adjusted_passed: bool
    status: str
    family: str
    why_not_measured: str | None = None
    power: PowerNote | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``p_adj``, ``adjusted_passed``, ``run_status``, ``power``)."""
        return {"p_run": _num(self.p_value), "p_adj": _num(self.p_adjusted), "adjusted_passed": self.adjusted_passed,
                "run_status": self.status, "family": self.family, "not_measured": self.why_not_measured,
                "power": self.power.to_dict() if self.power else None}


@dataclass(frozen=True)
class RunDecision:
    """The run's release decision: exit status, label, the one-line reason and every gate's part."""

    exit_code: int
    label: str
    why: str
    method: str
    alpha: float
    gates: tuple[GateDecision, ...]
    underpowered: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)
    not_run: tuple[str, ...] = ()
    stopped: str = ""
    inconclusive: tuple[str, ...] = ()  # detect-mode gates whose data could not decide (status inconclusive)

    @property
    def ship(self) -> bool:
        """True only for exit status 0."""
        return self.exit_code == SHIP

    def gate(self, nodeid: str) -> GateDecision | None:
        """The decision of the gate with this node id."""
        return next((g for g in self.gates if g.nodeid == nodeid), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the gates' parts travel with their verdict rows)."""
        return {"exit_code": self.exit_code, "label": self.label, "why": self.why, "method": self.method,
                "alpha": self.alpha, "underpowered": list(self.underpowered), "notices": list(self.notices),
                "skipped": dict(self.skipped), "not_run": list(self.not_run), "stopped": self.stopped,
                "n_gates": len(self.gates), "n_failed_own": sum(not g.own_passed for g in self.gates),
                "n_failed_run": sum(g.status == "fail" for g in self.gates),
                "n_not_measured": sum(g.status == "not measured" for g in self.gates),
                "inconclusive": list(self.inconclusive), "n_inconclusive": len(self.inconclusive)}


def simulated_notice(models: Sequence[str]) -> str | None:
    """``SIMULATED MODEL — not a release decision`` when any model is a ``sim:`` model."""
    sims = [m for m in models if str(m).startswith("sim:")]
    return f"SIMULATED MODEL — not a release decision ({', '.join(sims)})" if sims else None


def quick_notice(probes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """``QUICK SIZES — ...`` when probe sample sizes are set below the package defaults (e.g.
    ``posbias init --quick``), naming each as ``positional.groups = 12 (default 48)``."""
    from ..probes.settings import DEFAULTS

    sizes = ("groups", "items", "videos", "trials", "orderings", "equivalence_items")
    small = [f"{probe}.{key} = {value} (default {default})" for probe, table in sorted(probes.items())
             for key, value in sorted((table or {}).items())
             if key in sizes and isinstance(default := DEFAULTS.get(probe, {}).get(key), int)
             and isinstance(value, int) and not isinstance(value, bool) and value < default]
    return f"QUICK SIZES — smaller samples than a release gate uses: {', '.join(small)}" if small else None


def percentile_p_floor(n_resamples: int, n_clusters: int) -> float:
    """The smallest p-value the expanded percentile bootstrap gives: the tail share 1/(B + 1) of B
    resamples through the small-sample expansion (:class:`~pytest_posbias.stats.BootstrapResult`),
    T_{g−1}(Φ⁻¹(1/(B + 1)) / sqrt(g/(g − 1))) over g clusters."""
    return _expanded_p(1.0 / (int(n_resamples) + 1), int(n_clusters))


def resampling_notice(family_verdicts: Sequence[Verdict], *, family: int, alpha: float) -> str | None:
    """A notice when expanded-percentile bootstrap gates in Holm's family cannot fail the run on
    their own: their p-value cannot go below :func:`percentile_p_floor`, and Holm's first level is
    α/m over m gates, so where the floor lies above α/m such a gate is rejected only after others.
    Says which ``n_resamples`` lets each fail alone, or that none does (too few groups). None when no
    gate is affected. (A BCa p-value has no such floor: its acceleration moves it below 1/(B + 1).)"""
    level = alpha / max(family, 1)
    low = [(int(b), int(v.n)) for v in family_verdicts
           if (b := (v.extra or {}).get("n_resamples")) and "expanded percentile" in str((v.extra or {}).get("method"))
           and percentile_p_floor(int(b), int(v.n)) > level]
    if not low:
        return None
    floor = min(percentile_p_floor(b, g) for b, g in low)
    needs = [1.0 / float(norm.cdf(math.sqrt(g / (g - 1)) * t_dist.ppf(level, g - 1))) - 1.0 if g >= 3
             else 1.0 / level - 1.0 for _, g in low]
    fixable = [n for n in needs if n <= MAX_RESAMPLES]  # the most [tool.posbias] n_resamples accepts
    text = (f"{len(low)} bootstrap gate{'s' if len(low) != 1 else ''} cannot fail the run on "
            f"{'their' if len(low) != 1 else 'its'} own: a p-value of the expanded percentile bootstrap cannot go "
            f"below {floor:.2g} with its resamples and groups, above Holm's first level α/m = {level:.2g} over "
            f"{family} gates")
    if fixable:
        text += f"; n_resamples >= {math.ceil(max(fixable))} ([tool.posbias] n_resamples) lets "
        text += "each fail alone" if len(fixable) == len(low) else f"{len(fixable)} of them fail alone"
    if len(fixable) < len(low):
        text += f"; {len(low) - len(fixable)} have too few groups for any n_resamples"
    return text


def run_decision(verdicts: Sequence[tuple[str, Verdict]], *, multiplicity: str = "holm", alpha: float | None = None,
                 skipped: Sequence[tuple[str, str]] = (), notices: Sequence[str] = (),
                 not_run: Sequence[str] = (), stopped: str = "") -> RunDecision:
    """The run's decision over ``verdicts`` (node id, verdict) (module docstring).

    ``skipped``: (node id, reason) of skipped gate tests; ``not_run``: selected gate tests a stopped
    run never reached (``stopped`` says how). Exit status 1 when a gate fails after the adjustment;
    else 6 when a gate did not measure, a selected gate never ran, no gate reached a verdict or
    every gate was inconclusive; else 0. ``alpha`` defaults to the smallest of the verdicts' α.
    """
    if multiplicity not in MULTIPLICITY:
        raise ConfigError(f"`multiplicity` must be one of {', '.join(MULTIPLICITY)}; got {multiplicity!r}")
    al = check_alpha(alpha if alpha is not None else min((float(v.alpha) for _, v in verdicts), default=0.05),
                     "`alpha`")
    nm = [not_measured_reason(v) for _, v in verdicts]
    ps = [gate_p_value(v) for _, v in verdicts]
    holm_idx = [i for i, (_, v) in enumerate(verdicts) if nm[i] is None and v.mode == "detect"]
    # a selected gate that never ran (the run stopped early) stays in Holm's family with p = 1, a valid
    # p-value: otherwise -x, which stops at the first gate failing on its own, would adjust that gate
    # within the few gates that ran and fail true-null runs far more often than α
    # a detect gate that failed on its own enters at most at its own α (docs/concepts/statistics.md)
    family_ps = [min(ps[i], float(verdicts[i][1].alpha))
                 if not verdicts[i][1].passed and 0.0 <= float(verdicts[i][1].p_value) <= 1.0
                 else ps[i] for i in holm_idx] + [1.0] * len(not_run)
    adj: dict[int, float] = {}
    if multiplicity == "holm":
        adj = dict(zip(holm_idx, holm_adjust(family_ps)[: len(holm_idx)].tolist(), strict=True))
        notices = (*notices, resampling_notice([verdicts[i][1] for i in holm_idx], family=len(family_ps),
                                               alpha=al) or "")
    gates = []
    for i, (nid, v) in enumerate(verdicts):
        pn = power_note(v)
        if nm[i] is not None:
            gates.append(GateDecision(nid, v.passed, ps[i], math.nan, False, "not measured", "-", nm[i], pn))
            continue
        if i in adj:
            # a gate that failed on its own without a valid p-value has no adjusted one: it fails the run
            p_adj = math.nan if not v.passed and not 0.0 <= float(v.p_value) <= 1.0 else adj[i]
            ok = v.passed or p_adj > al
            family = "holm"
        else:
            p_adj, ok = ps[i], v.passed
            family = "none" if multiplicity == "none" else "iut"
        status = "fail" if not ok else "inconclusive" if inconclusive(v) else "pass"
        gates.append(GateDecision(nid, v.passed, ps[i], p_adj, ok, status, family, None, pn))
    status_count = Counter(g.status for g in gates)
    n_fail, n_nm = status_count["fail"], status_count["not measured"]
    own_fail = sum(not g.own_passed for g in gates)
    method = ("Holm step-down over the detect gates' p-values (certify-type gates: intersection-union, unadjusted)"
              if multiplicity == "holm" else "none: every gate at its own level α (no multiplicity adjustment)")
    skip_count = dict(Counter(skip_kind(reason) for _, reason in skipped))
    never = (f"{len(not_run)} selected gate test{'s' if len(not_run) != 1 else ''} never ran "
             f"({stopped or 'the run stopped before them'}): not measured") if not_run else ""
    # a selected gate skipped because the data hold none of its items measured nothing (an opt-in
    # gate not opted into was not asked for)
    no_data = [str(r) for _, r in skipped if skip_kind(r) == "no data"]
    no_data_why = (f"{len(no_data)} selected gate test{'s' if len(no_data) != 1 else ''} skipped for missing data "
                   f"(e.g. {no_data[0]}): not measured") if no_data else ""
    code = NOT_MEASURED
    if n_fail:
        code = DO_NOT_SHIP
        how = "after Holm's adjustment" if multiplicity == "holm" else "without multiplicity adjustment"
        n_cert = sum(g.status == "fail" and v.mode == "certify" for g, (_, v) in zip(gates, verdicts, strict=True))
        parts = [f"{n_fail - n_cert} of {len(gates)} gates failed on measured evidence {how}" if n_fail > n_cert
                 else "",
                 # certify: the data did not show compliance, which is not evidence of a violation
                 f"{n_cert} of {len(gates)} gates did not show compliance (certify mode)" if n_cert else "", never]
        why = "; ".join(p for p in parts if p)
    elif not_run:
        ran = ", ".join(f"{status_count[k]} {k}" for k in ("pass", "not measured") if status_count[k])
        why = never + (f"; the {len(gates)} that ran: {ran}" if gates else "; no gate reached a verdict")
    elif n_nm:
        why = f"{n_nm} of {len(gates)} gates not measured: " + "; ".join(
            sorted({f"{sum(g.why_not_measured == r for g in gates)} {r}" for r in nm if r}))
        why += f"; {no_data_why}" if no_data else ""
    elif no_data and gates:
        why = f"{no_data_why}; the {len(gates)} that ran: " + ", ".join(
            f"{status_count[k]} {k}" for k in ("pass", "inconclusive") if status_count[k])
    elif not gates and skipped:
        why = (f"no gate reached a verdict: all {len(skipped)} selected gate tests were skipped "
               f"({', '.join(f'{n} {k}' for k, n in sorted(skip_count.items()))}; e.g. {skipped[0][1]})")
    elif not gates:
        why = "no gate reached a verdict"
    elif all(g.status == "inconclusive" for g in gates):
        why = (f"no gate decided: all {len(gates)} gates were inconclusive (too few units, zero spread or "
               "no interval), which shows nothing")
    else:
        code = SHIP
        n_inc = status_count["inconclusive"]
        why = (f"all {len(gates)} gates passed the run-level decision" if not n_inc else
               f"{len(gates) - n_inc} of {len(gates)} gates passed the run-level decision and {n_inc} were "
               "inconclusive (they show nothing; named on the report's first screen)")
        if own_fail:
            why += (f" ({own_fail} failed on their own at α = {al:g} but not after the Holm adjustment over "
                    f"{len(holm_idx)} gates)")
    under = tuple(g.nodeid for g in gates if g.status == "pass" and g.power is not None and g.power.underpowered)
    return RunDecision(code, LABELS[code], why, method, al, tuple(gates), under, tuple(n for n in notices if n),
                       skip_count, tuple(not_run), stopped if not_run else "",
                       tuple(g.nodeid for g in gates if g.status == "inconclusive"))


__all__ = ["MULTIPLICITY", "GateDecision", "PowerNote", "RunDecision", "detectable_effect", "gate_p_value",
           "holm_adjust", "inconclusive", "not_measured_reason", "percentile_p_floor", "power_note", "quick_notice",
           "resampling_notice", "run_decision", "sequential_p_value", "simulated_notice"]
