"""Decoding benchmark: prints a table.

* time to fetch 16 uniformly spaced frames from a 60 s 1280x720 clip (keyframe interval
  250) with decord (where installed: x86_64 only), PyAV and the cached path (in-memory LRU, on-disk PNG cache);
* PyAV's time for 16 and 64 uniformly spaced frames of a 10-minute 30 fps clip whose keyframes are
  3,000 frames apart (a long GOP: each frame far from the last one decoded but before the next
  keyframe is decoded forward, not sought again from the same keyframe);
* the number of decoder calls for a P = 4 cyclic probe over 4 videos (must be 4, not 16).

Run: python benchmarks/decode.py
"""

from __future__ import annotations

import importlib
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from pytest_posbias.metrics import cyclic_orders
from pytest_posbias.video import synthetic as SY
from pytest_posbias.video.decode import probe, read_frames
from pytest_posbias.video.frames import FrameSpec, FrameStore
from pytest_posbias.video.sampling import frame_indices


def make_hd_clip(path: Path, seconds: int = 60, fps: int = 30, *, size: tuple[int, int] = (1280, 720),
                 gop: int = 250) -> Path:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=fps)
        s.width, s.height, s.pix_fmt = size[0], size[1], "yuv420p"
        s.options = {"g": str(gop), "preset": "ultrafast", "crf": "23"}
        if gop > 250:  # keyframes exactly gop apart: no scene-cut or minimum-interval keyframes in between
            s.options = {**s.options, "keyint_min": str(gop), "sc_threshold": "0"}
        for i in range(seconds * fps):
            frame = np.roll(base, i * 4, axis=1)
            for p in s.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def best_of(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print("rendering a 60 s 1280x720 clip (keyframe interval 250) ...", flush=True)
        clip = make_hd_clip(tmp / "hd.mp4")
        info = probe(clip)
        idx = frame_indices(info.frame_count, 16, convention="left")
        try:  # decord installs on x86_64 only: elsewhere the table is PyAV's
            has_decord = importlib.import_module("decord") is not None
        except ImportError:
            has_decord = False
        t_decord = best_of(lambda: read_frames(clip, idx, info=info, backend="decord")) if has_decord else None
        t_av = best_of(lambda: read_frames(clip, idx, info=info, backend="av"))
        store = FrameStore(disk_dir=tmp / "frames", disk_write_min_s=0)
        spec = FrameSpec.from_video(clip, idx, info=info)
        t_first = best_of(lambda: FrameStore(disk_dir=tmp / "frames-first", disk_write_min_s=0).materialize(spec), 1)
        store.materialize(spec)
        t_mem = best_of(lambda: store.materialize(spec))
        t_disk = best_of(lambda: FrameStore(disk_dir=tmp / "frames").materialize(spec))

        print()
        print(f"16 frames of a {info.frame_count}-frame 1280x720 clip, resized to 448x448 (best of 3)")
        ref = t_decord if t_decord is not None else t_av
        print(f"{'path':<38} {'seconds':>9} {'vs decord' if t_decord is not None else 'vs PyAV':>10}")
        rows = [("decord", t_decord)] if t_decord is not None else []
        for name, t in [*rows, ("PyAV (seek + decode)", t_av), ("store, first fetch (+PNG write)", t_first),
                        ("store, in-memory LRU hit", t_mem), ("store, on-disk cache (new process)", t_disk)]:
            print(f"{name:<38} {t:>9.4f} {t / ref:>9.2f}x")

        print()
        print("rendering a 600 s 64x64 clip (keyframe interval 3000) ...", flush=True)
        sparse = make_hd_clip(tmp / "sparse.mp4", 600, size=(64, 64), gop=3000)
        sinfo = probe(sparse)
        print(f"PyAV, {sinfo.frame_count}-frame 64x64 clip, keyframe interval 3000 (best of 3)")
        for n in (16, 64):
            sidx = frame_indices(sinfo.frame_count, n, convention="left")
            t = best_of(lambda sidx=sidx: read_frames(sparse, sidx, info=sinfo, backend="av"))
            print(f"{f'{n} uniform frames':<38} {t:>9.4f}")

        paths = []
        for k in range(4):
            scene = SY.make_scene(f"b{k}", "cooking", "short", seed=k)
            paths.append(SY.render_clip(scene, tmp / f"b{k}.mp4"))
        store = FrameStore()
        specs = [FrameSpec.from_video(p, frame_indices(store.info(p).frame_count, 16, convention="left"),
                                      info=store.info(p)) for p in paths]
        requests = 0
        for order in cyclic_orders(4):
            for slot in order:
                store.materialize(specs[slot])
                requests += 1
        print()
        print(f"P = 4 cyclic probe over 4 videos: {requests} video inputs, {store.decodes} decoder calls "
              f"(in-memory hits: {store.memory_hits} frames)")


if __name__ == "__main__":
    main()
