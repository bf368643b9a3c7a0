"""A broken corpus folder and corrupted stored stressor edits.

Placed with ``probes/search_corpus.py``, the corpus folder's reader."""

from __future__ import annotations

import pytest

from pytest_posbias import strategies as S
from pytest_posbias.errors import ConfigError
from pytest_posbias.probes.search_corpus import Corpus


def test_corpus_folder_that_is_a_file_is_a_config_error_naming_the_cache(tmp_path):
    (tmp_path / "hypothesis").write_text("not a folder")
    with pytest.raises(ConfigError, match="posbias-cache"):
        Corpus(tmp_path / "hypothesis")
    assert Corpus(tmp_path / "ok").root.is_dir()


def test_stored_edits_with_positions_without_sources_do_not_apply():
    from pytest_posbias.probes.search_stressor import apply_edits
    from pytest_posbias.video.frames import FrameSpec

    clean = FrameSpec.synthetic("noise", 6, seed=1)
    bad = S.StressorEdit.from_json({"kind": "replace", "positions": [1, 2], "sources": [0]})
    with pytest.raises(ValueError):  # decode() applies the edits, so the replay marks the entry unusable
        apply_edits(clean, (bad,))
    good = S.StressorEdit.from_json({"kind": "replace", "positions": [1], "sources": [0]})
    spec, strip = apply_edits(clean, (good,))
    assert spec.frames[1] == clean.frames[0]
    assert [s["changed"] for s in strip] == [False, True, False, False, False, False]


def test_replay_line_says_when_no_stored_counterexample_could_be_replayed():
    from pytest_posbias.gates.search import replay_line

    lost = [{"item": "q1", "value": {}, "found_by": ["sim:letter-bias"]}]
    line = replay_line({"replay": {"queried": 0, "lost": lost, "found_by": ["sim:letter-bias"]}})
    assert line.startswith("1 stored counterexamples (found by sim:letter-bias) could not be replayed")
    assert replay_line({"replay": {"queried": 0, "lost": [], "found_by": []}}) == ""
    both = replay_line({"replay": {"queried": 2, "still_break": [{}], "survived": [{}], "lost": lost,
                                   "found_by": ["m"]}})
    assert both == "replayed 2 stored counterexamples first (found by m): 1 still break, 1 survived, 1 lost or not applicable here"


def test_an_unusable_corpus_folder_stops_the_search_before_any_item(tmp_path, monkeypatch):
    """The corpus is opened once, before the per-item loop (whose errors only mark an item unusable)."""
    from types import SimpleNamespace

    from pytest_posbias.probes import search_run

    (tmp_path / "hypothesis").write_text("not a folder")
    called = []
    monkeypatch.setattr(search_run, "_props", lambda *a, **k: called.append(1) or ([], 0, [], "items"))
    ctx = SimpleNamespace(cache_dir=tmp_path, engine=SimpleNamespace(stats=SimpleNamespace(snapshot=lambda: None)),
                          probe_settings=lambda name: {"budget": 30, "slow_budget": 60, "items": 4, "shrink_budget": 30},
                          memo=lambda key, fn: fn())
    with pytest.raises(ConfigError, match="search corpus folder"):
        search_run.property_search(ctx, "sim:unbiased", "order")
    assert not called
