"""Regenerate tests/data/upstream/{vlmevalkit,internvl}.json.gz by RUNNING the upstream code.

VLMEvalKit and InternVL are not on PyPI. This script reads the upstream function from a
checkout of each repository (nothing is copied into pytest-posbias), executes it on the
test grid with a fake decord.VideoReader that records the indices it is asked for, and
writes the expected indices with the repository, commit and this command.

    python scripts/upstream_sampler_data.py --vlmevalkit PATH/TO/VLMEvalKit \
        --internvl PATH/TO/InternVL [--out tests/data/upstream]

PATH is a checkout (work tree) of open-compass/VLMEvalKit / OpenGVLab/InternVL; pass
--vlmevalkit-commit / --internvl-commit when it is not a git work tree.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os.path as osp
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import numpy as np

TS = (1, 2, 3, 7, 16, 31, 32, 33, 100, 299, 300, 1000, 7201)
FPSS = (1.0, 23.976, 25.0, 29.97, 30.0, 60.0)
NS = tuple(range(1, 65))
SAMPLE_FPS = (0.5, 1.0, 2.0, 4.0)


def windows(T: int, fps: float) -> list[tuple[float, float]]:
    """Seconds windows inside, across and past a clip of T frames at fps."""
    d = T / fps
    w = [(0.04, 0.96), (0.25 * d, 0.75 * d), (0.0, d), (0.5 * d, 1.5 * d), (-1.0, 0.5 * d),
         (1.25 * d, 1.5 * d), (0.75 * d, 0.25 * d)]
    return [(round(a, 6), round(b, 6)) for a, b in w]


class FakeReader:
    """decord.VideoReader stand-in: T frames at fps; records every index read."""

    last: FakeReader | None = None

    def __init__(self, path: str, *a: Any, **k: Any) -> None:
        self.T, self.fps = CLIP["T"], CLIP["fps"]
        self.read: list[int] = []
        FakeReader.last = self

    def __len__(self) -> int:
        return self.T

    def get_avg_fps(self) -> float:
        return self.fps

    def __getitem__(self, i: int) -> Any:
        self.read.append(int(i))
        return types.SimpleNamespace(asnumpy=lambda: np.zeros((1, 1, 3), np.uint8))


CLIP: dict[str, Any] = {}


def commit_of(root: Path, given: str | None) -> str:
    if given:
        return given
    return subprocess.check_output(["git", "-C", str(root), "rev-parse", "HEAD"], text=True).strip()


def function_source(path: Path, cls: str | None, name: str) -> str:
    tree = ast.parse(path.read_text())
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    return textwrap.dedent(ast.get_source_segment(path.read_text(), node) or "")


def run_vlmevalkit(root: Path) -> list[list[Any]]:
    src = function_source(root / "vlmeval/dataset/video_base.py", "VideoBaseDataset", "save_video_frames")
    lock = types.SimpleNamespace(Lock=lambda *a, **k: _Null())
    image = types.SimpleNamespace(fromarray=lambda arr: types.SimpleNamespace(save=lambda p: None))
    ns: dict[str, Any] = {"osp": osp, "np": np, "portalocker": lock, "Image": image}
    exec(compile(src, "video_base.py:save_video_frames", "exec"), ns)
    fn = ns["save_video_frames"]

    def call(T: int, fps: float, nframe: int, sfps: float) -> list[int]:
        CLIP.update(T=T, fps=fps)
        self = types.SimpleNamespace(fps=sfps, nframe=nframe, data_root="/nonexistent", frame_root="/nonexistent")
        self.frame_paths = lambda video: [f"/nonexistent/{i}" for i in range(1, nframe + 1)]
        self.frame_paths_fps = lambda video, n: [f"/nonexistent/{i}" for i in range(1, n + 1)]
        FakeReader.last = None
        fn(self, "clip")
        return FakeReader.last.read if FakeReader.last else []

    cases: list[list[Any]] = []
    for T in TS:
        for n in NS:
            cases.append([T, None, n, None, call(T, 30.0, n, -1)])
        for fps in FPSS:
            for sf in SAMPLE_FPS:
                cases.append([T, fps, None, sf, call(T, fps, 0, sf)])
    return cases


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> None:
        return None


def run_internvl(root: Path) -> list[list[Any]]:
    text = (root / "README.md").read_text()
    start = text.index("def get_index(bound, fps, max_frame, first_idx=0, num_segments=32):")
    stop = text.index("    return frame_indices", start) + len("    return frame_indices")
    ns: dict[str, Any] = {"np": np}
    exec(compile(text[start:stop], "README.md:get_index", "exec"), ns)
    fn = ns["get_index"]
    cases: list[list[Any]] = []
    for T in TS:
        for n in NS:
            cases.append([T, None, n, None, None, [int(v) for v in fn(None, 30.0, T - 1, num_segments=n)]])
        for fps in FPSS:
            for a, b in windows(T, fps):
                for n in NS:
                    cases.append([T, fps, n, a, b, [int(v) for v in fn((a, b), fps, T - 1, num_segments=n)]])
    return cases


def write(out: Path, name: str, meta: dict[str, Any], cases: list[list[Any]]) -> None:
    blob = json.dumps({**meta, "cases": cases}, separators=(",", ":")).encode()
    (out / f"{name}.json.gz").write_bytes(gzip.compress(blob, 9, mtime=0))
    print(f"{name}: {len(cases)} cases, {(out / f'{name}.json.gz').stat().st_size} bytes")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vlmevalkit", type=Path, required=True)
    ap.add_argument("--internvl", type=Path, required=True)
    ap.add_argument("--vlmevalkit-commit")
    ap.add_argument("--internvl-commit")
    ap.add_argument("--out", type=Path, default=Path("tests/data/upstream"))
    a = ap.parse_args()
    sys.modules["decord"] = types.SimpleNamespace(VideoReader=FakeReader)  # type: ignore[assignment]
    cmd = "python scripts/upstream_sampler_data.py --vlmevalkit VLMEVALKIT --internvl INTERNVL"
    a.out.mkdir(parents=True, exist_ok=True)
    write(a.out, "vlmevalkit", {
        "repository": "open-compass/VLMEvalKit", "commit": commit_of(a.vlmevalkit, a.vlmevalkit_commit),
        "function": "vlmeval/dataset/video_base.py VideoBaseDataset.save_video_frames (fake decord.VideoReader)",
        "command": cmd, "columns": ["T", "clip_fps", "nframe", "fps", "indices"]}, run_vlmevalkit(a.vlmevalkit))
    write(a.out, "internvl", {
        "repository": "OpenGVLab/InternVL", "commit": commit_of(a.internvl, a.internvl_commit),
        "function": "README.md get_index(bound, fps, max_frame=T-1, first_idx=0, num_segments=n)",
        "command": cmd, "columns": ["T", "fps", "n", "start", "end", "indices"]}, run_internvl(a.internvl))


if __name__ == "__main__":
    main()
