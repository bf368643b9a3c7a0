"""models.sim_mcq: how the simulated model reads a multiple-choice prompt, what it believes, its answer
distribution over option texts, the doses that move it and the letters it maps onto."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_posbias.models.sim_dose import ORDER_HIT, ORIGINAL_PROB, SHIFTED_PROB, Dose
from pytest_posbias.models.sim_mcq import (
    LETTER_BIAS,
    SURE_PROB,
    content_probs,
    dose_order,
    dose_shift,
    letter_logprobs,
    move,
    parse_mcq,
    perceived,
)
from pytest_posbias.models.sim_vision import ObjectTrack, VideoView
from pytest_posbias.video.synthetic import EVENT_OPTION, MOTION_PHRASE

texts = st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=12), min_size=2, max_size=5, unique=True)


def test_parse_takes_the_last_question_line_before_the_options_and_both_option_styles():
    """The question is the last line ending in '?' before the first option; 'B. x' and 'C) y' are both options."""
    prompt = ("Watch the video. Is it short?\nWhat colour is the circle?\nA. red\nB) blue\n C.  green \n"
              "Answer with the option letter only.")
    question, options = parse_mcq(prompt)
    assert question == "What colour is the circle?"
    assert options == [("A", "red"), ("B", "blue"), ("C", "green")]


def test_parse_without_a_question_mark_keeps_the_whole_text_before_the_options():
    """No line ends in '?': the question is all the text before the first option, stripped."""
    question, options = parse_mcq("  Pick the event\nfrom the clip\nA. flash\nB. nothing\n")
    assert question == "Pick the event\nfrom the clip"
    assert [k for k, _ in options] == ["A", "B"]


def test_parse_of_a_prompt_without_options_returns_it_whole():
    """A prompt with no option line: the question line, and no options."""
    assert parse_mcq("Please describe this video?") == ("Please describe this video?", [])


VIEW = VideoView(objects=(ObjectTrack("circle", "red", "blue", "left-to-right"),
                          ObjectTrack("square", "green", "green", "static")),
                 events=("flash",), background="black", discontinuity=0.0)


@pytest.mark.parametrize(("question", "want"), [
    ("What colour is the circle at the start?", "red"),
    ("What colour is the triangle?", None),
    ("In which direction does the red circle move?", MOTION_PHRASE["left-to-right"]),
    ("In which direction does it move?", None),
    ("How many coloured shapes appear?", "2"),
    ("What brief event happens?", EVENT_OPTION["flash"]),
    ("Why is the sky blue?", None),
])
def test_perceived_reads_the_answer_from_the_view(question, want):
    """The believed option is the one the frames show: the first colour, the motion, the count, the first event."""
    assert perceived(question, VIEW) == want


def test_perceived_without_a_view_or_an_event_is_unsure_or_nothing_unusual():
    """No view: no belief; a view without events believes 'nothing unusual happens'."""
    assert perceived("What colour is the circle?", None) is None
    quiet = VideoView(objects=(), events=(), background=None, discontinuity=0.0)
    assert perceived("What brief event happens?", quiet) == EVENT_OPTION[None]


@settings(max_examples=50, deadline=None)
@given(texts, st.randoms())
def test_content_probs_are_a_distribution_the_same_in_every_option_order(opts, rnd):
    """Unsure: probabilities over the texts sum to 1 and do not depend on the order the options are listed in."""
    shuffled = rnd.sample(opts, len(opts))
    a = content_probs("unbiased", "Q?", opts, None)
    b = content_probs("unbiased", "Q?", shuffled, None)
    assert a == b
    assert set(a) == set(opts) and math.isclose(sum(a.values()), 1.0) and all(v > 0 for v in a.values())


@settings(max_examples=50, deadline=None)
@given(texts, st.data())
def test_a_believed_option_gets_sure_prob_and_the_others_keep_their_ratios(opts, data):
    """Sure: the believed text at SURE_PROB, the rest share 1 − SURE_PROB in the unsure distribution's ratios."""
    believed = data.draw(st.sampled_from(opts))
    base = content_probs("p", "Q?", opts, None)
    sure = content_probs("p", "Q?", opts, believed)
    assert sure[believed] == SURE_PROB and math.isclose(sum(sure.values()), 1.0)
    others = [t for t in opts if t != believed]
    z = sum(base[t] for t in others)
    for t in others:
        assert math.isclose(sure[t], (1 - SURE_PROB) * base[t] / z)


def test_a_belief_outside_the_options_leaves_the_model_unsure():
    """A believed text that is no option changes nothing: the unsure distribution."""
    assert content_probs("p", "Q?", ["a", "b"], "c") == content_probs("p", "Q?", ["a", "b"], None)


def test_content_probs_depend_on_the_profile_and_the_question():
    """Another profile or question seeds another unsure distribution (the seed is used, not ignored)."""
    opts = ["a", "b", "c", "d"]
    base = content_probs("p", "Q?", opts, None)
    assert content_probs("q", "Q?", opts, None) != base
    assert content_probs("p", "R?", opts, None) != base


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=2, max_size=5), st.booleans())
def test_letter_logprobs_are_the_normalised_biased_logits(weights, bias):
    """Letter log-probs equal log-softmax(log p + LETTER_BIAS·(K−1−k)) computed directly (bias only when unsure)."""
    p = np.array(weights) / sum(weights)
    letters = [chr(65 + k) for k in range(len(p))]
    probs = {f"t{k}": float(v) for k, v in enumerate(p)}
    by_letter = {letter: f"t{k}" for k, letter in enumerate(letters)}
    got = letter_logprobs(probs, letters, by_letter, letter_bias=bias)
    sure = p.max() >= SURE_PROB - 1e-9
    z = np.log(p) + (LETTER_BIAS * (len(p) - 1 - np.arange(len(p))) if bias and not sure else 0.0)
    want = z - np.logaddexp.reduce(z)
    assert np.allclose([got[k] for k in letters], want)
    assert math.isclose(sum(math.exp(v) for v in got.values()), 1.0)


def test_letter_bias_pulls_an_unsure_model_to_a_and_leaves_a_sure_one_alone():
    """Unsure with flat texts: A is likeliest under letter bias; sure: the believed text wins wherever it sits."""
    letters = ["A", "B", "C"]
    flat = {"x": 1 / 3, "y": 1 / 3, "z": 1 / 3}
    by_letter = {"A": "x", "B": "y", "C": "z"}
    lp = letter_logprobs(flat, letters, by_letter, letter_bias=True)
    assert max(lp, key=lp.get) == "A" and lp["A"] - lp["B"] == pytest.approx(LETTER_BIAS)
    sure = {"x": 0.05, "y": 0.10, "z": SURE_PROB}
    lp = letter_logprobs(sure, letters, by_letter, letter_bias=True)
    assert max(lp, key=lp.get) == "C"
    assert lp == letter_logprobs(sure, letters, by_letter, letter_bias=False)


def test_a_letter_over_no_option_gets_log_probability_minus_thirty():
    """A letter whose text is not among the options: logit −30, so e^-30 relative to a certain option."""
    lp = letter_logprobs({"x": 1.0}, ["A", "B"], {"A": "x"}, letter_bias=False)
    assert lp["B"] - lp["A"] == pytest.approx(-30.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=3, max_size=6), st.data())
def test_move_puts_the_fixed_masses_and_shares_the_rest_in_proportion(weights, data):
    """move(): target at SHIFTED_PROB, original at ORIGINAL_PROB, the others' mass rescaled to what is left."""
    probs = {f"t{k}": w / sum(weights) for k, w in enumerate(weights)}
    orig, target = data.draw(st.lists(st.sampled_from(sorted(probs)), min_size=2, max_size=2, unique=True))
    out = move(probs, orig, target)
    assert out[target] == SHIFTED_PROB and out[orig] == ORIGINAL_PROB
    assert math.isclose(sum(out.values()), 1.0)
    rest = [t for t in probs if t not in (orig, target)]
    z = sum(probs[t] for t in rest)
    for t in rest:
        assert math.isclose(out[t], (1 - SHIFTED_PROB - ORIGINAL_PROB) * probs[t] / z)


def test_no_dose_or_no_video_leaves_the_answer_where_it_is():
    """dose_shift without a dose or without a video, and dose_order without a dose or with two options: unchanged."""
    probs = {"a": 0.7, "b": 0.2, "c": 0.1}
    any_dose = Dose((("flip", 0.9),))
    assert dose_shift(None, "Q?", None, probs) is probs
    assert dose_shift(any_dose, "Q?", None, probs) is probs
    by_letter = {"A": "b", "B": "c", "C": "a"}
    assert dose_order(None, "Q?", None, probs, ["A", "B", "C"], by_letter) is probs
    assert dose_order(Dose((("order", ORDER_HIT),)), "Q?", None, {"a": 0.7, "b": 0.3}, ["A", "B"],
                      {"A": "b", "B": "a"}) == {"a": 0.7, "b": 0.3}


def test_a_full_order_dose_moves_a_belief_in_the_last_two_letters_to_the_first():
    """Order dose at ORDER_HIT (every item dosed): an answer under C or D of four moves to A's text; under B it stays."""
    dose = Dose((("order", ORDER_HIT),))
    probs = {"w": 0.1, "x": 0.1, "y": 0.1, "z": 0.7}
    letters = ["A", "B", "C", "D"]
    for pos in ("C", "D"):
        others = iter(["w", "x", "y"])
        by_letter = {k: ("z" if k == pos else next(others)) for k in letters}
        out = dose_order(dose, "Q?", None, probs, letters, by_letter)
        assert out == move(probs, "z", by_letter["A"])
    by_letter = {"A": "w", "B": "z", "C": "x", "D": "y"}
    assert dose_order(dose, "Q?", None, probs, letters, by_letter) is probs
