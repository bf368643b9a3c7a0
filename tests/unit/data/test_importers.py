"""Importers: small files in each dataset's official format, with malformed entries."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.data.importers import run_import
from pytest_posbias.data.manifest import SCHEMA_PATH, load_manifest

pytestmark = pytest.mark.usefixtures("heavy_modules")


def lines_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def check_schema(path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text())
    for line in lines_of(path):
        jsonschema.validate(line, schema)


@pytest.fixture
def vids(tmp_path, synthetic_clips):
    """A videos directory; ``put(name)`` copies a synthetic clip there under the dataset's file name."""
    d = tmp_path / "videos"
    d.mkdir()

    def put(name: str, k: int = 0) -> Path:
        return Path(shutil.copy(synthetic_clips[k % len(synthetic_clips)], d / name))

    put.dir = d  # type: ignore[attr-defined]
    return put


def test_activitynet_with_taxonomy_domains_buckets_and_groups(tmp_path, vids):
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


def test_mvbench_tasks_with_frame_folders(tmp_path, vids):
    from PIL import Image

    tasks = tmp_path / "json"
    tasks.mkdir()
    frames = vids.dir / "frames_clip"
    frames.mkdir()
    for i in range(12):
        Image.new("RGB", (32, 24), (i * 20, 0, 0)).save(frames / f"{i + 1:05d}.jpg")
    vids("clipA.mp4")
    entries = [
        {"video": "clipA.mp4", "question": "What happens?", "candidates": ["x", "y", "z"], "answer": "y", "start": 1.0, "end": 8.0},
        {"video": "frames_clip", "question": "What colour?", "candidates": ["red", "blue", "green", "black"], "answer": "red"},
        {"video": "clipA.mp4", "question": "Bad answer", "candidates": ["a", "b"], "answer": "c"},
        {"video": "clipA.mp4", "question": "No candidates"},
        {"video": "missing.mp4", "question": "Missing", "candidates": ["a", "b"], "answer": "a"},
        "not an object",
    ]
    (tasks / "action_sequence.json").write_text(json.dumps(entries))
    out = tmp_path / "mv.jsonl"
    rep = run_import("mvbench", videos=str(vids.dir), annotations=str(tasks), out=str(out))
    items = lines_of(out)
    assert [(i["question"], i["answer"], i["start"], i["end"]) for i in items] == [("What happens?", 1, 1.0, 8.0), ("What colour?", 0, None, None)]
    assert rep.skipped["'answer' is not one of the candidates"] == 1
    assert rep.skipped["missing 'candidates' (a list of at least 2 strings)"] == 1
    assert rep.skipped["video not found under --videos"] == 1 and rep.skipped["entry is not an object"] == 1
    check_schema(out)
    m = load_manifest(out)
    from pytest_posbias.video.decode import probe, read_frames

    folder = next(q for q in m.mcq if q.question == "What colour?").path
    info = probe(folder)
    assert (info.frame_count, info.fps, info.backend) == (12, 3.0, "frames")
    reds = read_frames(folder, [0, 5, 11], size=None, aspect="none")[:, 5, 5, 0]
    assert abs(int(reds[1]) - 100) < 10 and abs(int(reds[2]) - 220) < 10


def test_videomme_json_and_parquet(tmp_path, vids):
    rows = []
    for k in range(4):
        vids(f"vm{k}.mp4", k)
        rows.append({"videoID": f"vm{k}", "question_id": f"{k:03d}-1", "duration": "short", "domain": "Knowledge",
                     "sub_category": "Astronomy", "task_type": "Counting Problem", "question": f"How many? {k}",
                     "options": ["A. one", "B. two", "C. three", "D. four"], "answer": "C"})
    rows.append({**rows[0], "question_id": "bad-opts", "options": ["one", "two"]})
    rows.append({**rows[0], "question_id": "bad-ans", "answer": "F"})
    rows.append({**rows[0], "question_id": "no-vid", "videoID": "nowhere"})
    (tmp_path / "vmme.json").write_text(json.dumps(rows))
    out = tmp_path / "vmme.jsonl"
    rep = run_import("videomme", videos=str(vids.dir), annotations=str(tmp_path / "vmme.json"), out=str(out))
    items = lines_of(out)
    assert len(items) == 4 and items[0]["options"] == ["one", "two", "three", "four"] and items[0]["answer"] == 2
    assert "Counting Problem" in items[0]["tags"]
    assert rep.skipped["'options' are not letter-prefixed A., B., ..."] == 1
    assert rep.skipped["'answer' is not an option letter"] == 1 and rep.skipped["video not found under --videos"] == 1
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    out2 = tmp_path / "vmme2.jsonl"
    run_import("videomme", videos=str(vids.dir), annotations=str(tmp_path / "test.parquet"), out=str(out2))
    assert lines_of(out2) == items
    check_schema(out)


def test_egoschema_with_answers_and_sample(tmp_path, vids):
    qs = []
    answers = {}
    for k in range(10):
        uid = f"uid-{k:02d}"
        vids(f"{uid}.mp4", k)
        qs.append({"q_uid": uid, "question": f"What does c do? {k}", **{f"option {i}": f"opt {i}" for i in range(5)}})
        answers[uid] = k % 5
    qs.append({"q_uid": "no-answer", "question": "?", **{f"option {i}": "o" for i in range(5)}})
    qs.append({"q_uid": "short-opts", "question": "?", "option 0": "a"})
    qs.append({"question": "no uid"})
    (tmp_path / "questions.json").write_text(json.dumps(qs))
    (tmp_path / "subset_answers.json").write_text(json.dumps(answers))
    out = tmp_path / "ego.jsonl"
    rep = run_import("egoschema", videos=str(vids.dir), annotations=str(tmp_path / "questions.json"), out=str(out), sample=4, seed=42)
    items = lines_of(out)
    import random

    valid_ids = [f"egoschema-uid-{k:02d}" for k in range(10)]
    expected = [x for x in random.Random(42).sample(valid_ids, 4)]
    assert [i["id"] for i in items] == expected  # the phase paper's random.Random(42).sample
    assert rep.skipped["no answer in subset_answers.json"] == 1
    assert rep.skipped["missing 'question' or 'option 0'..'option 4' strings"] == 1
    assert rep.skipped["entry without a 'q_uid' string"] == 1
    assert rep.skipped["not in the --sample 4 subset (seed 42)"] == 6


def test_nextqa_csv(tmp_path, vids):
    sub = vids.dir / "1025"
    sub.mkdir()
    for k in range(3):
        shutil.copy(vids(f"tmp{k}.mp4", k), sub / f"{4000 + k}.mp4")
    path = tmp_path / "val.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["video", "frame_count", "width", "height", "question", "answer", "qid", "type", "a0", "a1", "a2", "a3", "a4"])
        for k in range(3):
            w.writerow([4000 + k, 100, 320, 240, f"why did the boy run {k}", k, 1, "CW", "to eat", "to play", "to hide", "to sleep", "to sing"])
        w.writerow([4000, 100, 320, 240, "bad answer", "x", 2, "CW", "a", "b", "c", "d", "e"])
        w.writerow([9999, 100, 320, 240, "no video", 1, 3, "CW", "a", "b", "c", "d", "e"])
        w.writerow([4001, 100, 320, 240, "empty option", 1, 4, "CW", "a", "", "c", "d", "e"])
    out = tmp_path / "nq.jsonl"
    rep = run_import("nextqa", videos=str(vids.dir), annotations=str(path), out=str(out))
    items = lines_of(out)
    assert [i["answer"] for i in items] == [0, 1, 2] and items[0]["options"][1] == "to play"
    assert rep.skipped["'answer' is not an integer index"] == 1 and rep.skipped["video not found under --videos"] == 1
    assert rep.skipped["empty question or option"] == 1


def test_manifest_loader_reports_bad_lines_with_numbers(tmp_path, synthetic_clips):
    good = {"type": "video", "id": "a", "path": str(synthetic_clips[0]), "domain": "d", "bucket": "short", "references": ["x"]}
    lines = [json.dumps(good), "{not json", json.dumps({**good, "id": "b", "bucket": "medium"}),
             json.dumps({"type": "mcq", "id": "q", "video": "a", "question": "?", "options": ["a", "b"], "answer": 5}),
             json.dumps({"type": "group", "id": "g", "domain": "d", "bucket": "short", "P": 2, "videos": ["a", "zz"]})]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    m = load_manifest(path)
    msgs = [str(p) for p in m.problems]
    assert msgs == [
        f"{path}:2: not valid JSON (Expecting property name enclosed in double quotes)",
        f"{path}:3: field 'bucket' must be 'short' or 'long'; got 'medium'",
        f"{path}:4: field 'answer' must index the options (0..1); got 5",
        f"{path}:5: group 'g': unknown videos ['zz'] (no valid video line has these ids)",
    ]
    assert list(m.videos) == ["a"]


def test_import_then_flip_suite_end_to_end(tmp_path, pytester, small_set):
    """EgoSchema-format annotations over synthetic clips named like the dataset's files, then
    ``pytest -m flip --model sim:letter-bias --posbias-data manifest.jsonl``."""
    src = load_manifest(small_set)
    videos = tmp_path / "ego_videos"
    videos.mkdir()
    qs, answers = [], {}
    for k, q in enumerate([q for q in src.mcq if len(q.options) == 5][:40]):
        uid = f"{k:08d}-aaaa-bbbb-cccc-{k:012d}"
        shutil.copy(q.path, videos / f"{uid}.mp4")
        qs.append({"q_uid": uid, "question": q.question, **{f"option {i}": o for i, o in enumerate(q.options)}})
        answers[uid] = q.answer
    (tmp_path / "questions.json").write_text(json.dumps(qs))
    (tmp_path / "subset_answers.json").write_text(json.dumps(answers))
    out = tmp_path / "ego.jsonl"
    run_import("egoschema", videos=str(videos), annotations=str(tmp_path / "questions.json"), out=str(out))
    write_suite_project(pytester.path, None, ("test_phase_order.py",), "[tool.posbias.probes.phase]\nitems = 40\norderings = 3\n",
                        model=None)
    # with a space, pytest would take the manifest path for a test path and miss the project's settings
    wrong = pytester.runpytest("-m", "flip", "--posbias-model", "sim:letter-bias", "--posbias-data", str(out), "-p", "no:randomly")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    assert f"write --posbias-data={out} (with '=')" in wrong.stderr.str()
    res = pytester.runpytest("-m", "flip", "--posbias-model", "sim:letter-bias", f"--posbias-data={out}", "-p", "no:randomly",
                             "--posbias-json=flip.json")
    assert res.parseoutcomes().get("errors", 0) == 0, res.stdout.str()[-3000:]
    data = json.loads((pytester.path / "flip.json").read_text())
    # sequential design (the default): at most the 40 imported questions, stopping at a planned look
    assert len(data["verdicts"]) == 6
    assert all(v["extra"]["n_max"] == 40 and v["n"] in (10, 20, 30, 40) for v in data["verdicts"])


def test_an_import_with_no_usable_entry_is_an_error_that_writes_nothing(tmp_path, capsys):
    """Every entry skipped: the command names the annotations and why, exits 2 and leaves no empty manifest."""
    from pytest_posbias.cli import main

    ann = tmp_path / "ann.json"
    ann.write_text(json.dumps([{"video": "a.mp4"}, {"video": "b.mp4"}]))
    out = tmp_path / "m.jsonl"
    assert main(["data", "import", "mvbench", "--annotations", str(ann), "--videos", str(tmp_path),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--annotations {ann}: no usable mvbench entry" in err
    assert "all 2 entries skipped: 2 missing 'question' or 'video' string" in err
    assert not out.exists() and not out.with_suffix(".jsonl.import.json").exists()
