"""Review fixes for issue 16: a broken corpus folder and corrupted stored stressor edits."""

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
