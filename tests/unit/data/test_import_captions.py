"""data.import_captions: ActivityNet Captions and the News Video Dataset in their official formats, with
malformed entries; the paper's groups drawn from the imported videos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.manifest_lines import check_schema, lines_of

from pytest_posbias.data.import_captions import (
    OUTSIDE_BUCKETS,
    activitynet_domains,
    import_activitynet,
    import_news,
    sample_groups,
)
from pytest_posbias.data.importers import run_import
from pytest_posbias.data.manifest import load_manifest
from pytest_posbias.errors import ConfigError


def test_activitynet_with_taxonomy_domains_buckets_and_groups(tmp_path, vids):
    """ActivityNet: taxonomy domains, buckets, seeded non-overlapping groups, and every malformed entry skipped with its reason."""
    ann = {}
    classes = {"taxonomy": [
        {"nodeName": "Eating and drinking Activities", "parentName": "Root"},
        {"nodeName": "Making a sandwich", "parentName": "Eating and drinking Activities"},
        {"nodeName": "Household Activities", "parentName": "Root"},
        {"nodeName": "Mopping floor", "parentName": "Household Activities"},
        {"nodeName": "Sports, Exercise, and Recreation", "parentName": "Root"},
        {"nodeName": "Playing squash", "parentName": "Sports, Exercise, and Recreation"},
        {"nodeName": "Work-related Activities", "parentName": "Root"},
        {"nodeName": "Welding", "parentName": "Work-related Activities"},
    ], "database": {}}
    labels = ["Making a sandwich", "Mopping floor", "Playing squash"]
    for k in range(24):
        yid = f"yt{k:03d}"
        ann[f"v_{yid}"] = {"duration": 30.0 + (50 if k % 2 else 0), "timestamps": [[0, 5]], "sentences": [f"A person does thing {k}.", " Then more. "]}
        classes["database"][yid] = {"annotations": [{"label": labels[k % 3]}]}
        vids(f"{yid}.mp4" if k % 4 else f"v_{yid}.mp4", k)  # local files may lack the v_ prefix
    # malformed entries
    ann["v_nodur"] = {"sentences": ["x"]}
    ann["v_badsent"] = {"duration": 20, "sentences": "not a list"}
    ann["v_long"] = {"duration": 400.0, "sentences": ["too long"]}
    ann["v_missing"] = {"duration": 20.0, "sentences": ["no file"]}
    ann["v_work"] = {"duration": 20.0, "sentences": ["welding"]}
    classes["database"]["missing"] = {"annotations": [{"label": "Making a sandwich"}]}
    classes["database"]["work"] = {"annotations": [{"label": "Welding"}]}
    vids("work.mp4")
    (tmp_path / "val_1.json").write_text(json.dumps(ann))
    (tmp_path / "classes.json").write_text(json.dumps(classes))
    out = tmp_path / "anet.jsonl"
    rep = run_import("activitynet", videos=str(vids.dir), annotations=str(tmp_path / "val_1.json"), out=str(out),
                     classes=str(tmp_path / "classes.json"), groups=27, seed=42)
    lines = lines_of(out)
    videos = [x for x in lines if x["type"] == "video"]
    assert len(videos) == 24
    assert {v["domain"] for v in videos} == {"cooking", "domestic", "leisure"}
    assert all(v["bucket"] == ("short" if v["duration"] <= 60 else "long") for v in videos)
    assert videos[0]["references"] == ["A person does thing 0.", "Then more."]
    assert rep.skipped["missing or non-numeric 'duration'"] == 1
    assert rep.skipped["missing 'sentences' (a non-empty list of strings)"] == 1
    assert rep.skipped["duration outside the buckets (0-60 s, 60-120 s)"] == 1
    assert rep.skipped["video not found under --videos"] == 1 and rep.missing_videos == 1
    assert rep.skipped["activity not in Cooking/Domestic/Leisure"] == 1
    groups = [x for x in lines if x["type"] == "group"]
    for (dom, b, P) in {(g["domain"], g["bucket"], g["P"]) for g in groups}:
        members = [v for g in groups if (g["domain"], g["bucket"], g["P"]) == (dom, b, P) for v in g["videos"]]
        assert len(members) == len(set(members))  # non-overlapping within a configuration
    assert any(g["P"] == 4 for g in groups) and any(g["P"] == 2 for g in groups)
    again = tmp_path / "again.jsonl"
    run_import("activitynet", videos=str(vids.dir), annotations=str(tmp_path / "val_1.json"), out=str(again),
               classes=str(tmp_path / "classes.json"), seed=42)
    assert again.read_text() == out.read_text()  # seeded
    check_schema(out)
    m = load_manifest(out)
    assert len(m.videos) == 24 and not m.problems
    summary = json.loads(Path(str(out) + ".import.json").read_text())
    assert summary["written"]["video"] == 24


def test_news_info_files(tmp_path, vids):
    """News: info files become news-style sentence references; each bad file is skipped with its reason."""
    ann = tmp_path / "info"
    ann.mkdir()
    for k in range(6):
        (ann / f"vid.n{k}.info.json").write_text(json.dumps({"description": f"The mayor of Town{k} opened a bridge. Crowds cheered.",
                                                              "duration": 40 + 10 * k}))
        vids(f"vid.n{k}.mp4", k)
    (ann / "vid.bad1.info.json").write_text(json.dumps({"duration": 30}))
    (ann / "vid.bad2.info.json").write_text("{broken")
    (ann / "vid.bad3.info.json").write_text(json.dumps({"description": "x", "duration": "long"}))
    (ann / "vid.bad4.info.json").write_text(json.dumps({"description": "no video.", "duration": 30}))
    out = tmp_path / "news.jsonl"
    rep = run_import("news", videos=str(vids.dir), annotations=str(ann), out=str(out), groups=2)
    videos = [x for x in lines_of(out) if x["type"] == "video"]
    assert len(videos) == 6 and all(v["reference_style"] == "news" and v["domain"] == "news" for v in videos)
    assert videos[0]["references"] == ["The mayor of Town0 opened a bridge.", "Crowds cheered."]
    assert {v["bucket"] for v in videos} == {"short", "long"}
    assert rep.skipped["missing 'description' (the reference)"] == 1 and rep.skipped["not valid JSON"] == 1
    assert rep.skipped["missing or non-numeric 'duration'"] == 1 and rep.skipped["video not found under --videos"] == 1
    check_schema(out)


ids_by_config = st.dictionaries(
    st.tuples(st.sampled_from(["cooking", "news"]), st.sampled_from(["short", "long"])),
    st.lists(st.from_regex(r"[a-z]{1,4}[0-9]{0,2}", fullmatch=True), unique=True, max_size=30), max_size=4)


def video_lines(configs):
    """The manifest's video lines holding each configuration's ids."""
    return [{"type": "video", "id": i, "domain": d, "bucket": b} for (d, b), ids in configs.items() for i in ids]


@settings(max_examples=60, deadline=None)
@given(ids_by_config, st.integers(0, 8), st.integers(0, 10**6))
def test_sampled_groups_are_disjoint_full_and_as_many_as_the_videos_allow(configs, groups, seed):
    """Per configuration and scale P: min(groups, n // P) groups of P distinct ids of that configuration, no id twice."""
    out = sample_groups(video_lines(configs), groups=groups, seed=seed)
    for (domain, bucket), ids in configs.items():
        for P in (2, 4):
            mine = [g for g in out if (g["domain"], g["bucket"], g["P"]) == (domain, bucket, P)]
            assert len(mine) == min(groups, len(ids) // P)
            members = [v for g in mine for v in g["videos"]]
            assert all(len(g["videos"]) == P for g in mine)
            assert len(members) == len(set(members)) and set(members) <= set(ids)
            assert [g["id"] for g in mine] == [f"{domain}-{bucket}-P{P}-g{k:02d}" for k in range(len(mine))]


@settings(max_examples=30, deadline=None)
@given(ids_by_config, st.integers(0, 10**6), st.randoms())
def test_sampled_groups_do_not_depend_on_the_order_of_the_ids(configs, seed, rnd):
    """The groups are a function of the seed and the set of ids: the annotations' order does not change them."""
    lines = video_lines(configs)
    shuffled = rnd.sample(lines, len(lines))
    assert sample_groups(lines, groups=5, seed=seed) == sample_groups(shuffled, groups=5, seed=seed)


def test_sampled_groups_change_with_the_seed():
    """Two seeds draw different groups from the same videos (the seed is used, not ignored)."""
    lines = video_lines({("news", "short"): [f"v{k:02d}" for k in range(40)]})
    assert sample_groups(lines, groups=5, seed=1) != sample_groups(lines, groups=5, seed=2)


def _classes(tmp_path, taxonomy, database):
    path = tmp_path / "classes.json"
    path.write_text(json.dumps({"taxonomy": taxonomy, "database": database}))
    return path


def test_domains_follow_the_taxonomy_up_to_an_ancestor_that_names_the_domain(tmp_path):
    """A label whose grandparent is 'Household Activities' is domestic; one under no domain's node is left out."""
    taxonomy = [{"nodeName": "Household Activities", "parentName": "Root"},
                {"nodeName": "Cleaning", "parentName": "Household Activities"},
                {"nodeName": "Mopping floor", "parentName": "Cleaning"},
                {"nodeName": "Welding", "parentName": "Root"}]
    database = {"v_a": {"annotations": [{"label": "Mopping floor"}]}, "b": {"annotations": [{"label": "Welding"}]},
                "c": {"annotations": []}}
    assert activitynet_domains(_classes(tmp_path, taxonomy, database)) == {"a": "domestic"}


def test_a_taxonomy_with_a_cycle_does_not_hang_the_domain_lookup(tmp_path):
    """Two nodes naming each other as parent: the walk stops and the label's own words decide."""
    taxonomy = [{"nodeName": "Cook a stew", "parentName": "Stews"}, {"nodeName": "Stews", "parentName": "Cook a stew"},
                {"nodeName": "Loop A", "parentName": "Loop B"}, {"nodeName": "Loop B", "parentName": "Loop A"}]
    database = {"x": {"annotations": [{"label": "Cook a stew"}]}, "y": {"annotations": [{"label": "Loop A"}]}}
    assert activitynet_domains(_classes(tmp_path, taxonomy, database)) == {"x": "cooking"}


def test_a_classes_file_of_another_shape_names_the_option_and_the_keys_it_needs(tmp_path):
    """--classes without 'taxonomy'/'database': a ConfigError naming --classes and the expected file."""
    path = tmp_path / "classes.json"
    path.write_text(json.dumps({"version": "1.3"}))
    with pytest.raises(ConfigError, match=r"--classes .*classes.json: expected ActivityNet's .*'taxonomy', 'database'"):
        activitynet_domains(path)


def test_activitynet_annotations_that_are_not_a_dict_are_an_error(tmp_path):
    """A list where ActivityNet has a dict keyed by video id: a ConfigError naming --annotations and the shape."""
    ann = tmp_path / "val_1.json"
    ann.write_text("[]")
    with pytest.raises(ConfigError, match=r"--annotations .*val_1.json: expected a dict keyed v_<youtube id>"):
        import_activitynet(tmp_path, ann, tmp_path / "m.jsonl")


def test_activitynet_bucket_edges_and_blank_sentences(tmp_path):
    """60 s is short and 120 s long (the paper's closed upper edges); blank sentences are dropped from references."""
    (tmp_path / "videos").mkdir()
    data = {}
    for key, dur in (("v_a", 60), ("v_b", 120), ("v_c", 120.5), ("v_d", True)):
        (tmp_path / "videos" / f"{key}.mp4").write_bytes(b"")
        data[key] = {"duration": dur, "sentences": [" One. ", "  ", "Two."]}
    ann = tmp_path / "val_1.json"
    ann.write_text(json.dumps(data))
    out = tmp_path / "m.jsonl"
    rep = import_activitynet(tmp_path / "videos", ann, out, groups=1)
    videos = {x["id"]: x for x in lines_of(out) if x["type"] == "video"}
    assert {k: v["bucket"] for k, v in videos.items()} == {"v_a": "short", "v_b": "long"}
    assert videos["v_a"]["references"] == ["One.", "Two."]
    assert rep.skipped == {OUTSIDE_BUCKETS: 1, "missing or non-numeric 'duration'": 1}  # a bool is no duration


def test_news_annotations_must_be_a_folder(tmp_path):
    """--annotations naming a file for News: a ConfigError saying the folder of info files is expected."""
    ann = tmp_path / "vid.a.info.json"
    ann.write_text("{}")
    with pytest.raises(ConfigError, match=r"expected the directory holding the vid.<id>.info.json files"):
        import_news(tmp_path, ann, tmp_path / "m.jsonl")


def test_an_entry_whose_sentences_are_all_blank_is_skipped_not_written(tmp_path):
    """Blank sentences are no references: the entry is skipped, and every written line loads without a problem."""
    (tmp_path / "videos").mkdir()
    data = {}
    for key, sents in (("v_a", ["  ", ""]), ("v_b", ["One."]), ("v_c", ["Two."])):
        (tmp_path / "videos" / f"{key}.mp4").write_bytes(b"")
        data[key] = {"duration": 30, "sentences": sents}
    ann = tmp_path / "val_1.json"
    ann.write_text(json.dumps(data))
    out = tmp_path / "m.jsonl"
    rep = import_activitynet(tmp_path / "videos", ann, out, groups=1)
    assert rep.skipped == {"missing 'sentences' (a non-empty list of strings)": 1}
    assert not load_manifest(out, check_files=False).problems


def test_a_classes_file_whose_database_is_not_a_dict_names_the_option(tmp_path):
    """--classes with 'database' a list: a ConfigError naming --classes, not a crash."""
    path = _classes(tmp_path, [], [])
    with pytest.raises(ConfigError, match=r"--classes"):
        activitynet_domains(path)


def test_a_deeply_nested_news_info_file_is_skipped_not_fatal(tmp_path):
    """One hostile info file among good ones: skipped as not valid JSON, the others imported."""
    (tmp_path / "videos").mkdir()
    info = tmp_path / "info"
    info.mkdir()
    (info / "vid.a.info.json").write_text("[" * 100000 + "]" * 100000)
    for k in range(2):
        (tmp_path / "videos" / f"vid.b{k}.mp4").write_bytes(b"")
        (info / f"vid.b{k}.info.json").write_text(json.dumps({"description": "Good. News.", "duration": 30}))
    rep = import_news(tmp_path / "videos", info, tmp_path / "m.jsonl", groups=1)
    assert rep.skipped == {"not valid JSON": 1} and rep.written["video"] == 2
