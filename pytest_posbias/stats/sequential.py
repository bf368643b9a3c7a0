"""The group-sequential design the suites use: four planned looks, Lan–DeMets O'Brien–Fleming α
spending, exact binomial tests for rates and t-tests for means at each look's spent level, a
non-binding futility stop (:func:`gsd_step`, :func:`gsd_decide`), and the
:class:`SequentialDecision` it returns.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as _st
from scipy.optimize import brentq

from ..errors import ConfigError
from .intervals import MIN_CLUSTERS, _check_alpha, binomial_test, exact_interval
from .rules import MIN_T_UNITS, T_METHODS, lattice_floor, rate_min_sample, t_statistic
from .rules import flat as is_flat
from .verdicts import region_p, zero_spread_interval


def violation_alternative(lower: float, upper: float, estimate: float) -> float:
    """The futility rule's alternative θ1: a violation as far past the violated bound as the
    bound lies from zero, always on the *violating* side of the region.

    * upper bound only (rates, x <= t): θ1 = 2t (``t + |t|``; ``t + 0.05`` when t = 0);
    * lower bound only (a floor, x >= f): θ1 = f/2 (``f − |f|/2``: halfway from the floor to 0;
      ``f − 0.05`` when f = 0);
    * two-sided (|x| <= t): θ1 = ±2t on the side of the current estimate (``±0.05`` when t = 0).

    Futility stops a detect gate with PASS only when even θ1 could no longer be shown by the last
    look, so θ1 must violate the region.
    """
    if not (math.isfinite(upper) or math.isfinite(lower)):
        raise ConfigError("a region with no finite bound has no violation to look for")
    return _violation(lower, upper, above=estimate >= (lower + upper) / 2)[0]


def _violation(lower: float, upper: float, *, above: bool) -> tuple[float, float]:
    """θ1 of :func:`violation_alternative` and its distance past the violated bound (a finite bound
    given); ``above`` picks the side of a two-sided region."""
    up = math.isfinite(upper)
    if up and (above or not math.isfinite(lower)):
        dist = abs(upper) or 0.05
        return upper + dist, dist
    dist = (abs(lower) if up else abs(lower) / 2) if lower != 0 else 0.05
    return lower - dist, dist


@dataclass
class SequentialDecision:
    """Where a sequential gate stopped and why."""

    passed: bool
    stopped_at: int
    n_max: int
    ci_low: float
    ci_high: float
    estimate: float
    p_value: float
    reason: str
    looks: list[int] = field(default_factory=list)
    method: str = ""
    inconclusive: bool = False  # the data could not decide (too few units, zero spread, non-finite values)


def obf_spending(tau: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: α(τ) = 2 − 2Φ(z_{1−α/2} / sqrt(τ)), α(1) = α."""
    if tau <= 0:
        return 0.0
    return float(2 - 2 * _st.norm.cdf(_st.norm.ppf(1 - alpha / 2) / math.sqrt(min(1.0, tau))))


def gsd_boundaries(fractions: Sequence[float], alpha: float) -> list[float]:
    """One-sided efficacy boundaries c_1..c_K on the z scale for looks at information fractions
    ``fractions`` (increasing, ending at 1), spending α with :func:`obf_spending`:
    P(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k >= c_k) = α(τ_k) − α(τ_{k−1}) under H0, with
    corr(Z_i, Z_j) = sqrt(τ_i/τ_j) (Jennison & Turnbull 2000, ch. 7)."""
    return list(_gsd_boundaries(tuple(round(float(f), 12) for f in fractions), float(alpha)))


# Below this α spent at a look, the quasi-Monte Carlo normal CDF (absolute error about 1e-5) cannot
# resolve it, and the boundary is solved by recursive numerical integration instead.
QMC_RESOLUTION = 1e-5


def _crossing_probability(taus: Sequence[float], cs: Sequence[float], c: float, points: int = 1201) -> float:
    """P(Z_1 < c_1, …, Z_{k−1} < c_{k−1}, Z_k >= c) under H0, k = len(cs) + 1, by recursive numerical
    integration of Z's sub-density over the continuation region (Armitage, McPherson & Rowe 1969;
    Jennison & Turnbull 2000, ch. 19): given Z_{i−1} = z, Z_i·sqrt(τ_i) = z·sqrt(τ_{i−1}) + N(0, τ_i − τ_{i−1}).
    The normal tail is taken directly, so the probability keeps its relative precision at any size."""
    z = np.linspace(-10.0, cs[0], points)
    dens = _st.norm.pdf(z)
    for i in range(1, len(cs) + 1):
        root_d = math.sqrt(taus[i] - taus[i - 1])
        if i == len(cs):
            tail = _st.norm.sf((c * math.sqrt(taus[i]) - z * math.sqrt(taus[i - 1])) / root_d)
            return float(np.trapezoid(dens * tail, z))
        y = np.linspace(-10.0, cs[i], points)
        kern = _st.norm.pdf((y[:, None] * math.sqrt(taus[i]) - z[None, :] * math.sqrt(taus[i - 1])) / root_d)
        dens = np.trapezoid(kern * dens[None, :], z, axis=1) * math.sqrt(taus[i]) / root_d
        z = y
    raise AssertionError("unreachable: the last look returns")  # pragma: no cover


@functools.lru_cache(maxsize=256)
def _gsd_boundaries(taus: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """:func:`gsd_boundaries`, cached: the boundaries depend only on the design. The α spent at a
    look is solved with the QMC normal CDF where it resolves it, else (a small α) with
    :func:`_crossing_probability`, from the spending's normal tail taken directly."""
    cs: list[float] = []
    spent = spent_tail = 0.0
    for k, tau in enumerate(taus):
        target = obf_spending(tau, alpha) - spent
        # the same spending from the normal tail: 2 − 2Φ(x) underflows to 0 at a small α
        tail = 2 * float(_st.norm.sf(_st.norm.isf(alpha / 2) / math.sqrt(min(1.0, tau)))) - spent_tail
        spent += target
        spent_tail += tail
        if k == 0:
            c = float(_st.norm.isf(target if target >= 1e-12 else tail))
        elif target < QMC_RESOLUTION:
            def g(c: float, tail: float = tail, head: tuple[float, ...] = taus[: k + 1]) -> float:
                return math.log(max(_crossing_probability(head, cs, c), 1e-300)) - math.log(tail)

            c = float(brentq(g, 0.0, 40.0, xtol=1e-6))
        else:
            idx = list(range(k + 1))
            cov = np.array([[math.sqrt(min(taus[i], taus[j]) / max(taus[i], taus[j])) for j in idx] for i in idx])
            mvn_prev = _st.multivariate_normal(mean=np.zeros(k), cov=cov[:k, :k], seed=0)
            p_prev = (float(mvn_prev.cdf(np.array(cs), rng=np.random.default_rng(0)))
                      if k > 1 else float(_st.norm.cdf(cs[0])))
            mvn = _st.multivariate_normal(mean=np.zeros(k + 1), cov=cov, seed=0)

            def f(c: float, p_prev: float = p_prev, mvn: Any = mvn, target: float = target) -> float:
                # a fixed QMC seed: the same design always gets the same boundaries
                return p_prev - float(mvn.cdf(np.array([*cs, c]), rng=np.random.default_rng(0))) - target

            c = float(brentq(f, 0.0, 8.0, xtol=1e-6))
        cs.append(c)
    return tuple(cs)


MIN_MEAN_UNITS = MIN_T_UNITS  # a mean gate decides only from this many units on (t-intervals from fewer are unreliable)


def gsd_sizes(n_max: int, looks: int) -> list[int]:
    """Planned look sizes: ``looks`` equally spaced analyses ending at ``n_max``."""
    return sorted({max(1, math.ceil(n_max * k / looks)) for k in range(1, looks + 1)})


def gsd_step(x: ArrayLike, *, look: int, n_max: int, looks: int = 3, lower: float, upper: float, mode: str,
             alpha: float, kind: str, futility: float = 0.10, theta1: float | None = None,
             null_variance: bool = False, rule: str = "t", lattice_step: float | None = None,
             value_range: tuple[float, float] | None = None, certify_from: int = 0) -> SequentialDecision | None:
    """One analysis of the group-sequential design on the units ``x`` gathered so far.

    Returns the decision when this look stops the gate (always at the last look), else None.
    ``kind``: ``rate`` (0/1 units: exact binomial tests at the look's nominal level 1 − Φ(c_k)) or
    ``mean`` (the t ``rule`` of :func:`~.rules.t_statistic` at the same levels; ``null_variance``, for
    Student's t only: :func:`~.rules.null_variance_interval`, benchmarked and not used by the gates).
    A mean sample with zero spread (every unit equal) has no variance for a t interval: with the
    units' ``value_range`` it is decided at the look's level on the exact worst-case floor of
    :func:`~.verdicts.zero_spread_interval` (a flat sample at look k has probability q^{n_k} < a_k
    under any null the floor excludes, and a sample flat at a later look was flat at the earlier
    ones, so these decisions keep the design's size under max a_k <= α, in either mode); without it
    a certify-mode gate is inconclusive and a detect-mode sample wholly past a bound fails.
    ``certify_from``: in certify mode no look with fewer units passes (a gate whose rule does not
    hold its size on smaller samples); at the last look below it the gate does not pass.
    Early FAIL in detect mode needs the look's one-sided test of "compliant" to reject at its spent
    level, so the false-failure rate stays <= α; a PASS may stop early when the repeated CI lies
    inside the region or when the conditional power to show a violation of size θ1 (default:
    :func:`violation_alternative`) by the last look drops below ``futility`` (non-binding) while the
    estimate so far lies inside the region (never on data past a bound). In
    certify mode a PASS needs the repeated CI wholly inside the region. A rate ceiling whose maximum
    sample (or the units measured at its last look, lost units left out) is below
    :func:`~.rules.rate_min_sample` at the last look's level, where no outcome could decide, is
    inconclusive at its last look (as the fixed design below its minimum sample).
    """
    xs = np.asarray(x, dtype=float)
    alpha = _check_alpha(alpha)
    for name, v in (("n_max", n_max), ("looks", looks)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"`{name}` must be an integer >= 1; got {v!r}")
    if mode not in ("detect", "certify"):
        raise ConfigError(f"`mode` must be 'detect' or 'certify'; got {mode!r}")
    if kind not in ("rate", "mean"):
        raise ConfigError(f"`kind` must be 'rate' or 'mean'; got {kind!r}")
    if rule not in T_METHODS:
        raise ConfigError(f"`rule` must be one of {', '.join(T_METHODS)}; got {rule!r}")
    sizes = gsd_sizes(n_max, looks)
    k = min(look, len(sizes) - 1)
    cs = gsd_boundaries([s_ / n_max for s_ in sizes], alpha)
    a_k = float(_st.norm.sf(cs[k]))
    last = k == len(sizes) - 1
    n_k = int(xs.size)
    method = "group-sequential (OBF)"
    if n_k and not np.all(np.isfinite(xs)):  # a lost unit that reached the rule: stop, pass in neither mode
        bad = int(np.count_nonzero(~np.isfinite(xs)))
        return SequentialDecision(False, n_k, n_max, math.nan, math.nan, math.nan, 1.0,
                                  f"inconclusive: {bad} of {n_k} unit values are not finite (NaN or inf), and a unit "
                                  "that was not measured is never scored, so the gate does not pass in either mode",
                                  sizes[: k + 1], method, inconclusive=True)
    if kind == "rate" and mode == "detect" and math.isfinite(upper) and not lower > 0:
        n_min = rate_min_sample(threshold=min(max(upper, 0.0), 1.0), mode=mode, alpha=float(_st.norm.sf(cs[-1])))
        if sizes[-1] < n_min or (last and 0 < n_k < n_min):
            if not last:
                return None
            many = f"at most {sizes[-1]}" if sizes[-1] < n_min else f"{n_k}"
            return SequentialDecision(True, n_k, n_max, math.nan, math.nan, float(xs.mean()) if n_k else math.nan,
                                      1.0, f"inconclusive: {many} units, fewer than the {n_min} below "
                                           "which no outcome could show a violation at the last look's level",
                                      sizes[: k + 1], method, inconclusive=True)
    flat = (kind == "mean" and n_k > 1 and is_flat(xs)
            and (value_range is not None or not (mode == "detect" and (xs[0] > upper or xs[0] < lower))))
    # the floor is exact at any size, so a flat sample with a value range needs only the fixed
    # design's minimum of independent units, not the t interval's
    need = MIN_CLUSTERS if flat and value_range is not None else MIN_MEAN_UNITS
    if n_k == 0 or (kind == "mean" and n_k < need) or (flat and value_range is None):
        if not last:
            return None
        what = "no violation can be shown" if mode == "detect" else "compliance cannot be certified"
        why = ("inconclusive: no units to decide on" if n_k == 0 else
               f"inconclusive: zero spread (every unit equals {xs[0]:.4g}), and an interval of zero width says "
               f"nothing about the units not drawn, so {what}" if flat and value_range is None else
               f"inconclusive: fewer than {need} units, too few for an interval, so {what}" if flat else
               f"inconclusive: fewer than {need} units, too few for a t-based interval, so {what}")
        est0 = float(xs.mean()) if n_k else math.nan
        return SequentialDecision(mode == "detect", n_k, n_max, math.nan, math.nan, est0, 1.0, why, sizes[: k + 1],
                                  method, inconclusive=True)
    est = float(xs.mean())
    if theta1 is None:
        theta1 = violation_alternative(lower, upper, est)
    floor = max(lattice_floor(b, lattice_step) for b in (lower, upper)) if kind == "mean" and rule != "t" else 0.0
    if flat:  # with the value range: the exact worst-case floor at the look's level
        assert value_range is not None
        L, U, p_det, p_cert = zero_spread_interval(est, n_k, lower=lower, upper=upper, alpha=a_k,
                                                   value_range=value_range)
        sd = 0.0
        method += ", zero spread: exact worst-case floor"
    elif kind == "rate":
        succ = round(float(xs.sum()))
        if 1 - 2 * a_k < 1.0:
            L, U = exact_interval(succ, n_k, confidence_level=1 - 2 * a_k)
        else:  # a level 1 − 2a_k that rounds to 1 (a small α): the Clopper–Pearson bounds from the beta tails
            L = float(_st.beta.ppf(a_k, succ, n_k - succ + 1)) if succ > 0 else 0.0
            U = float(_st.beta.isf(a_k, succ + 1, n_k - succ)) if succ < n_k else 1.0

        def binom_p(alternative: str) -> Callable[[float], float]:
            return lambda b: binomial_test(succ, n_k, min(max(b, 0.0), 1.0), alternative=alternative)

        p_det, p_cert = region_p(binom_p("greater"), binom_p("less"), lower, upper)
        sd = math.sqrt(theta1 * (1 - theta1)) if 0 < theta1 < 1 else 0.5
    elif rule != "t" and (float(np.ptp(xs)) > 0 or floor > 0):
        # zero spread reaches here only past a bound in detect mode with a floor; without one the
        # plain branch below fails it closed. Certify takes each rule's own p-value (with a floor or
        # two rules, not 1 − the detect side's, which takes the smaller p of the hull)
        sk = t_statistic(xs, floor=floor, rule=rule)  # n_k >= MIN_MEAN_UNITS
        sd = sk.sd
        L, U = sk.interval(a_k)
        p_det, p_cert = region_p(sk.p_greater, sk.p_less, lower, upper)
    else:
        # the t test, with ``null_variance`` the variance taken at the tested bound, s0² = s² + (x̄ − bound)²,
        # and its inverted interval x̄ ± q·s/√(n − q²) (:func:`~.rules.null_variance_interval`)
        df = max(n_k - 1, 1)
        sd = float(xs.std(ddof=1)) if n_k > 1 else math.inf
        q = float(_st.t.isf(a_k, df))
        nv = 1.0 if null_variance else 0.0
        if 0 < sd < math.inf and n_k > nv * q * q:
            half_k = q * sd / math.sqrt(n_k - nv * q * q)
            L, U = est - half_k, est + half_k
        else:
            L, U = (-math.inf, math.inf) if sd != 0 else (est, est)

        def t_null(bound: float, side: str) -> float:
            if sd == 0 and math.isfinite(bound):  # every unit equal (past a bound: detect fails closed)
                return 0.0 if (est > bound if side == "greater" else est < bound) else 1.0
            if not (math.isfinite(bound) and 0 < sd < math.inf):
                return 1.0
            z = (est - bound) / math.sqrt((sd * sd + nv * (est - bound) ** 2) / n_k)
            return float(_st.t.sf(z, df) if side == "greater" else _st.t.cdf(z, df))

        p_up, p_lo = t_null(upper, "greater"), t_null(lower, "less")
        p_det = min(p_up, p_lo)
        # certify: the other tail of the same statistic
        p_cert = max((1 - p_up) if math.isfinite(upper) else 0.0, (1 - p_lo) if math.isfinite(lower) else 0.0)
    outside = upper < L or lower > U
    inside = lower < L and upper > U and not (mode == "certify" and n_k < certify_from)
    futile = False
    # futility stops only while the estimate lies inside the region: past a bound the data already
    # point at a violation, and θ1 can lie nearer the bound than they do (a small threshold), where a
    # conditional power computed at θ1 would pass a model whose units are violating
    if mode == "detect" and not outside and not inside and not last and lower <= est <= upper and 0 < sd < math.inf:
        # conditional power: P(the last look's CI ends outside the region | data so far, mean θ1), normal
        m = max(sizes[-1] - n_k, 0)
        mean_final = (n_k * est + m * theta1) / sizes[-1]
        sd_final = max(sd * math.sqrt(m) / sizes[-1], 1e-12)
        half = cs[-1] * sd / math.sqrt(sizes[-1])
        cp = ((float(_st.norm.sf((upper + half - mean_final) / sd_final)) if math.isfinite(upper) else 0.0)
              + (float(_st.norm.cdf((lower - half - mean_final) / sd_final)) if math.isfinite(lower) else 0.0))
        futile = cp < futility
    if not (outside or inside or futile or last):
        return None
    # the repeated p-value: <= α exactly when the look's boundary is crossed
    p = min(1.0, (p_det if mode == "detect" else p_cert) * alpha / a_k)
    if mode == "detect":
        passed = not outside
        why = ("the repeated CI lies wholly outside the allowed region" if outside else
               "the repeated CI lies wholly inside the allowed region" if inside else
               f"futility: a violation of {theta1:.3g} is unlikely to be shown by n = {sizes[-1]} "
               f"(conditional power < {futility:g})" if futile else
               "no violation shown at the last look")
    else:
        passed = inside
        why = ("the repeated CI lies wholly inside the allowed region" if inside else
               "the repeated CI lies wholly outside the allowed region" if outside else
               "compliance not shown at the last look")
    return SequentialDecision(passed, n_k, n_max, L, U, est, p, why, sizes[: k + 1], method)


def gsd_decide(x: ArrayLike, *, n_max: int, looks: int = 3, lower: float, upper: float, mode: str, alpha: float,
               kind: str, futility: float = 0.10, theta1: float | None = None,
               null_variance: bool = False, rule: str = "t", lattice_step: float | None = None,
               value_range: tuple[float, float] | None = None, certify_from: int = 0) -> SequentialDecision:
    """Run :func:`gsd_step` at each planned look over the units ``x`` (in arrival order)."""
    xs = np.asarray(x, dtype=float)  # the last look always decides
    return next(filter(None, (gsd_step(xs[:n_k], look=k, n_max=n_max, looks=looks, lower=lower, upper=upper, mode=mode,
                                       alpha=alpha, kind=kind, futility=futility, theta1=theta1,
                                       null_variance=null_variance, rule=rule, lattice_step=lattice_step,
                                       value_range=value_range, certify_from=certify_from)
                              for k, n_k in enumerate(gsd_sizes(n_max, looks)))))


def gsd_best_stop(*, n_max: int, looks: int, kind: str, lower: float, upper: float, mode: str, alpha: float,
                  value_range: tuple[float, float], rule: str = "t", lattice_step: float | None = None,
                  certify_from: int = 0) -> int:
    """The fewest units on which the design passes the gate (:func:`gsd_step` at each look):
    ``posbias plan``'s best case.

    It is the earliest look that passes one of the samples most favourable to a pass, built afresh at
    each look's size: 0/1 units all 0 under a rate ceiling (all 1 above a floor); mean units all at the
    allowed value farthest from the bounds (a zero-spread sample, decided on the exact floor), or at the
    middle of the allowed region ± 1e-6 of the value range (the repeated CI at its narrowest) or ± as
    much as the range allows (the futility stop at its earliest: the more spread, the less power left
    to show a violation), half the units on each side and an odd one at the middle, so the mean is the
    middle at every look. A sample past a bound can stop earlier, with a failure."""
    lo_r, hi_r = value_range
    lo, hi = max(lower, lo_r), min(upper, hi_r)
    mid = (lo + hi) / 2
    far = mid if math.isfinite(lower) == math.isfinite(upper) else hi_r if math.isfinite(lower) else lo_r

    def samples(n: int) -> list[np.ndarray]:
        if kind == "rate":
            return [np.full(n, 0.0 if math.isfinite(upper) else 1.0)]
        sign = np.r_[np.tile([1.0, -1.0], n // 2), np.zeros(n % 2)]
        return [np.full(n, far), *(mid + h * sign for h in (1e-6 * (hi_r - lo_r), min(mid - lo_r, hi_r - mid)))]

    for k, n_k in enumerate(gsd_sizes(n_max, looks)):
        for x in samples(n_k):
            d = gsd_step(x, look=k, n_max=n_max, looks=looks, lower=lower, upper=upper, mode=mode, alpha=alpha,
                         kind=kind, rule=rule, lattice_step=lattice_step,
                         value_range=value_range if kind == "mean" else None, certify_from=certify_from)
            if d is not None and d.passed and not d.inconclusive:
                return n_k
    return n_max
