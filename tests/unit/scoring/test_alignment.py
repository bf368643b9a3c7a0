"""Aligning a multi-video answer to its slots (scoring.alignment): tolerant marker parsing, one-indexed
answers, missing slots, placeholders and the similarity fallback."""

from __future__ import annotations

import pytest

from pytest_posbias.scoring.alignment import align, find_markers, is_placeholder

REFS = [
    ["A red circle moves to the right.", "The background is cream."],
    ["A blue square stays still.", "A white flash fills the screen."],
]


@pytest.mark.parametrize(
    "text",
    [
        "[video0] A red circle. [video1] A blue square.",
        "[Video0] A red circle.\n[VIDEO1] A blue square.",
        "[ video 0 ]: A red circle. [ video 1 ]: A blue square.",
        "**[video0]** A red circle.\n**[video1]** A blue square.",
        "**Video 0:** A red circle.\n**Video 1:** A blue square.",
        "[video_0] A red circle. [video-1] A blue square.",
    ],
)
def test_tolerant_marker_parsing(text):
    al = align(text, 2)
    assert al.mode == "markers" and al.status == ("ok", "ok")
    assert al.summaries[0].startswith("A red circle") and al.summaries[1].startswith("A blue square")


def test_one_indexed_answer_to_zero_indexed_request_is_shifted():
    al = align("[Video 1] A red circle. [Video 2] A blue square.", 2)
    assert al.one_indexed_shift and al.status == ("ok", "ok")
    assert al.summaries == ("A red circle.", "A blue square.")
    # a one-indexed request keeps its labels
    al1 = align("[video1] A. [video2] B.", 2, label_base=1)
    assert not al1.one_indexed_shift and al1.summaries == ("A.", "B.")


def test_missing_slot_is_a_marker_failure_for_that_slot_only():
    al = align("[video0] A red circle moves. [video2] stray text", 2)
    assert al.status == ("ok", "marker_failure")
    assert al.extra_markers == (2,)


def test_placeholder_only_output_scores_zero():
    al = align("[video0] summary [video1] summary", 2)
    assert al.status == ("placeholder", "placeholder")
    assert not al.scoreable(0)
    assert is_placeholder("...") and is_placeholder(" summary ") and not is_placeholder("A red circle.")


def test_fallback_assigns_sentences_to_the_most_similar_reference():
    text = "A blue square stays still in the middle. Then a red circle moves to the right. A flash fills the screen."
    al = align(text, 2, references=REFS)
    assert al.mode == "fallback" and al.status == ("fallback", "fallback")
    assert "red circle" in al.summaries[0]
    assert "blue square" in al.summaries[1] and "flash" in al.summaries[1]


def test_empty_output():
    assert align("   ", 2).status == ("empty", "empty")


def test_find_markers_positions():
    assert [m[0] for m in find_markers("x [video3] y [Video 1]: z")] == [3, 1]


def test_fallback_does_not_give_unrelated_sentences_to_the_first_slot():
    """In the fallback, a sentence that shares nothing with any reference is assigned to no slot."""
    text = "I cannot see any videos. Please upload them again. A blue square stays still."
    al = align(text, 2, references=REFS)
    assert al.summaries[1] == "A blue square stays still."
    assert not al.scoreable(0) and al.summaries[0] == ""


def test_underscore_blanks_after_markers_are_placeholders():
    """Blank-line filler ``___`` after a marker is template filler, scored as a placeholder."""
    al = align("[video0] ___ [video1] ____", 2)
    assert al.status == ("placeholder", "placeholder")


def test_unmarked_placeholder_answer_without_references_is_not_scoreable():
    """An unmarked answer with no references to fall back on leaves every slot a marker failure."""
    al = align("Summary: ...", 2)
    assert al.mode == "fallback" and not any(al.scoreable(k) for k in range(2))


def test_marker_search_is_fast_on_a_long_run_of_blank_lines():
    """Finding markers in a degenerate answer of 8,000 blank lines takes well under a second."""
    import time

    text = "[video0] A red circle." + "\n" * 8_000 + "[video1] A blue square."
    t0 = time.perf_counter()
    al = align(text, 2)
    assert time.perf_counter() - t0 < 0.2
    assert al.status == ("ok", "ok")


def test_placeholder_check_is_fast_on_a_long_run_of_punctuation():
    """is_placeholder on a degenerate slot of 6,000 dashes and a word answers well under a second."""
    import time

    t0 = time.perf_counter()
    assert not is_placeholder("-" * 6_000 + "x")
    assert time.perf_counter() - t0 < 0.1
