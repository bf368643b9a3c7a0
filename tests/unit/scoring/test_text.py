"""Sentence splitting and TF-IDF (scoring.text)."""

from __future__ import annotations

from pytest_posbias.scoring.text import sentences, tfidf_cosine


def test_sentences_and_tfidf():
    assert sentences("One thing. Two things! Three? four.") == ["One thing.", "Two things!", "Three? four."]
    sims = tfidf_cosine("red circle moves right", ["a red circle moves to the right", "a blue square stays"])
    assert sims[0] > 0.8 and sims[1] == 0.0


def test_degenerate_answers_have_no_sentences_and_no_similarity():
    """Empty, whitespace-only and punctuation-only answers: no sentences or words, similarity 0 to every document."""
    from pytest_posbias.scoring.text import content_words

    docs = ["a red circle moves to the right", "a blue square stays", ""]
    for text in ("", "  \n\t", "... !!! ???", "the and of"):
        assert tfidf_cosine(text, docs) == [0.0, 0.0, 0.0]
        assert content_words(text) == []
    assert sentences("") == [] and sentences(" \n ") == []
    assert tfidf_cosine("red circle", []) == []
