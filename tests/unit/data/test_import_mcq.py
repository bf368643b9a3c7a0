"""data.import_mcq: MVBench, Video-MME, EgoSchema and NExT-QA in their official formats, with malformed
entries; the ``--sample`` subset."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.manifest_lines import check_schema, lines_of

from pytest_posbias.data.import_mcq import import_egoschema, import_mvbench, import_nextqa, import_videomme
from pytest_posbias.data.importers import run_import
from pytest_posbias.data.manifest import load_manifest
from pytest_posbias.errors import ConfigError


def test_mvbench_tasks_with_frame_folders(tmp_path, vids):
    """MVBench: answers as candidate indices, start/end kept, frame folders decodable, bad entries skipped by reason."""
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
    """Video-MME: letter prefixes stripped, the answer letter as an index; parquet gives the same items as JSON."""
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
    """EgoSchema: answers from subset_answers.json; --sample keeps random.Random(seed).sample of the valid items."""
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
    """NExT-QA: videos found in subfolders, integer answers; bad rows skipped by reason."""
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


def _videos(tmp_path, *names):
    d = tmp_path / "videos"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / n).write_bytes(b"")
    return d


def _vmme_row(qid, options, answer="B"):
    return {"videoID": "vm", "question_id": qid, "question": f"Which {qid}?", "options": options, "answer": answer,
            "task_type": "Counting Problem"}


def test_videomme_accepts_the_letter_prefixes_it_documents_and_rejects_misordered_ones(tmp_path):
    """'A.', '(A)', 'A)' and 'A:' prefixes are stripped; letters out of order are skipped, not re-lettered."""
    rows = [_vmme_row("dot", ["A. one", "B. two"]), _vmme_row("paren", ["(A) one", "(B) two"]),
            _vmme_row("close", ["A) one", "B) two"]), _vmme_row("colon", ["A: one", " B: two"], answer=" B "),
            _vmme_row("order", ["B. one", "A. two"])]
    ann = tmp_path / "vmme.json"
    ann.write_text(json.dumps(rows))
    out = tmp_path / "m.jsonl"
    rep = import_videomme(_videos(tmp_path, "vm.mp4"), ann, out)
    items = lines_of(out)
    assert [i["id"] for i in items] == ["videomme-dot", "videomme-paren", "videomme-close", "videomme-colon"]
    assert all(i["options"] == ["one", "two"] and i["answer"] == 1 for i in items)
    assert rep.skipped == {"'options' are not letter-prefixed A., B., ...": 1}


def test_videomme_answer_letter_beyond_the_options_is_skipped(tmp_path):
    """Answer 'C' with two options does not index them: skipped, never clamped."""
    ann = tmp_path / "vmme.json"
    ann.write_text(json.dumps([_vmme_row("ok", ["A. one", "B. two"]), _vmme_row("c", ["A. one", "B. two"], "C")]))
    out = tmp_path / "m.jsonl"
    rep = import_videomme(_videos(tmp_path, "vm.mp4"), ann, out)
    assert [i["id"] for i in lines_of(out)] == ["videomme-ok"]
    assert rep.skipped == {"'answer' is not an option letter": 1}


def _ego(tmp_path, answers):
    qs = [{"q_uid": uid, "question": "What?", **{f"option {i}": f"o{i}" for i in range(5)}} for uid in answers]
    (tmp_path / "questions.json").write_text(json.dumps(qs))
    (tmp_path / "subset_answers.json").write_text(json.dumps(answers))
    return _videos(tmp_path, *(f"{u}.mp4" for u in answers))


def test_egoschema_answers_as_digit_strings_count_and_booleans_do_not(tmp_path):
    """'3' is answer 3; true, 5 and -1 are no answer index and the entry is skipped."""
    videos = _ego(tmp_path, {"a": "3", "b": True, "c": 5, "d": -1, "e": 0})
    out = tmp_path / "m.jsonl"
    rep = import_egoschema(videos, tmp_path / "questions.json", out)
    assert [(i["id"], i["answer"]) for i in lines_of(out)] == [("egoschema-a", 3), ("egoschema-e", 0)]
    assert rep.skipped == {"no answer in subset_answers.json": 3}


def test_egoschema_without_its_answers_file_names_the_answers_option(tmp_path):
    """No subset_answers.json beside questions.json: a ConfigError naming --answers and the file looked for."""
    _ego(tmp_path, {"a": 1})
    (tmp_path / "subset_answers.json").unlink()
    with pytest.raises(ConfigError, match=r"--answers .*subset_answers.json: no such file"):
        import_egoschema(tmp_path / "videos", tmp_path / "questions.json", tmp_path / "m.jsonl")


def test_egoschema_sample_at_least_the_valid_items_keeps_all_in_order(tmp_path):
    """--sample N with N >= the usable items keeps them all, in file order, and records no sample skip."""
    videos = _ego(tmp_path, {"a": 1, "b": 2, "c": 3})
    out = tmp_path / "m.jsonl"
    rep = import_egoschema(videos, tmp_path / "questions.json", out, sample=3)
    assert [i["id"] for i in lines_of(out)] == ["egoschema-a", "egoschema-b", "egoschema-c"]
    assert not rep.skipped


def _nextqa(tmp_path, header, rows):
    path = tmp_path / "val.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_nextqa_csv_without_the_needed_columns_lists_them(tmp_path):
    """A CSV missing a4: a ConfigError naming the needed columns and the ones the file has."""
    path = _nextqa(tmp_path, ["video", "question", "answer", "a0", "a1", "a2", "a3"], [[1, "q", 0, "a", "b", "c", "d"]])
    with pytest.raises(ConfigError, match=r"NExT-QA CSV needs columns \['a0', .*'video'\]; has \['video', 'question'"):
        import_nextqa(_videos(tmp_path), path, tmp_path / "m.jsonl")


def test_nextqa_answer_outside_the_five_options_is_skipped(tmp_path):
    """Answer 5 (or -1) does not index a0..a4: skipped with its reason, the valid row kept."""
    header = ["video", "question", "answer", "qid", "a0", "a1", "a2", "a3", "a4"]
    path = _nextqa(tmp_path, header, [[7, "q?", 5, 1, *"abcde"], [7, "q?", -1, 2, *"abcde"], [7, "q?", 4, 3, *"abcde"]])
    out = tmp_path / "m.jsonl"
    rep = import_nextqa(_videos(tmp_path, "7.mp4"), path, out)
    assert [(i["id"], i["answer"], i["options"][i["answer"]]) for i in lines_of(out)] == [("nextqa-7-3", 4, "e")]
    assert rep.skipped == {"'answer' outside 0..4": 2}


def test_mvbench_task_file_that_is_not_a_list_is_skipped_by_name(tmp_path):
    """A task file holding an object: skipped under its file name; the other task files still import."""
    tasks = tmp_path / "json"
    tasks.mkdir()
    (tasks / "broken_task.json").write_text(json.dumps({"video": "a.mp4"}))
    (tasks / "good_task.json").write_text(json.dumps([{"video": "sub/a.mp4", "question": "Q?", "candidates": ["x", "y"],
                                                       "answer": "y"}]))
    out = tmp_path / "m.jsonl"
    rep = import_mvbench(_videos(tmp_path, "a.mp4"), tasks, out)
    assert [(i["id"], i["answer"], i["kind"]) for i in lines_of(out)] == [("mvbench-good_task-0", 1, "good_task")]
    assert rep.examples["task file is not a JSON list"] == ["broken_task.json"]


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 12), st.integers(1, 15), st.integers(0, 2**31))
def test_sample_is_the_seeded_random_sample_of_the_usable_items(n, sample, seed):
    """--sample k --seed s keeps random.Random(s).sample(items, k) in that order, and counts the rest as skipped."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        videos = _ego(tmp_path, {f"u{k:02d}": k % 5 for k in range(n)})
        out = tmp_path / "m.jsonl"
        rep = import_egoschema(videos, tmp_path / "questions.json", out, sample=sample, seed=seed)
        ids = [f"egoschema-u{k:02d}" for k in range(n)]
        want = random.Random(seed).sample(ids, sample) if sample < n else ids
        assert [i["id"] for i in lines_of(out)] == want
        assert sum(rep.skipped.values()) == max(0, n - sample)


@pytest.mark.parametrize("entry", [
    {"candidates": ["yes", "Yes"], "answer": "yes"},
    {"candidates": ["", "x"], "answer": "x"},
    {"candidates": ["x", "y"], "answer": "x", "start": 5, "end": 2},
    {"candidates": ["x", "y"], "answer": "y"},  # the first item again, under another id
], ids=["same-text-options", "blank-option", "start-after-end", "repeated-item"])
def test_mvbench_skips_an_item_the_manifest_loader_would_reject(tmp_path, entry):
    """An MVBench entry the manifest cannot hold is skipped with its reason: every written item loads cleanly."""
    tasks = tmp_path / "json"
    tasks.mkdir()
    good = {"video": "a.mp4", "question": "Q?", "candidates": ["x", "y"], "answer": "y"}
    (tasks / "task.json").write_text(json.dumps([good, {"video": "a.mp4", "question": "Q?", **entry}]))
    out = tmp_path / "m.jsonl"
    rep = import_mvbench(_videos(tmp_path, "a.mp4"), tasks, out)
    problems = [str(p) for p in load_manifest(out, check_files=False).problems]
    assert not problems, problems
    assert sum(rep.skipped.values()) == 1


@pytest.mark.parametrize("window", [{"start": "abc", "end": 2}, {"start": "5.0"}, {"end": [2]}, {"start": True},
                                    {"start": 10 ** 400}], ids=["text", "numeric-text", "list", "bool", "huge"])
def test_mvbench_skips_an_item_whose_window_is_not_a_number(tmp_path, window):
    """A window bound that is not a number skips the item naming it: written without its window, the item
    would ask about the whole clip."""
    tasks = tmp_path / "json"
    tasks.mkdir()
    good = {"video": "a.mp4", "question": "Q?", "candidates": ["x", "y"], "answer": "y", "start": 1, "end": 2}
    (tasks / "task.json").write_text(json.dumps([good, {**good, "question": "Other?", **window}]))
    out = tmp_path / "m.jsonl"
    rep = import_mvbench(_videos(tmp_path, "a.mp4"), tasks, out)
    assert [(i["start"], i["end"]) for i in lines_of(out)] == [(1.0, 2.0)]
    assert rep.skipped == {f"{next(iter(window))!r} is not a finite number of seconds": 1}, rep.skipped
