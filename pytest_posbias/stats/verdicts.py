"""Statistics core, verdicts: the :class:`Verdict` a gate asserts on, the detect/certify decision
from an interval and its p-values, compliance regions, the zero-spread floor and the inconclusive
verdict (docs/design.md section 5). Re-exported by :mod:`pytest_posbias.stats`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ConfigError

MODES: tuple[str, ...] = ("detect", "certify")
_NUMBERS = ("estimate", "ci_low", "ci_high", "threshold", "p_value", "lower", "upper")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one gate: what the test asserts on and the report shows.

    ``lower``/``upper`` bound the compliance region (either may be infinite); the
    ``threshold`` is the number a user configured (e.g. 0.02 for |MEG| <= 0.02).
    ``p_value`` is the one-sided p-value of the mode's test: in ``detect`` mode of
    H0 "compliant", in ``certify`` mode of H0 "violating" (TOST maximum for
    two-sided regions). The CI is two-sided at 1 − 2α.
    """

    name: str
    estimate: float
    ci_low: float
    ci_high: float
    threshold: float
    n: int
    p_value: float
    passed: bool
    mode: str
    reason: str
    alpha: float = 0.05
    lower: float = -math.inf
    upper: float = math.inf
    unit: str = "instances"
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    inconclusive: bool = False

    @property
    def outcome(self) -> str:
        """``pass``, ``fail`` or ``inconclusive``: the verdict state the report counts.

        An inconclusive verdict is one whose data could not decide (too few units, a rare outcome
        too rarely expected in the sample, zero spread, non-finite unit values). Its ``passed``
        keeps the mode's conservative reading: in detect mode no violation was shown (True, except
        for non-finite values, which never pass), in certify mode compliance was not shown (False).
        """
        if self.inconclusive:
            return "inconclusive"
        return "pass" if self.passed else "fail"

    def message(self) -> str:
        """One sentence with estimate, CI, threshold, n and p (used as the failure message)."""
        return self.reason

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-ready data: NaN as None, infinities as "inf"/"-inf"."""
        d = asdict(self)
        for k in _NUMBERS:
            d[k] = _num(d[k])
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """The verdict :meth:`to_dict` wrote (unknown keys are ignored)."""
        kw = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for k in _NUMBERS:
            if k in kw:
                kw[k] = math.nan if kw[k] is None else float(kw[k])
        kw["extra"] = dict(kw.get("extra") or {})
        return cls(**kw)


def _num(v: Any) -> Any:
    """``v`` for JSON: None for None or NaN, an infinity as ``"inf"``/``"-inf"``."""
    return (None if v is None or (isinstance(v, float) and math.isnan(v)) else
            "inf" if v == math.inf else "-inf" if v == -math.inf else v)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ConfigError(f"`mode` must be one of {MODES}; got {mode!r}")


def _fmt(x: float) -> str:  # nan, inf and -inf format as themselves in either branch
    return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def interval_level(alpha: float) -> str:
    """The interval level 100(1 − 2α) in percent, with as many digits as it has (99.8 at α = 0.001),
    never rounded up to 100, which no finite interval reaches."""
    pct = 100 * (1 - 2 * alpha)
    for digits in range(10, 18):
        text = f"{pct:.{digits}g}"
        if float(text) < 100:
            return text
    return repr(pct)


def _region(lower: float, upper: float) -> str:
    if math.isinf(lower) and not math.isinf(upper):
        return f"<= {_fmt(upper)}"
    if math.isinf(upper) and not math.isinf(lower):
        return f">= {_fmt(lower)}"
    if lower == -upper:
        return f"within ±{_fmt(upper)}"
    return f"within [{_fmt(lower)}, {_fmt(upper)}]"


def _decide(*, name: str, estimate: float, ci_low: float, ci_high: float, lower: float, upper: float, threshold: float,
            n: int, unit: str, mode: str, alpha: float, p_detect: float, p_certify: float,
            extra: Mapping[str, Any] | None) -> Verdict:
    _check_mode(mode)
    at = f"at α = {alpha:g}"
    if mode == "detect":
        above, below = ci_low > upper, ci_high < lower
        passed, p = not (above or below), p_detect
        what = (f"no violation shown {at} (detect mode)" if passed else
                f"the whole CI lies {'above' if above else 'below'} the allowed region, a violation {at} (detect mode)")
    else:
        passed, p = ci_low > lower and ci_high < upper, p_certify
        what = (f"the whole CI lies inside the allowed region, compliance certified {at}" if passed else
                f"the CI is not wholly inside the allowed region, so compliance is not certified {at} (certify mode)")
    reason = (f"{name} = {_fmt(estimate)} ({interval_level(alpha)}% CI [{_fmt(ci_low)}, {_fmt(ci_high)}], "
              f"threshold {_region(lower, upper)}, n = {n} {unit}, p = {_fmt(p)}): {what}.")
    return Verdict(name=name, estimate=float(estimate), ci_low=float(ci_low), ci_high=float(ci_high),
                   threshold=float(threshold), n=int(n), p_value=float(min(1.0, max(0.0, p))), passed=bool(passed),
                   mode=mode, reason=reason, alpha=alpha, lower=float(lower), upper=float(upper), unit=unit,
                   extra=dict(extra or {}))


def region_p(p_greater: Callable[[float], float], p_less: Callable[[float], float], lower: float,
             upper: float) -> tuple[float, float]:
    """(p_detect, p_certify) of the region [lower, upper] from one-sided tests, ``p_greater(b)`` of
    H0 θ <= b and ``p_less(b)`` of H0 θ >= b: detect takes the smaller p of a violation past either
    finite bound, certify the larger of the two one-sided p-values (TOST)."""
    up, lo = math.isfinite(upper), math.isfinite(lower)
    return (min(p_greater(upper) if up else 1.0, p_less(lower) if lo else 1.0),
            max(p_less(upper) if up else 0.0, p_greater(lower) if lo else 0.0))


def _bounds(threshold: float, sides: str) -> tuple[float, float]:
    if isinstance(threshold, bool) or not (isinstance(threshold, (int, float)) and math.isfinite(threshold)):
        raise ConfigError(f"`threshold` must be a finite number; got {threshold!r}")
    if sides == "both":
        if threshold < 0:
            raise ConfigError(f"`threshold` must be >= 0 for a two-sided region; got {threshold!r}")
        return -float(threshold), float(threshold)
    if sides == "upper":
        return -math.inf, float(threshold)
    if sides == "lower":
        return float(threshold), math.inf
    raise ConfigError(f"`sides` must be 'both', 'upper' or 'lower'; got {sides!r}")


def zero_spread_interval(value: float, n: int, *, lower: float, upper: float, alpha: float,
                         value_range: tuple[float, float]) -> tuple[float, float, float, float]:
    """The (1 − 2α) interval and p-values for n independent units that all took the same ``value``.

    Zero spread gives no variance to build an interval from, so the floor is the exact worst case
    over every distribution on ``value_range = (lo, hi)``: the sample is n draws equal to ``value``,
    which has probability at most q^n when the distribution puts mass q on it. A mean μ above the
    value needs the rest of the mass above it, q <= (hi − μ)/(hi − value); so μ is excluded at
    level α exactly when ((hi − μ)/(hi − value))^n < α, which gives the upper bound
    value + (1 − α^(1/n))·(hi − value), and the lower bound value − (1 − α^(1/n))·(value − lo).
    For 0/1 units this is the Clopper–Pearson bound of 0/n or n/n (1 − α^(1/n)).

    Returns (ci_low, ci_high, p_detect, p_certify): p_detect of H0 "inside [lower, upper]",
    p_certify of H0 "outside" (the larger of the two one-sided p-values, TOST).
    """
    lo, hi = (float(value_range[0]), float(value_range[1]))
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi and lo <= value <= hi):
        raise ConfigError(f"`value_range` must be a finite (lo, hi) with lo < hi that holds the value {value!r}; "
                          f"got {value_range!r}")
    shrink = 1.0 - alpha ** (1.0 / n)
    ci_low, ci_high = value - shrink * (value - lo), value + shrink * (hi - value)

    def p_at_least(mu: float) -> float:  # H0: mean >= mu, observed all equal to value
        return 1.0 if mu <= value else 0.0 if mu >= hi else ((hi - mu) / (hi - value)) ** n

    def p_at_most(mu: float) -> float:  # H0: mean <= mu
        return 1.0 if mu >= value else 0.0 if mu <= lo else ((mu - lo) / (value - lo)) ** n

    return ci_low, ci_high, *region_p(p_at_most, p_at_least, lower, upper)


def inconclusive_verdict(*, name: str, threshold: float, sides: str, n: int, mode: str, alpha: float, unit: str,
                         why: str, estimate: float = math.nan, extra: Mapping[str, Any] | None = None,
                         fail_closed: bool = False) -> Verdict:
    """A verdict when the data cannot decide: ``inconclusive`` is set, the CI is nan and p = 1, and
    ``passed`` the mode's conservative reading (:attr:`Verdict.outcome`); with ``fail_closed``
    (non-finite unit values) False in both modes."""
    lower, upper = _bounds(threshold, sides)
    passed = mode == "detect" and not fail_closed
    what = ("the gate does not pass in either mode" if fail_closed else
            "no violation can be shown" if passed else "compliance cannot be certified")
    reason = (f"{name}: inconclusive, {why} (n = {n} {unit}), so {what} at α = {alpha:g} ({mode} mode); "
              f"threshold {_region(lower, upper)}.")
    return Verdict(name=name, estimate=estimate, ci_low=math.nan, ci_high=math.nan, threshold=float(threshold),
                   n=int(n), p_value=1.0, passed=passed, mode=mode, reason=reason, alpha=alpha, lower=lower,
                   upper=upper, unit=unit, extra={**(extra or {}), "inconclusive_why": why}, inconclusive=True)
