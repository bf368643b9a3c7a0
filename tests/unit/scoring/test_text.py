"""Sentence splitting and TF-IDF (scoring.text)."""

from __future__ import annotations

from pytest_posbias.scoring.text import sentences, tfidf_cosine


def test_sentences_and_tfidf():
    assert sentences("One thing. Two things! Three? four.") == ["One thing.", "Two things!", "Three? four."]
    sims = tfidf_cosine("red circle moves right", ["a red circle moves to the right", "a blue square stays"])
    assert sims[0] > 0.8 and sims[1] == 0.0
