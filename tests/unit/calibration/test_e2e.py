"""What makes the end-to-end calibration affordable must not change what the simulator sees or scores.

The simulator's views are shared by every backend of a process (``sim._VIDEO_VIEWS`` /
``sim._FRAME_VIEWS``) and only new untouched frames are decoded; the stressor probe memoizes its
text metrics. Expected values here are computed afresh (a new FrameStore, ``view_video`` on the
materialized pixels; the metrics module itself), never read from those caches.

Placed with ``calibration/e2e.py``, whose cost these shared views and memoized metrics keep down;
the code checked is ``models/sim.py``'s and ``probes/stressor.py``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_posbias.data.manifest import load_manifest
from pytest_posbias.metrics import (
    information_density,
    information_entropy,
    max_ngram_count,
    repetition_intensity,
    severity,
)
from pytest_posbias.models.sim import SimBackend
from pytest_posbias.models.sim_vision import view_video
from pytest_posbias.probes import stressor as SP
from pytest_posbias.probes import stressor_results as SR
from pytest_posbias.video import stressors as ST
from pytest_posbias.video.compose import VideoPart
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices


def _specs(manifest, store):
    item, foreign = sorted(manifest.videos.values(), key=lambda v: v.id)[:2]
    info = store.info(item.path)
    clean = FrameSpec.from_video(item.path, frame_indices(info.frame_count, 8, convention="videostf"), info=info)
    other = FrameSpec.from_video(foreign.path, frame_indices(store.info(foreign.path).frame_count, 8, convention="videostf"))
    rng = np.random.default_rng(7)
    return [clean, ST.shuffle(clean, rng=rng).frames,
            ST.resample(clean, 10, convention="videostf").frames,  # partly frames not seen yet: decoded alone
            ST.blur(clean, [3]).frames, ST.noise(clean, [0, 5], rng=rng).frames,  # pixel ops: touched frames
            ST.replace_foreign(clean, other, 2, rng=rng).frames]


def test_shared_views_equal_fresh_views_and_a_second_backend_decodes_nothing(small_set):
    manifest = load_manifest(small_set)
    specs = _specs(manifest, FrameStore())
    fresh = [view_video(FrameStore().materialize(s)) for s in specs]  # no cache of the simulator involved
    first_store, second_store = FrameStore(), FrameStore()
    first = SimBackend("unbiased", first_store)
    second = SimBackend("dose,stressor=0.3", second_store)
    got_first = [first._view(VideoPart(s)) for s in specs]
    got_second = [second._view(VideoPart(s)) for s in specs]
    assert got_first == fresh
    assert got_second == fresh
    assert second_store.decodes == 0  # every view came from what the first backend read


def test_memoized_text_metrics_equal_the_metrics():
    texts = ["A red circle moves from left to right. The screen briefly goes black.",
             " ".join(["The red circle keeps moving and the scene continues to show it."] * 5),
             "", "one two three four five one two three four five"]
    for t in texts * 2:  # the second pass reads the memo
        assert SP.repeats(t) == (max_ngram_count(t, 5) > 1)
        assert SR.ri_of(t) == repetition_intensity(t)
        assert SR.ie_of(t) == information_entropy(t)
        assert SR.density_of(t) == information_density(t)
        for finish in ("stop", "length", None):
            assert SR.severity_of(t, finish) == severity(t, finish)
    assert [SP.repeats(t) for t in texts] == [False, True, False, True]


def test_a_verdict_on_no_units_is_an_error_not_a_detection(monkeypatch, tmp_path):
    """run_end_to_end counted a verdict on no units (the calibrated configuration absent from --data) as a
    failure, so the 3t column read as 100% power; it is now a ConfigError naming the gate and configuration."""
    from types import SimpleNamespace

    from pytest_posbias.calibration import e2e
    from pytest_posbias.errors import ConfigError

    data = tmp_path / "m.jsonl"
    data.write_text("")
    monkeypatch.setattr(e2e, "gate_verdict", lambda *a: SimpleNamespace(n=0, passed=False, extra={}))
    with pytest.raises(ConfigError, match="order: sim:unbiased gave no units"):
        e2e.run_end_to_end(reps=1, gates=["order"], data=str(data), cache=str(tmp_path / "c"), rootdir=tmp_path,
                           print_fn=lambda _: None)
