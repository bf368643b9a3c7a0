"""Bad data never crashes a gate: a corpus of broken manifests and videos, written into
tmp_path by the tests, and what each must do instead of a traceback."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.suite_project import write_suite_project

from pytest_posbias.data.manifest import SCHEMA_PATH, load_manifest, parse_line, require_usable
from pytest_posbias.data.problems import DataProblem, problems_in_records, summarize_problems
from pytest_posbias.errors import ConfigError
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video import decode as D
from pytest_posbias.video import files as F
from pytest_posbias.video.frames import FrameSpec, FrameStore

# --------------------------------------------------------------------------- the corpus


def _encode(path: Path, frames: int, *, faststart: bool = False) -> Path:
    """A small H.264 mp4 of ``frames`` frames (faststart: the index at the front, so a cut file still probes)."""
    import av

    with av.open(str(path), "w", options={"movflags": "faststart"} if faststart else {}) as c:
        s = c.add_stream("libx264", rate=6)
        s.width, s.height, s.pix_fmt = 64, 64, "yuv420p"
        s.options = {"g": "6"}
        for i in range(frames):
            img = np.full((64, 64, 3), (i * 7) % 255, dtype=np.uint8)
            for pkt in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, synthetic_clips) -> dict[str, Path]:
    """Good clips plus one of each kind of bad video."""
    pytest.importorskip("av")
    d = tmp_path_factory.mktemp("bad-videos")
    out = {f"good{k}": Path(shutil.copy(p, d / f"good{k}.mp4")) for k, p in enumerate(synthetic_clips)}
    (d / "zero.mp4").write_bytes(b"")
    (d / "text.mp4").write_text("this is a text file, not a video\n" * 40)
    data = synthetic_clips[0].read_bytes()
    (d / "cut.mp4").write_bytes(data[: len(data) // 2])  # index (moov) at the end: the header is gone
    fs = _encode(d / "fs.mp4", 60, faststart=True).read_bytes()
    (d / "cut-late.mp4").write_bytes(fs[: len(fs) // 2])  # probes fine, fails when the later frames are decoded
    _encode(d / "one.mp4", 1)
    out.update({k: d / f"{k}.mp4" for k in ("zero", "text", "cut", "cut-late", "one")})
    return out


def video_line(vid: str, path: Path, **kw) -> dict:
    return {"type": "video", "id": vid, "path": str(path), "domain": "cooking", "bucket": "short",
            "references": ["A red circle moves."], **kw}


def mcq_line(qid: str, video: str, n_options: int = 5, answer: int = 0) -> dict:
    opts = ["red", "blue", "green", "yellow", "white", "black"][:n_options]
    return {"type": "mcq", "id": qid, "video": video, "question": "What colour is the circle?", "options": opts,
            "answer": answer}


def write_jsonl(path: Path, lines: list, *, prefix: bytes = b"", encoding: str = "utf-8") -> Path:
    body = "".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines)
    path.write_bytes(prefix + body.encode(encoding))
    return path


# --------------------------------------------------------------------------- manifests


def test_utf8_bom_is_accepted(tmp_path, synthetic_clips):
    m = load_manifest(write_jsonl(tmp_path / "bom.jsonl", [video_line("v0", synthetic_clips[0]), mcq_line("q0", "v0")],
                                  prefix=b"\xef\xbb\xbf"))
    assert m.problems == []
    assert list(m.videos) == ["v0"] and [q.id for q in m.mcq] == ["q0"]  # line 1 is not dropped


def test_latin1_line_is_reported_with_file_and_byte_offset_and_the_rest_loads(tmp_path, synthetic_clips):
    good = video_line("v0", synthetic_clips[0])
    bad = mcq_line("q1", "v0") | {"question": "Quelle couleur a le cercle à gauche ?"}
    path = write_jsonl(tmp_path / "latin1.jsonl", [good, bad, mcq_line("q2", "v0")], encoding="latin-1")
    offset = path.read_bytes().index(b"\xe0")
    m = load_manifest(path)
    assert [q.id for q in m.mcq] == ["q2"] and list(m.videos) == ["v0"]
    (p,) = m.problems
    assert p.kind == "encoding" and p.line == 2 and p.file == str(path)
    assert str(p).startswith(f"{path}:2: not UTF-8 text: byte 0xe0 at byte offset {offset}")


def test_data_validate_names_the_file_and_offset_of_a_latin1_manifest(tmp_path, synthetic_clips):
    path = write_jsonl(tmp_path / "latin1.jsonl", [video_line("vidé", synthetic_clips[0])], encoding="latin-1")
    res = subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "data", "validate", "--out", str(path)],
                         capture_output=True, text=True, timeout=60)
    offset = path.read_bytes().index(b"\xe9")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"{path}:1: not UTF-8 text: byte 0xe9 at byte offset {offset}" in res.stdout
    assert "no usable item" in res.stderr


def test_data_validate_opens_each_video_as_a_run_will(tmp_path, synthetic_clips):
    """`posbias data validate` names a video file that passes the file-system checks but cannot be read (text
    named .mp4, an MP4 cut short) and exits 1; a manifest whose videos all read exits 0."""
    text = tmp_path / "notes.mp4"
    text.write_text("not a video at all\n" * 20)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(synthetic_clips[1].read_bytes()[:3000])
    good = write_jsonl(tmp_path / "good.jsonl", [video_line("v0", synthetic_clips[0])])
    bad = write_jsonl(tmp_path / "bad.jsonl", [video_line("v0", synthetic_clips[0]), video_line("t", text),
                                               video_line("c", cut)])

    def validate(path):
        return subprocess.run([sys.executable, "-m", "pytest_posbias.cli", "data", "validate", "--out", str(path)],
                              capture_output=True, text=True, timeout=120)

    ok, res = validate(good), validate(bad)
    assert ok.returncode == 0 and "0 unusable video files" in ok.stdout
    assert res.returncode == 1 and "2 unusable video files" in res.stdout and "Traceback" not in res.stderr
    assert "video 't'" in res.stdout and "video 'c'" in res.stdout and "truncated" in res.stdout


def test_duplicate_ids_are_data_problems_with_both_line_numbers(tmp_path, synthetic_clips):
    a, b = synthetic_clips[:2]
    lines = [video_line("v0", a), video_line("v1", b), video_line("v0", b),
             {"type": "group", "id": "g", "domain": "cooking", "bucket": "short", "P": 2, "videos": ["v0", "v1"]},
             mcq_line("q", "v0"), mcq_line("q", "v1"),
             {"type": "group", "id": "g", "domain": "cooking", "bucket": "short", "P": 2, "videos": ["v1", "v0"]}]
    m = load_manifest(write_jsonl(tmp_path / "dup.jsonl", lines))
    got = {(p.kind, p.item, p.line): p.message for p in m.problems}
    assert set(got) == {("duplicate-id", "video 'v0'", 3), ("duplicate-id", "mcq 'q'", 6), ("duplicate-id", "group 'g'", 7)}
    assert "first on line 1, again on line 3" in got[("duplicate-id", "video 'v0'", 3)]
    assert "first on line 5, again on line 6" in got[("duplicate-id", "mcq 'q'", 6)]
    assert "first on line 4, again on line 7" in got[("duplicate-id", "group 'g'", 7)]
    assert m.videos["v0"].path == a and [g.videos for g in m.groups] == [("v0", "v1")] and m.mcq[0].video == "v0"


SCHEMA_REJECTS = [
    ("empty video id", {"type": "video", "id": "", "path": "a.mp4", "domain": "d", "bucket": "short", "references": ["x"]}, "'id'"),
    ("negative duration", {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "short", "references": ["x"],
                           "duration": -5}, "'duration' must be >= 0"),
    ("empty path", {"type": "video", "id": "v", "path": "", "domain": "d", "bucket": "short", "references": ["x"]}, "'path'"),
    ("empty domain", {"type": "video", "id": "v", "path": "a.mp4", "domain": "", "bucket": "short", "references": ["x"]}, "'domain'"),
    ("source not a string", {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "short", "references": ["x"],
                             "source": 3}, "'source'"),
    ("no references", {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "short", "references": []}, "'references'"),
    ("empty group id", {"type": "group", "id": "", "domain": "d", "bucket": "short", "P": 2, "videos": ["a", "b"]}, "'id'"),
    ("group domain not a string", {"type": "group", "id": "g", "domain": 1, "bucket": "short", "P": 2, "videos": ["a", "b"]}, "'domain'"),
    ("P = 3", {"type": "group", "id": "g", "domain": "d", "bucket": "short", "P": 3, "videos": ["a", "b", "c"]}, "'P'"),
    ("repeated group video", {"type": "group", "id": "g", "domain": "d", "bucket": "short", "P": 2, "videos": ["a", "a"]}, "'videos'"),
    ("empty mcq id", mcq_line("", "v"), "'id'"),
    ("empty mcq video", mcq_line("q", ""), "'video'"),
    ("one option", mcq_line("q", "v", n_options=1), "'options'"),
    ("negative answer", mcq_line("q", "v", answer=-1), "'answer'"),
    ("tags not strings", mcq_line("q", "v") | {"tags": [1]}, "'tags'"),
    ("kind not a string", mcq_line("q", "v") | {"kind": 3}, "'kind'"),
    ("question not a string", mcq_line("q", "v") | {"question": None}, "'question'"),
    ("start not a number", mcq_line("q", "v") | {"start": "0"}, "'start'"),
    ("window ending before 0 s", mcq_line("q", "v") | {"start": -5, "end": -2}, "'end' must be >= 0"),
    ("references all blank", {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "short",
                              "references": ["", " \t"]}, "'references' must hold a non-blank sentence"),
    ("NUL in a video path", {"type": "video", "id": "v", "path": "a\0.mp4", "domain": "d", "bucket": "short",
                             "references": ["x"]}, "'path' holds a NUL character"),
    ("NUL in an mcq video", mcq_line("q", "v\0.mp4"), "'video' holds a NUL character"),
]
# what a JSON Schema cannot say, which the loader checks on top (valid for the schema, rejected by the loader)
LOADER_ONLY = [
    ("answer past the options", mcq_line("q", "v", n_options=3, answer=3), "'answer'"),
    ("mcq id with surrounding whitespace", mcq_line(" q ", "v"), "'id' must not begin or end with whitespace"),
    ("whitespace-only video id", {"type": "video", "id": "  ", "path": "a.mp4", "domain": "d", "bucket": "short",
                                  "references": ["x"]}, "'id' must be a non-empty string"),
    ("blank option", mcq_line("q", "v") | {"options": ["red", " ", "blue"]}, "option 1 is empty"),
    ("the same option twice", mcq_line("q", "v") | {"options": ["red", "Blue", "blue "]}, "options 1 and 2 are the same text"),
    ("group of 2 listing 3 videos", {"type": "group", "id": "g", "domain": "d", "bucket": "s", "P": 2, "videos": ["a", "b", "c"]},
     "'videos'"),
    ("end before start", mcq_line("q", "v") | {"start": 5, "end": 2}, "'start'/'end'"),
    ("integer-valued float answer", mcq_line("q", "v") | {"answer": 1.0}, "'answer'"),
]
BOTH_ACCEPT = [
    {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "long", "references": ["x"], "duration": 0,
     "reference_style": "news", "source": "anet", "extra_field": 1},
    {"type": "video", "id": "v", "path": "a.mp4", "domain": "d", "bucket": "short", "references": ["x"], "duration": None},
    {"type": "group", "id": "g", "domain": "", "bucket": "", "P": 4, "videos": ["a", "b", "c", "d"]},
    mcq_line("q", "v") | {"question": "", "start": -1.5, "end": None, "tags": [], "kind": "", "source": "s"},
    mcq_line("q", "v", n_options=2, answer=1),
]


@pytest.mark.parametrize(("name", "line", "field"), SCHEMA_REJECTS + LOADER_ONLY, ids=[x[0] for x in SCHEMA_REJECTS + LOADER_ONLY])
def test_loader_rejects_what_the_schema_and_the_docs_reject(tmp_path, name, line, field):
    with pytest.raises(ValueError, match=field.replace("(", r"\(").replace("'", "'")):
        parse_line(line, tmp_path)


def test_loader_agrees_with_the_shipped_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)

    def loader_ok(line: dict) -> bool:
        try:
            parse_line(line, Path("."))
        except ValueError:
            return False
        return True

    for name, line, _ in SCHEMA_REJECTS:
        assert not validator.is_valid(line), f"the schema accepts {name}: the corpus is out of date"
        assert not loader_ok(line), name
    for name, line, _ in LOADER_ONLY:
        assert validator.is_valid(line) and not loader_ok(line), name
    for line in BOTH_ACCEPT:
        assert validator.is_valid(line) and loader_ok(line), line


def test_a_line_with_a_repeated_key_is_a_data_problem_and_the_rest_loads(tmp_path, synthetic_clips):
    a = synthetic_clips[0]
    p = tmp_path / "dupkey.jsonl"
    good = json.dumps(mcq_line("q1", str(a)))
    video = json.dumps(str(a))
    p.write_text(good + "\n" + '{"type": "mcq", "id": "q2", "video": ' + video
                 + ', "question": "?", "options": ["a", "b"], "answer": 0, "answer": 1}\n')
    m = load_manifest(p)
    (prob,) = m.problems
    assert (prob.kind, prob.line) == ("bad-line", 2) and "'answer' appears twice" in prob.message
    assert [q.id for q in m.mcq] == ["q1"]


def test_manifest_without_any_usable_item_names_the_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ConfigError, match=r"empty\.jsonl: no usable item in the manifest \(the file holds no item lines\)"):
        require_usable(empty)
    bad = write_jsonl(tmp_path / "bad.jsonl", ["{oops", {"type": "video", "id": ""}])
    with pytest.raises(ConfigError, match=r"bad\.jsonl: no usable item in the manifest \(2 bad lines: .*bad\.jsonl:1: not valid JSON"):
        require_usable(bad)


# --------------------------------------------------------------------------- videos


@pytest.mark.parametrize(("name", "kind", "error", "words"), [
    ("zero", "empty-video", F.EmptyVideoError, "file is empty (0 bytes)"),
    ("text", "unreadable-video", D.VideoDecodeError, "no known container signature"),
    ("cut", "truncated-video", F.TruncatedVideoError, "truncated or damaged"),
])
def test_unusable_videos_are_named_and_classified(corpus, name, kind, error, words):
    store = FrameStore()
    with pytest.raises(error) as info:
        store.info(corpus[name])
    assert F.problem_kind(info.value) == kind and words in str(info.value) and str(corpus[name]) in str(info.value)
    (p,) = store.problems.values()
    assert (p.kind, p.file) == (kind, str(corpus[name]))


def test_video_truncated_after_its_header_is_found_when_decoded(corpus, tmp_path):
    seen: list[DataProblem] = []
    store = FrameStore(disk_dir=tmp_path / "frames", on_problem=seen.append)
    info = store.info(corpus["cut-late"])
    assert info.frame_count == 60 and store.problems == {}
    spec = store.clip(corpus["cut-late"], [0, 20, 40, 59], size=32)
    for _ in range(2):  # reported once, however often it fails
        with pytest.raises(F.TruncatedVideoError, match="truncated or damaged"):
            store.materialize(spec)
    assert [(p.kind, p.file) for p in seen] == [("truncated-video", str(corpus["cut-late"]))]


def test_one_frame_video_is_too_short_not_sixteen_copies(corpus):
    store = FrameStore()
    assert store.info(corpus["one"]).frame_count == 1
    with pytest.raises(F.TooShortError, match=r"too short for 16 frames: the clip has 1"):
        store.clip(corpus["one"], [0] * 16)
    with pytest.raises(F.TooShortError):
        FrameSpec.from_video(corpus["one"], [0, 0])
    assert [p.kind for p in store.problems.values()] == ["too-short"]
    assert len(store.clip(corpus["one"], [0])) == 1  # a request for one frame is fine


def test_container_signatures(tmp_path):
    for k, (head, want) in enumerate([(b"\x00\x00\x00\x20ftypisom", True), (b"\x1a\x45\xdf\xa3\x01", True),
                                      (b"RIFF\0\0\0\0AVI LIST", True), (b"hello world, a caption", False),
                                      (b"\x89PNG\r\n\x1a\n", False)]):
        f = tmp_path / f"{k}.mp4"
        f.write_bytes(head + b" " * 300)
        assert F.has_container_signature(f) is want, head


def test_problems_are_grouped_by_kind_with_count_and_example():
    ps = [DataProblem("empty-video", "/d/a.mp4", "file is empty (0 bytes)", "/d/a.mp4"),
          DataProblem("bad-line", "line 3", "not valid JSON", "/d/m.jsonl", 3),
          DataProblem("empty-video", "/d/b.mp4", "file is empty (0 bytes)", "/d/b.mp4"),
          DataProblem("empty-video", "/d/a.mp4", "file is empty (0 bytes)", "/d/a.mp4")]  # the same one from a second worker
    got = summarize_problems([p.to_dict() for p in ps])
    assert [(g["kind"], g["count"]) for g in got] == [("bad-line", 1), ("empty-video", 2)]
    assert got[0]["example"] == "/d/m.jsonl:3: not valid JSON" and got[1]["example"] == "/d/a.mp4: file is empty (0 bytes)"
    records = [{"kind": "observation", "probe": "data", "type": "manifest", "problems": [ps[1].to_dict()]},
               {"kind": "observation", "probe": "data", "type": "problem", "problem": ps[0].to_dict()},
               {"kind": "observation", "probe": "phase", "type": "summary", "problems": ["item x: not data"]},
               {"kind": "observation", "probe": "data", "type": "problem", "problem": ps[3].to_dict()}]
    assert problems_in_records(records) == [ps[1], ps[0]]


# --------------------------------------------------------------------------- concurrent frame cache


def _decode_into(args: tuple[str, str, list[int]]) -> list[bytes]:
    clip, disk, idx = args
    store = FrameStore(disk_dir=disk, disk_write_min_s=0)  # a store per writer: nothing shared but the folder
    return [f.tobytes() for f in store.frames(clip, D.content_hash(clip), idx, size=32, aspect="stretch")]


def _check_cache(disk: Path, clip: Path, idx: list[int], results: list[list[bytes]]) -> None:
    want = [f.tobytes() for f in D.read_frames(clip, idx, size=32, aspect="stretch")]
    assert all(r == want for r in results)  # every reader saw whole, correct frames
    pngs = sorted(disk.rglob("*.png"))
    assert len(pngs) == len(idx) and not [p for p in disk.rglob("*") if p.suffix == ".tmp" or ".tmp" in p.name]
    fresh = FrameStore(disk_dir=disk)
    got = fresh.frames(clip, D.content_hash(clip), idx, size=32, aspect="stretch")
    assert fresh.disk_hits == len(idx) and fresh.decodes == 0 and [f.tobytes() for f in got] == want


def _threads(clip: Path, disk: Path, idx: list[int], n: int = 8) -> list[list[bytes]]:
    results: list[list[bytes]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def work() -> None:
        try:
            barrier.wait()  # start together: the writers race for the same files
            results.append(_decode_into((str(clip), str(disk), idx)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


def test_frame_cache_concurrent_writers_and_readers_threads(tmp_path, synthetic_clips):
    clip, idx = synthetic_clips[0], [0, 5, 10, 15, 20, 25]
    for rnd in range(3):
        disk = tmp_path / f"frames{rnd}"
        _check_cache(disk, clip, idx, _threads(clip, disk, idx))


def _rounds_in_process(args: tuple[str, str, list[int], object, int]) -> list[list[bytes]]:
    clip, disk, idx, barrier, rounds = args
    out = []
    for r in range(rounds):
        barrier.wait(timeout=120)  # type: ignore[attr-defined] - every process starts each round together
        out.append(_decode_into((clip, f"{disk}/{r}", idx)))
    return out


def test_frame_cache_concurrent_writers_and_readers_processes(tmp_path, synthetic_clips):
    clip, idx, n, rounds = synthetic_clips[1], [1, 6, 11, 16, 21, 26], 4, 4
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(n) as pool:
        barrier = manager.Barrier(n)
        per_process = pool.map(_rounds_in_process, [(str(clip), str(tmp_path), idx, barrier, rounds)] * n, chunksize=1)
    for r in range(rounds):
        _check_cache(tmp_path / str(r), clip, idx, [res[r] for res in per_process])


# --------------------------------------------------------------------------- the phase probe on mixed option counts


def test_mixed_option_counts_run_the_order_phase_and_fusion_gates(tmp_path, synthetic_clips):
    pytest.importorskip("av")
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.gates import phase_verdict
    from pytest_posbias.probes.phase import fused
    from pytest_posbias.run.context import RunContext

    lines = [video_line(f"v{k}", p) for k, p in enumerate(synthetic_clips)]
    lines += [mcq_line(f"q{k}", f"v{k % 3}", n_options=5, answer=k % 5) for k in range(5)]
    lines += [mcq_line("q3opt", "v0", n_options=3, answer=1), mcq_line("q2opt", "v1", n_options=2, answer=0)]
    manifest = write_jsonl(tmp_path / "mixed.jsonl", lines)
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), data=str(manifest), cache=str(tmp_path / "cache"),
                                       sequential=False, n_resamples=199),
                            PosbiasConfig(), rootdir=tmp_path, worker="t",
                            run_id="mixed")
    try:
        r = ctx.phase("sim:unbiased", "fusion")
        assert {len(i.options) for i in r.items} == {2, 3, 5} and len(r.items) == 7
        f = fused(r, ["phase:0", "phase:1", "phase:2"])
        assert f is not None and all(0 <= a < len(i.options) for a, i in zip(f, r.items, strict=True))
        for gate, which in (("order", None), ("phase", "0-1"), ("fusion", None)):
            v = phase_verdict(ctx, gate, "sim:unbiased", which)
            assert v.n > 0 and np.isfinite(v.estimate), (gate, v)
        order = ctx.phase("sim:unbiased", "order")
        ans = order.condition_answers["phase:0"]
        assert ans.shape == (7, order.spec.orderings)
        k3 = [i.id for i in order.items].index("q3opt")
        assert set(ans[k3].tolist()) <= {0, 1, 2}  # content indices of the 3-option question map back within it
    finally:
        ctx.close()


# --------------------------------------------------------------------------- the CLI


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest_posbias.cli", *args], capture_output=True, text=True, timeout=timeout)


def _one_line_error(res: subprocess.CompletedProcess, *needles: str) -> None:
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    for n in needles:
        assert n in res.stderr, res.stderr


def test_cli_models_tiny_unknown_family(tmp_path):
    _one_line_error(_cli("models", "tiny", "nosuch", str(tmp_path / "out")), "unknown family 'nosuch'", "qwen2_vl")
    assert not (tmp_path / "out").exists()


def test_cli_report_missing_and_binary_logs(tmp_path):
    _one_line_error(_cli("report", "/nonexistent.jsonl", "-o", str(tmp_path / "x.html")), "/nonexistent.jsonl: no such run log")
    binary = tmp_path / "run.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    _one_line_error(_cli("report", str(binary), "-o", str(tmp_path / "x.html")), f"{binary}: a binary file (NUL byte at byte offset 8)")
    not_a_log = tmp_path / "other.jsonl"
    not_a_log.write_text('{"a": 1}\n')
    _one_line_error(_cli("report", str(not_a_log), "-o", str(tmp_path / "x.html")), "not a posbias run log")
    assert not (tmp_path / "x.html").exists()


def test_cli_text_audit_binary_and_latin1(tmp_path):
    binary = tmp_path / "model.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    _one_line_error(_cli("text-audit", str(binary)), f"{binary}: a binary file (NUL byte at byte offset 0)")
    latin = tmp_path / "caps.txt"
    latin.write_bytes("a caption\nune légende\n".encode("latin-1"))
    _one_line_error(_cli("text-audit", str(latin)), f"{latin}: not UTF-8 text (byte 0xe9 at byte offset 15)")
    _one_line_error(_cli("text-audit", str(tmp_path)), "not a regular file")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    _one_line_error(_cli("text-audit", str(empty)), "holds no captions")


def test_cli_calibrate_rejects_bad_arguments_before_any_work(tmp_path):
    for args, needle in ((["--alpha", "2"], "--alpha must be a number in (0, 0.5); got 2"),
                         (["--reps", "3"], "--reps must be an integer >= 10"),
                         (["--gates", "meg,nope"], "unknown gates ['nope']"),
                         (["--data", str(tmp_path / "none.jsonl")], "--data: no such manifest file")):
        t0 = time.perf_counter()
        res = _cli("calibrate", "--cache", str(tmp_path / "cache"), *args)
        assert time.perf_counter() - t0 < 20
        _one_line_error(res, needle)
        assert not (tmp_path / "cache").exists()  # nothing was measured


def test_run_calibration_validates_alpha_first(tmp_path):
    from pytest_posbias.calibration import run_calibration

    with pytest.raises(ConfigError, match=r"`alpha` must be a number in \(0, 0.5\); got 2"):
        run_calibration(reps=20, alpha=2, cache=str(tmp_path / "cache"), rootdir=tmp_path)
    assert not (tmp_path / "cache").exists()


# --------------------------------------------------------------------------- the suites as a user runs them


def make_project(pytester: pytest.Pytester, manifest: Path | None, suites: tuple[str, ...], settings: str = "") -> None:
    write_suite_project(pytester.path, manifest, suites, settings)


@pytest.mark.parametrize("content", ["", "\n# only a comment\n", '{"type": "video", "id": ""}\n{oops\n'])
def test_manifest_with_no_usable_item_is_a_usage_error(pytester, tmp_path, content):
    path = tmp_path / "m.jsonl"
    path.write_text(content)
    make_project(pytester, None, ("test_phase_order.py",))
    res = pytester.runpytest(f"--posbias-data={path}", "-m", "option_order")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert f"--posbias-data: {path}: no usable item in the manifest" in err and "KeyError" not in res.stdout.str() + err


def test_suites_without_their_kind_of_data_are_skipped_with_a_reason(pytester, tmp_path, synthetic_clips):
    path = write_jsonl(tmp_path / "videos-only.jsonl", [video_line(f"v{k}", p) for k, p in enumerate(synthetic_clips)])
    make_project(pytester, path, ("test_phase_order.py", "test_positional.py"))
    res = pytester.runpytest(f"--posbias-data={path}", "-m", "(option_order or dpb or meg) and not slow", "-rs", "-p", "no:randomly")
    res.assert_outcomes(skipped=3)
    out = res.stdout.str()
    assert f"{path} has no usable multiple-choice items (3 videos, 0 groups, 0 multiple-choice items" in out
    assert "no usable summarization group of size 2 or 4" in out and "no usable group of 4 videos" in out
    assert "KeyError" not in out


def test_baseline_that_does_not_resolve_names_baseline(pytester):
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest("--posbias-baseline", "nonexistent")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "baseline nonexistent: unknown model" in err and "model nonexistent" not in err


@pytest.mark.usefixtures("heavy_modules")
def test_bad_videos_are_counted_and_named_on_the_terminal_in_json_and_in_the_report(pytester, tmp_path, corpus):
    lines = [video_line(f"v{k}", corpus[f"good{k}"]) for k in range(3)]
    lines += [video_line(name, corpus[name]) for name in ("zero", "text", "cut", "cut-late", "one")]
    lines += [mcq_line(f"q{k}", f"v{k % 3}", n_options=5, answer=k % 5) for k in range(6)]
    lines += [mcq_line("q3opt", "v1", n_options=3, answer=2)]
    lines += [mcq_line(f"bad-{name}", name) for name in ("zero", "text", "cut", "cut-late", "one")]
    lines += [mcq_line("q0", "v2"), {"type": "video", "id": "", "path": "x.mp4"}]  # a duplicate id, a bad line
    path = write_jsonl(tmp_path / "m.jsonl", lines)
    make_project(pytester, path, ("test_phase_order.py",), "[tool.posbias.probes.phase]\nitems = 12\norderings = 3\n")
    res = pytester.runpytest(f"--posbias-data={path}", "-m", "option_order", "--posbias-fixed", "-p", "no:randomly",
                             "--posbias-json=out.json", "--posbias-report=report.html")
    out = res.stdout.str()
    # 6: the lost units of the bad videos put the gate below its measurement floor (not measured)
    assert res.ret in (0, 1, 6) and "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    want = {"duplicate-id": "m.jsonl:21", "bad-line": "m.jsonl:22", "empty-video": "zero.mp4", "unreadable-video": "text.mp4",
            "truncated-video": "cut", "too-short": "one.mp4"}
    section = out.split("posbias data problems")[1]
    for kind, where in want.items():
        line = next(x for x in section.splitlines() if f"[{kind}]" in x)
        assert where in line, line
    assert "[truncated-video]: 2, e.g." in section and "too short for 8 frames: the clip has 1" in section
    data = json.loads((pytester.path / "out.json").read_text())["data_problems"]
    by_kind = {g["kind"]: g["count"] for g in data["by_kind"]}
    assert by_kind == {"duplicate-id": 1, "bad-line": 1, "empty-video": 1, "unreadable-video": 1, "truncated-video": 2,
                       "too-short": 1}
    assert data["count"] == 7 and {p["file"] for p in data["problems"] if p["kind"] == "truncated-video"} == {
        str(corpus["cut"]), str(corpus["cut-late"])}
    html = (pytester.path / "report.html").read_text()
    section = html.split('id="data-problems"')[1]
    for kind in want:
        assert kind in section
    assert "data problems</th><td>7<" in html and "zero.mp4: file is empty (0 bytes)" in section


def test_a_relative_data_path_in_the_table_is_the_project_roots_and_its_error_names_the_table(pytester, monkeypatch):
    """``[tool.posbias] data = "m.jsonl"`` is read at the project root (as ``cache`` is), also when
    pytest runs from a subfolder, and a problem with it names the table, not ``--posbias-data``."""
    make_project(pytester, None, ("test_phase_order.py",))
    with (pytester.path / "pyproject.toml").open("a") as f:
        f.write('data = "m.jsonl"\n')
    (pytester.path / "m.jsonl").write_text("\n# only a comment\n")
    sub = pytester.path / "suites"
    for cwd in (pytester.path, sub):
        monkeypatch.chdir(cwd)
        res = pytester.runpytest("-m", "option_order")
        assert res.ret == pytest.ExitCode.USAGE_ERROR
        err = res.stderr.str()
        table = f"{pytester.path / 'pyproject.toml'} [tool.posbias] data"
        assert f"{table}: {pytester.path / 'm.jsonl'}: no usable item in the manifest" in err, err
        assert "--posbias-data" not in err
    (pytester.path / "m.jsonl").unlink()
    res = pytester.runpytest("-m", "option_order")
    assert f"{pytester.path / 'm.jsonl'}: manifest file does not exist" in res.stderr.str(), res.stderr.str()
    assert ":0:" not in res.stderr.str()
