"""Every invalid argument of the statistics and metrics functions is a ``ConfigError`` (``errors``)
whose message names the parameter and what it must be, in scipy's style."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_posbias import metrics as M
from pytest_posbias import stats as S

ERRORS = [
    (lambda: S.exact_interval(5, 0), "`n` must be >= 1"),
    (lambda: S.exact_interval(6, 5), "`k` must be <= `n`"),
    (lambda: S.exact_interval(-1, 5), "`k` must be a non-negative integer"),
    (lambda: S.exact_interval(1, 5, confidence_level=1.5), "`confidence_level` must be a float in (0, 1)"),
    (lambda: S.binomial_test(1, 5, 1.5), "`p0` must lie in [0, 1]"),
    (lambda: S.binomial_test(1, 5, 0.5, alternative="up"), "`alternative` must be 'greater', 'less' or 'two-sided'"),
    (lambda: S.mcnemar_exact(-1, 2), "`b` must be a non-negative integer"),
    (lambda: S.benjamini_hochberg([0.5, 1.5]), "`p_values` must all lie in [0, 1]"),
    (lambda: S.cluster_bootstrap([], rng=np.random.default_rng()), "`values` must be a non-empty 1-D array"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], rng=1), "`rng` must be a numpy.random.Generator"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], [0, 0], rng=np.random.default_rng()), "at least 2 distinct clusters"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], [0], rng=np.random.default_rng()), "`clusters` must have the same shape"),
    (lambda: S.cluster_bootstrap([1.0, 2.0], n_resamples=5, rng=np.random.default_rng()), "`n_resamples` must be an integer >= 99"),
    (lambda: S.rate_verdict(1, 10, name="x", threshold=0.1, alpha=0.7), "`alpha` must be a number in (0, 0.5)"),
    (lambda: S.mean_verdict([0.1, 0.2], name="x", threshold=0.1, sides="left", rng=np.random.default_rng()), "`sides` must be 'both', 'upper' or 'lower'"),
    (lambda: S.mean_verdict([0.1, 0.2], name="x", threshold=0.1, mode="strict", rng=np.random.default_rng()), "`mode` must be one of"),
    (lambda: S.rate_verdict(1, 10, name="x", threshold=1.5), "`threshold` must lie in [0, 1] for a rate"),
]


ERRORS += [
    (lambda: M.dpb([1, 2, 3]), "`coverage` must be a 2-D (N, P) array"),
    (lambda: M.dpb(np.zeros((0, 4))), "`coverage` must have at least one row"),
    (lambda: M.dpb([[1.0]]), "`coverage` must have at least 2 columns"),
    (lambda: M.dpb([[0.1, float("nan")]]), "`coverage` must contain only finite values"),
    (lambda: M.dpb([[0.1, -0.2]]), "`coverage` must be non-negative"),
    (lambda: M.dpb([[0.1, 0.2]], eps=-1), "`eps` must be a finite float >= 0"),
    (lambda: M.meg([[0.1, 0.2, 0.3]]), "`coverage` must have P = 4 columns for MEG"),
    (lambda: M.cyclic_orders(0), "`P` must be an integer >= 1"),
    (lambda: M.full_orders(9), "`P` must be <= 8"),
    (lambda: M.max_ngram_count("a b", 0), "`n` must be an integer >= 1"),
    (lambda: M.max_ngram_count(None), "`text` must be a str"),
    (lambda: M.repetition_rate("a b c"), "`texts` must be a sequence of strings"),
    (lambda: M.repetition_rate([]), "`texts` must contain at least one text"),
    (lambda: M.repetition_rate(["a"], tau=-1), "`tau` must be an integer >= 0"),
    (lambda: M.severity("a", finish_reason="eos"), "`finish_reason` must be None, 'stop' or 'length'"),
    (lambda: M.flip_rate([1, 2]), "`answers` must be a 2-D (N, K) array"),
    (lambda: M.flip_rate([[1]]), "`answers` must have at least one row and at least 2 columns"),
    (lambda: M.flip_rate([[0.5, 1.0]]), "`answers` must hold integer content indices"),
    (lambda: M.consensus([]), "`answers_row` must be a non-empty 1-D sequence"),
    (lambda: M.spr_margin({}), "`letter_logprobs` must be a non-empty mapping"),
    (lambda: M.spr_margin({"A": float("nan")}), "found NaN or +inf"),
    (lambda: M.spr_margin({"A": -math.inf}), "at least one letter a finite log-probability"),
    (lambda: M.fragment_coverage(None, "x"), "`reference` must be a str"),
    (lambda: M.length_matched_repetition_rate(["a"], words=0), "`words` must be an integer >= 1"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m for _, m in ERRORS])
def test_every_invalid_argument_message_names_the_argument(call, message):
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError) as exc:
        call()
    assert message in str(exc.value)
