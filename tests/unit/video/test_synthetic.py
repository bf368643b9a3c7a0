"""The synthetic video set (video.synthetic): a small build, brief events that some sampling phases see
and others miss, and `posbias fixtures build`."""

from __future__ import annotations

import json

from support.synthetic_frames import brief_event_grid_hits

from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.sampling import polyphase_grids


def test_synthetic_set_small_build(tmp_path):
    manifest = SY.build_set(tmp_path, videos_per_config=4, groups_per_config=1, scales=(4,))
    lines = [json.loads(x) for x in manifest.read_text().splitlines()]
    videos = [x for x in lines if x["type"] == "video"]
    assert len(videos) == 4 * len(SY.configurations())
    assert {(v["domain"], v["bucket"]) for v in videos} == set(SY.configurations())
    for v in videos:
        n = len(v["references"])
        assert (1 <= n <= 2) if v["domain"] == "news" else (3 <= n <= 4)
        assert (tmp_path / v["path"]).is_file()
        lo, hi = SY.BUCKETS[v["bucket"]]
        assert lo <= v["duration"] <= hi
    mcq = [x for x in lines if x["type"] == "mcq"]
    assert all(len(q["options"]) == 5 and 0 <= q["answer"] < 5 for q in mcq)
    assert any("brief-event" in q["tags"] for q in mcq)
    groups = [x for x in lines if x["type"] == "group"]
    assert all(len(set(g["videos"])) == 4 for g in groups)
    # deterministic and incremental: a second build renders nothing and writes the same manifest
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "videos").glob("*.mp4")}
    SY.build_set(tmp_path, videos_per_config=4, groups_per_config=1, scales=(4,))
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "videos").glob("*.mp4")} == before
    assert manifest.read_text() == "".join(json.dumps(x, sort_keys=True) + "\n" for x in lines)


def test_brief_events_are_seen_by_some_phases_and_missed_by_others():
    seen_by_some_missed_by_others = 0
    scenes = [SY.make_scene(f"e{k}", "domestic", "short", seed=k, event_probability=1.0) for k in range(40)]
    for sc in scenes:
        hits = [brief_event_grid_hits(sc, g) for g in polyphase_grids(sc.frame_count, 8, 3)]
        assert sum(hits) <= 1  # an event of 5 frames is no longer than the spacing between phases
        seen_by_some_missed_by_others += sum(hits) == 1
    assert seen_by_some_missed_by_others >= 5


def test_cli_fixtures_build(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "fixtures", "build", "--out", str(tmp_path / "s"),
                          "--count", "2", "--groups", "1", "--scales", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout and (tmp_path / "s" / "manifest.jsonl").is_file()
    n_videos = sum(1 for line in (tmp_path / "s" / "manifest.jsonl").read_text().splitlines() if '"type": "video"' in line)
    assert n_videos == 2 * len(SY.configurations())


def test_more_groups_than_the_videos_allow_is_refused_before_rendering(tmp_path):
    """4 videos make one distinct group of 4: asking for 2 is a ConfigError naming the parameter, the number
    asked and the number possible, raised before any clip is rendered (never a set with fewer groups)."""
    import pytest

    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError, match=r"`groups_per_config` = 2 .* at most 1 .*P = 4"):
        SY.build_set(tmp_path, videos_per_config=4, groups_per_config=2, scales=(4,))
    assert not list(tmp_path.rglob("*.mp4")) and not (tmp_path / "manifest.jsonl").exists()
