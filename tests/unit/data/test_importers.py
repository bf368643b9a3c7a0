"""data.importers: the dispatch of ``run_import`` and an imported manifest run by the suites."""

from __future__ import annotations

import json
import shutil

import pytest
from support.suite_project import write_suite_project

from pytest_posbias.data.importers import run_import
from pytest_posbias.data.manifest import load_manifest

pytestmark = pytest.mark.usefixtures("heavy_modules")


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


def test_an_unknown_format_is_an_error_listing_the_formats(tmp_path):
    """run_import of a format it has no importer for: a ConfigError naming every format and the one given."""
    from pytest_posbias.data.importers import FORMATS
    from pytest_posbias.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        run_import("kinetics", videos=str(tmp_path), annotations=str(tmp_path / "a.json"), out=str(tmp_path / "m.jsonl"))
    assert str(err.value) == f"FORMAT must be one of {', '.join(FORMATS)}; got 'kinetics'"


@pytest.mark.parametrize("fmt", ["activitynet", "news", "mvbench", "videomme", "egoschema", "nextqa"])
def test_each_format_reaches_its_own_importer(tmp_path, fmt):
    """run_import(fmt) runs the importer of fmt: the report it returns carries that format's name."""
    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "a.mp4").write_bytes(b"")
    ann = tmp_path / "ann"
    if fmt == "news":
        ann.mkdir()
        (ann / "vid.a.info.json").write_text(json.dumps({"description": "One.", "duration": 20}))
    elif fmt == "nextqa":
        ann.write_text("video,question,answer,a0,a1,a2,a3,a4\na,q?,1,p,q,r,s,t\n")
    else:
        ann.write_text(json.dumps({
            "activitynet": {"v_a": {"duration": 20, "sentences": ["One."]}},
            "mvbench": [{"video": "a.mp4", "question": "q?", "candidates": ["x", "y"], "answer": "x"}],
            "videomme": [{"videoID": "a", "question_id": "1", "question": "q?", "options": ["A. x", "B. y"],
                          "answer": "A"}],
            "egoschema": [{"q_uid": "a", "question": "q?", **{f"option {i}": f"o{i}" for i in range(5)}}],
        }[fmt]))
        if fmt == "egoschema":
            (tmp_path / "answers.json").write_text(json.dumps({"a": 2}))
    rep = run_import(fmt, videos=str(videos), annotations=str(ann), out=str(tmp_path / "m.jsonl"),
                     answers=str(tmp_path / "answers.json") if fmt == "egoschema" else None, groups=1)
    assert rep.format == fmt and sum(rep.written.values()) >= 1
