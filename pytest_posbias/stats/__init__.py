"""Statistics core: intervals, tests and the gate verdict (docs/design.md section 5).

This module re-exports the names of :mod:`.intervals`, :mod:`.verdicts`, :mod:`.rules`,
:mod:`.share_rule` and :mod:`.power`, and holds the paired binary rule; :mod:`.paired`,
:mod:`.paired_binary` and :mod:`.sequential` are imported from their own modules.

Conventions (stated once, used everywhere):

* A gate at level α reports a two-sided (1 − 2α) confidence interval, so each of its
  bounds is a one-sided (1 − α) bound (the TOST convention: α = 0.05 gives a 90% CI).
* ``detect`` mode fails only when the CI lies wholly outside the compliance region
  (the data show a violation at level α); ``certify`` passes only when the CI lies
  wholly inside it (the data show compliance at level α, TOST for two-sided regions).
* Confidence intervals of means are cluster bootstraps over the independent unit
  (video group, question), seeded through an explicit ``numpy.random.Generator``;
  rates use exact binomial (Clopper–Pearson) bounds and tests; paired binary changes
  use the exact McNemar test at margin 0 and an exact unconditional non-inferiority test at a
  non-zero margin; the run-level decision across gates is Holm's step-down
  (:mod:`pytest_posbias.gates.decision`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import ConfigError
from .intervals import MIN_CLUSTERS as MIN_CLUSTERS
from .intervals import BootstrapResult as BootstrapResult
from .intervals import _check_alpha
from .intervals import benjamini_hochberg as benjamini_hochberg
from .intervals import binomial_test as binomial_test
from .intervals import cluster_bootstrap as cluster_bootstrap
from .intervals import exact_interval as exact_interval
from .intervals import mcnemar_exact as mcnemar_exact
from .paired_binary import EXACT_MAX_N, paired_binary_bound, paired_binary_p
from .power import detectable_effect as detectable_effect
from .rules import SkewT as SkewT
from .rules import lattice_floor as lattice_floor
from .rules import mean_verdict as mean_verdict
from .rules import null_variance_interval as null_variance_interval
from .rules import null_variance_p as null_variance_p
from .rules import rate_min_sample as rate_min_sample
from .rules import rate_verdict as rate_verdict
from .rules import skew_t as skew_t
from .share_rule import RARE_MIN_COUNT as RARE_MIN_COUNT
from .share_rule import SHARE_ALPHA_FRACTION as SHARE_ALPHA_FRACTION
from .share_rule import share_difference_bounds as share_difference_bounds
from .share_rule import share_difference_min_sample as share_difference_min_sample
from .share_rule import share_difference_rule as share_difference_rule
from .share_rule import share_difference_verdict as share_difference_verdict
from .verdicts import Verdict as Verdict
from .verdicts import _bounds as _bounds
from .verdicts import _check_mode, _decide
from .verdicts import _fmt as _fmt
from .verdicts import _region as _region
from .verdicts import inconclusive_verdict as inconclusive_verdict
from .verdicts import zero_spread_interval as zero_spread_interval


def paired_change_verdict(a: ArrayLike, b: ArrayLike, *, name: str, threshold: float = 0.0, mode: str = "detect",
                          alpha: float = 0.05, unit: str = "items", extra: Mapping[str, Any] | None = None) -> Verdict:
    """Gate on δ = rate(a) − rate(b) for paired binary outcomes (e.g. answers changed by
    PhaseFusion vs by a single pass on the same items); compliant when δ <= threshold.

    n10 = #(a=1, b=0), n01 = #(a=0, b=1), δ̂ = (n10 − n01)/n.

    * threshold 0: exact McNemar, conditional on the m = n10 + n01 discordant pairs:
      n10 ~ Bin(m, θ) and δ = (2θ − 1)·m/n, so the Clopper–Pearson (1 − 2α) interval of θ maps to
      the CI of δ; exact because H0: δ = 0 is θ = 1/2 whatever m.
    * threshold t ≠ 0: conditioning on m treats the discordance as known, which does not hold
      the size at the margin; the test is instead the exact unconditional non-inferiority test
      for paired proportions ordered by Tango's score, maximised over the nuisance p01
      (:func:`.paired_binary.paired_binary_p`; Tango's score test referred to the normal
      beyond ``EXACT_MAX_N`` pairs), and each CI bound inverts it
      (:func:`.paired_binary.paired_binary_bound`).

    A non-finite outcome in either array is a lost pair: the verdict is inconclusive and fails
    closed in both modes (counted, never read as an unchanged pair); outcomes other than 0/1 are a
    :class:`ConfigError` naming the array.
    """
    xf = np.asarray(a, dtype=float)
    yf = np.asarray(b, dtype=float)
    if xf.shape != yf.shape or xf.ndim != 1:
        raise ConfigError(f"`a` and `b` must be 1-D arrays of the same length; got {xf.shape} and {yf.shape}")
    al = _check_alpha(alpha)
    lost = ~(np.isfinite(xf) & np.isfinite(yf))
    if lost.any():  # a pair not measured on both sides is a lost unit: never scored as unchanged
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=int(xf.size), mode=mode, alpha=al,
                                    unit=unit, fail_closed=True, extra=extra,
                                    why=f"{int(lost.sum())} of {xf.size} pairs have a non-finite outcome (NaN or inf), "
                                        "and a pair that was not measured is never scored")
    for nm, v in (("a", xf), ("b", yf)):
        if not np.all((v == 0) | (v == 1)):
            raise ConfigError(f"`{nm}` must hold 0/1 outcomes; got {sorted(set(v[(v != 0) & (v != 1)].tolist()))[:5]}")
    n = int(xf.size)
    if n == 0:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=0, mode=mode, alpha=al, unit=unit,
                                    why="no paired observations", extra=extra)
    n10 = int(np.sum((xf == 1) & (yf == 0)))
    n01 = int(np.sum((xf == 0) & (yf == 1)))
    m = n10 + n01
    delta = (n10 - n01) / n
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not -1.0 < float(threshold) < 1.0:
        raise ConfigError(f"`threshold` must be a number in (-1, 1) for a difference of paired rates; "
                          f"got {threshold!r}")
    # the mode's most extreme outcome (every pair discordant towards a violation, resp. compliance): when even
    # it cannot decide, no outcome can, and the gate is inconclusive (as rate_verdict below its minimum sample)
    _check_mode(mode)
    alt, x10 = ("greater", n) if mode == "detect" else ("less", 0)
    if (binomial_test(x10, n, 0.5, alternative=alt) if threshold == 0.0 else
            paired_binary_p(x10, n - x10, n, float(threshold), alternative=alt)) >= al:
        return inconclusive_verdict(name=name, threshold=threshold, sides="upper", n=n, mode=mode, alpha=al, unit=unit,
                                    estimate=delta, extra={"n10": n10, "n01": n01, **(extra or {})},
                                    why=f"{n} pairs, too few for any outcome to "
                                        + ("show a violation" if mode == "detect" else "certify compliance"))
    ex = {"n10": n10, "n01": n01, "rate_a": float(xf.mean()), "rate_b": float(yf.mean()),
          "mcnemar_two_sided_p": mcnemar_exact(n10, n01), "method": "exact conditional (McNemar)",
          **(extra or {})}
    if threshold != 0.0:
        t = float(threshold)
        ex["method"] = ("exact unconditional non-inferiority test (Tango score, supremum over the nuisance)"
                        if n <= EXACT_MAX_N else "Tango score test (normal)")
        lo, hi = (paired_binary_bound(n10, n01, n, al, side=side, anchor=t) for side in ("lower", "upper"))
        p_detect, p_certify = (paired_binary_p(n10, n01, n, t, alternative=tail) for tail in ("greater", "less"))
    elif m == 0:  # margin 0 and no discordant pair: nothing to test
        lo = hi = 0.0
        p_detect = p_certify = 1.0
    else:
        tlo, thi = exact_interval(n10, m, confidence_level=1 - 2 * al)
        lo, hi = (2 * tlo - 1) * m / n, (2 * thi - 1) * m / n
        p_detect, p_certify = (binomial_test(n10, m, 0.5, alternative=tail) for tail in ("greater", "less"))
    return _decide(name=name, estimate=delta, ci_low=lo, ci_high=hi, lower=-math.inf, upper=float(threshold),
                   threshold=threshold, n=n, unit=unit, mode=mode, alpha=al, p_detect=p_detect, p_certify=p_certify,
                   extra=ex)
