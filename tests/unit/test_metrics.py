"""Metrics against hand-worked cases from the papers and property tests (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from pytest_posbias import metrics as M
from pytest_posbias.errors import ConfigError

PUPPIES = (
    "The puppies sit in the corner, facing each other, with the bowl now empty. One puppy starts to move "
    "towards the other, and they engage in playful behavior, nuzzling and rolling around. The video continues "
    "with the puppies sitting in the corner, facing each other, and then moving towards the bowl. One puppy "
    "drinks from the bowl while the other watches. They then sit back in the corner, facing each other, and "
    "continue their playful interaction. The video concludes with the puppies sitting in the corner, facing "
    "each other, and then moving towards the bowl. One puppy starts to drink from the bowl while the other "
    "watches. They then sit back in the corner, facing each other, and continue their playful interaction."
)


def test_puppies_paragraph_repeats_its_5gram():
    # VideoSTF appendix C.3: "in the corner, facing each other" appears five times.
    assert PUPPIES.count("in the corner, facing each other") == 5
    assert M.max_ngram_count(PUPPIES, 5) == 5
    assert M.repetition_rate([PUPPIES]) == 1.0
    assert M.severity(PUPPIES) == "severe"  # max 5-gram count 5 > 4


def test_max_ngram_count_short_text_is_zero():
    assert M.max_ngram_count("one two three four", 5) == 0
    assert M.max_ngram_count("a b c d e", 5) == 1


def test_repetition_rate_threshold_tau():
    texts = ["a b c d e a b c d e", "a b c d e f g h", "x y z x y z x y z w v"]
    # counts: 2, 1, 1 (5-grams of the third are all distinct? "x y z x y" appears twice)
    counts = [M.max_ngram_count(t, 5) for t in texts]
    assert counts == [2, 1, 2]
    assert M.repetition_rate(texts) == pytest.approx(2 / 3)
    assert M.repetition_rate(texts, tau=2) == 0.0


def test_newsroom_jump_case():
    # summary "x x y" against article "x x x y": the scan jumps past the first match,
    # so the fragments are 2 and 1, not one fragment of 3.
    frags = M.fragments("x x y", "x x x y")
    assert [f.length for f in frags] == [2, 1]
    assert frags[0] == M.FragmentMatch(0, 0, 2)
    assert frags[1] == M.FragmentMatch(2, 3, 1)
    assert M.fragment_coverage("x x y", "x x x y") == 1.0


def test_fragment_coverage_partial_and_punctuation():
    # "a b c d" vs "a b z d": fragments "a b" and "d" -> 3 of 4 reference tokens
    assert M.fragment_coverage("a b c d", "a b z d") == pytest.approx(0.75)
    # punctuation marks are tokens; case is folded
    assert M.fragment_tokens("Obama visits Paris.") == ["obama", "visits", "paris", "."]
    assert M.fragment_coverage("Obama visits Paris.", "obama visits paris") == pytest.approx(3 / 4)
    assert M.fragment_coverage("", "anything") == 0.0
    assert M.fragment_coverage("a b", "") == 0.0


def test_dpb_meg_hand_worked():
    # P = 2: alpha = (-1, 1)
    assert M.dpb([[1.0, 0.0]]) == pytest.approx(-1.0, abs=1e-7)
    assert M.dpb([[0.0, 0.5]]) == pytest.approx(1.0, abs=1e-7)
    # P = 4: alpha = (-1, -1/3, 1/3, 1)
    c = [[0.8, 0.4, 0.2, 0.6]]
    assert M.dpb(c) == pytest.approx((-0.8 - 0.4 / 3 + 0.2 / 3 + 0.6) / 2.0)
    assert M.meg(c) == pytest.approx((0.4 + 0.2) / 2 - (0.8 + 0.6) / 2)
    c2 = [[0.2, 0.6, 0.6, 0.2], [0.8, 0.4, 0.2, 0.6]]
    assert M.meg_per_instance(c2) == pytest.approx([0.4, -0.4])
    assert M.meg(c2) == pytest.approx(0.0)
    assert M.dpb_per_instance(c2)[0] == pytest.approx(0.0)
    # all-zero row: DPB is 0 thanks to eps
    assert M.dpb([[0, 0, 0, 0]]) == 0.0


def test_position_weights_match_eq3():
    assert M.position_weights(2) == pytest.approx([-1, 1])
    assert M.position_weights(4) == pytest.approx([-1, -1 / 3, 1 / 3, 1])


def test_orders():
    assert M.cyclic_orders(4) == [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)]
    # each video sits at each slot exactly once
    slots = np.array(M.cyclic_orders(4))
    for v in range(4):
        assert sorted(np.argwhere(slots == v)[:, 1].tolist()) == [0, 1, 2, 3]
    assert len(M.full_orders(4)) == 24
    assert M.full_orders(2) == [(0, 1), (1, 0)]


def test_flip_rate_refuses_unparsed_answers():
    """A negative ("no parseable answer") code is a ConfigError: a row of lost answers is not a stable item."""
    with pytest.raises(ConfigError, match="no parseable answer"):
        M.flip_rate([[-1, -1], [0, 0]])


def test_flip_rate_and_consensus_ties():
    assert M.flip_rate([[0, 0, 0], [0, 1, 0], [2, 2, 2]]) == pytest.approx(1 / 3)
    assert M.consensus([2, 1, 2, 1]) == 1  # tie -> lowest index
    assert M.consensus([3, 3, 0]) == 3
    assert M.consensus([4, 0, 4, 0, 1]) == 0
    assert M.consensus([-1, 2, -1, -1]) == 2  # unparsed answers never win over a real one
    assert M.consensus([-1, -1]) == -1


def test_spr_margin_renormalises_over_live_letters():
    lp = {"A": math.log(0.5), "B": math.log(0.3), "C": math.log(0.2)}
    assert M.spr_margin(lp) == pytest.approx(0.2)
    # mass 0.6 over two letters -> 2/3 and 1/3 after renormalisation
    assert M.spr_margin({"A": math.log(0.4), "B": math.log(0.2)}) == pytest.approx(1 / 3)
    assert M.spr_margin({"A": 0.0, "B": -math.inf}) == pytest.approx(1.0)
    assert M.spr_margin({"A": -2.0}) == 1.0


def test_repetition_intensity_and_entropy_hand_worked():
    assert M.repetition_intensity("a a a b") == pytest.approx(0.5)
    assert M.repetition_intensity("a b c") == 0.0
    assert M.repetition_intensity("") == 0.0
    assert M.repetition_intensity("a b a b", n=2) == pytest.approx(1 - 2 / 3)
    assert M.information_entropy("a a b b") == pytest.approx(0.5)  # H = 1 bit, log2(4) = 2
    assert M.information_entropy("a b c d") == pytest.approx(1.0)
    assert M.information_entropy("a a a a") == 0.0
    assert M.information_entropy("a") == 0.0


def test_severity_classes():
    assert M.severity("a short benign answer with nothing repeated") == "benign"
    assert M.severity("a b c d e x a b c d e") == "ordinary"
    assert M.severity("a b c d e x a b c d e", finish_reason="length") == "severe"
    assert M.severity(" ".join(["a b c d e"] * 5)) == "severe"


def test_information_density():
    # words: the, red, circle, moves, the, red, circle -> content {red, circle, moves} = 3 of 7
    assert M.information_density("The red circle moves. The red circle!") == pytest.approx(300 / 7)
    assert M.information_density("") == 0.0


def test_length_matched_rr():
    texts = ["a b c d e a b c d e extra", "short text", "p q r s t u v w x y"]
    rr, kept = M.length_matched_repetition_rate(texts, words=10)
    assert kept == 2
    assert rr == pytest.approx(0.5)
    rr2, kept2 = M.length_matched_repetition_rate(texts, words=100)
    assert kept2 == 0 and math.isnan(rr2)


# --------------------------------------------------------------------------- properties

coverage_rows = arrays(
    float, st.tuples(st.integers(1, 6), st.sampled_from([2, 3, 4])),
    elements=st.floats(0.01, 1.0, allow_nan=False),
)


@settings(max_examples=200, deadline=None)
@given(coverage_rows, st.floats(0.05, 20.0))
def test_dpb_bounded_and_scale_invariant(cov, scale):
    d = M.dpb(cov)
    assert -1.0 - 1e-9 <= d <= 1.0 + 1e-9
    # exactly invariant without eps; eps = 1e-8 perturbs it only relative to the row sums
    assert M.dpb(cov * scale, eps=0) == pytest.approx(M.dpb(cov, eps=0), abs=1e-12)
    assert M.dpb(cov * scale) == pytest.approx(d, abs=1e-8 / (min(1.0, scale) * cov.sum(axis=1).min()) + 1e-12)


@settings(max_examples=200, deadline=None)
@given(coverage_rows)
def test_dpb_reversed_columns_is_negative(cov):
    assert M.dpb(cov[:, ::-1]) == pytest.approx(-M.dpb(cov), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(arrays(float, st.tuples(st.integers(1, 6), st.just(2)), elements=st.floats(0, 1)))
def test_meg_symmetric_in_slots_is_zero(half):
    # slots 1 = 4 and 2 = 3 -> symmetric, and middle = edge on average when the
    # matrix is symmetric under swapping (1,4) with (2,3)
    cov = np.column_stack([half[:, 0], half[:, 1], half[:, 1], half[:, 0]])
    sym = np.vstack([cov, cov[:, [1, 0, 3, 2]]])
    assert M.meg(sym) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["the", "red", "ball", "moves", "and", "a", "cat", ","]), max_size=60), st.integers(1, 4))
def test_intensity_and_entropy_in_unit_interval(words, n):
    text = " ".join(words)
    assert 0.0 <= M.repetition_intensity(text, n=n) <= 1.0
    assert 0.0 <= M.information_entropy(text, n=n) <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=20), st.integers(2, 10))
def test_flip_rate_of_constant_rows_is_zero(values, k):
    answers = np.repeat(np.array(values)[:, None], k, axis=1)
    assert M.flip_rate(answers) == 0.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=15))
def test_consensus_is_a_plurality_value(row):
    c = M.consensus(row)
    counts = {v: row.count(v) for v in row}
    assert counts[c] == max(counts.values())
    assert c == min(v for v, k in counts.items() if k == max(counts.values()))


def test_length_matched_rr_rejects_a_single_string():
    """length_matched_repetition_rate, like repetition_rate, rejects one str passed as the texts."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="texts"):
        M.length_matched_repetition_rate("the cat sat on the mat", words=1)


def test_length_matched_rr_checks_n_even_when_no_text_is_long_enough():
    """A bad n is a ConfigError whether or not any text reaches the matched length."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="`n`"):
        M.length_matched_repetition_rate(["short"], words=50, n=0)


@pytest.mark.parametrize("bad", ["x", None])
def test_spr_margin_names_a_non_numeric_log_probability(bad):
    """A non-numeric letter log-probability is a ConfigError naming `letter_logprobs`."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="letter_logprobs"):
        M.spr_margin({"A": bad, "B": -1.0})


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_dpb_with_zero_eps_is_finite_or_refused_for_an_uncovered_row():
    """eps = 0 with an all-zero row either is refused as a ConfigError or gives a finite DPB."""
    from pytest_posbias.errors import ConfigError

    try:
        value = M.dpb([[0.0, 0.0, 0.0], [0.2, 0.1, 0.0]], eps=0)
    except ConfigError:
        return
    assert math.isfinite(value)


def test_repetition_metrics_on_degenerate_answers():
    """Empty, whitespace-only and punctuation-only answers: no n-grams, so no repetition and zero entropy."""
    for text in ("", "   \n\t ", "... !!! ???"):
        assert M.max_ngram_count(text, 5) == 0 and M.repetition_intensity(text, n=5) == 0.0
        assert M.information_entropy(text, n=5) == 0.0 and M.severity(text) == "benign"
    one_word = "no " * 40
    assert M.max_ngram_count(one_word, 5) == 36 and M.severity(one_word) == "severe"
    assert M.repetition_intensity(one_word) == pytest.approx(1 - 1 / 40) and M.information_entropy(one_word) == 0.0


# DPB is a ratio of slot coverages and scale-free (test_dpb_bounded_and_scale_invariant scales coverage past 1);
# a judge score outside [0, 1] is refused where it is read back (scoring/test_embed_cache.py)
@pytest.mark.parametrize("metric", [M.meg])
def test_coverage_above_one_is_refused(metric):
    """Coverage is a share of the reference: a value above 1 is a ConfigError naming `coverage`."""
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match="coverage"):
        metric([[0.2, 7.5, 0.1, 0.3]])
