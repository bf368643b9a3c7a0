"""NEWSROOM fragment coverage and density against lil-lab/newsroom's own Fragments code,
run with spaCy (tests/data/upstream/newsroom_fragments.json, repository + commit inside).

Placed with ``metrics.py``, whose fragment functions it checks."""

from __future__ import annotations

import json
import sys

import pytest
from support import DATA

from pytest_posbias import metrics
from pytest_posbias.errors import ConfigError
from pytest_posbias.metrics import (
    fragment_coverage,
    fragment_density,
    fragment_tokenizer,
    fragment_tokens,
    fragments,
)

FRAGMENTS = json.loads((DATA / "upstream" / "newsroom_fragments.json").read_text())


def test_data_states_its_source():
    assert FRAGMENTS["repository"] == "lil-lab/newsroom" and len(FRAGMENTS["commit"]) == 40
    assert len(FRAGMENTS["cases"]) >= 10


@pytest.mark.parametrize("case", FRAGMENTS["cases"], ids=lambda c: c["reference"][:24])
def test_coverage_and_density_equal_newsroom_with_spacy(case):
    pytest.importorskip("spacy")
    assert fragment_tokenizer() == "spacy"
    ref, summ = case["reference"], case["summary"]
    if ref:
        assert fragment_tokens(ref) == case["reference_tokens"]
    assert fragment_coverage(ref, summ) == pytest.approx(case["coverage"], abs=1e-12)
    assert fragment_density(ref, summ) == pytest.approx(case["density"], abs=1e-12)
    assert [list(m) for m in fragments(ref, summ)] == case["matches"]  # (reference, summary, length)


def test_regex_fallback_differs_on_punctuation_heavy_text():
    differ = sum(fragment_coverage(c["reference"], c["summary"], tokenizer="regex") != pytest.approx(c["coverage"])
                 for c in FRAGMENTS["cases"])
    assert differ >= 5
    assert fragment_tokens("The U.S. didn't", tokenizer="regex") == ["the", "u", ".", "s", ".", "didn", "'", "t"]


def test_without_spacy_falls_back_to_regex(monkeypatch):
    monkeypatch.setitem(sys.modules, "spacy", None)
    monkeypatch.setattr(metrics, "_SPACY_EN", None)
    assert fragment_tokenizer() == "regex"
    assert fragment_tokens("didn't") == ["didn", "'", "t"]
    with pytest.raises(ConfigError, match="spacy extra"):
        fragment_tokenizer("spacy")
    with pytest.raises(ConfigError, match="`tokenizer` must be one of"):
        fragment_tokenizer("nltk")


def test_fragment_judge_records_tokenizer():
    from pytest_posbias.scoring.judges import FragmentJudge

    (cov,) = FragmentJudge().score([(["The U.S. grew."], "The U.S. grew fast.")])
    assert cov.value == 1.0 and cov.tokenizer == fragment_tokenizer()
    assert cov.to_dict()["tokenizer"] == fragment_tokenizer()
