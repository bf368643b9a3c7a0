"""Sampler presets against the upstream code itself.

qwen-vl-utils 0.0.14 and lmms-eval 0.7.3 are installed from PyPI (test extra) and called
with fake decoders that record the requested indices. VLMEvalKit and InternVL are not on
PyPI: their expected indices were produced by running the upstream function
(tests/data/upstream/*.json.gz, with repository + commit; scripts/upstream_sampler_data.py).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import sys
import types
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from support import DATA

from pytest_posbias.errors import ConfigError, FrameRangeError, VideoError
from pytest_posbias.video.samplers import PRESETS, parse_spec
from pytest_posbias.video.samplers.qwen import linspace_round
from pytest_posbias.video.sampling import frame_indices

UPSTREAM = DATA / "upstream"
TS = (1, 2, 3, 7, 16, 31, 32, 33, 100, 299, 300, 1000, 7201)
FPSS = (1.0, 23.976, 25.0, 29.97, 30.0, 60.0)
NS = range(1, 65)


def windows(T, fps):
    d = T / fps
    w = [(0.04, 0.96), (0.25 * d, 0.75 * d), (0.0, d), (0.5 * d, 1.5 * d), (-1.0, 0.5 * d),
         (1.25 * d, 1.5 * d), (0.75 * d, 0.25 * d), (0.3 * d, None), (None, 0.6 * d)]
    return [(None if a is None else round(a, 6), None if b is None else round(b, 6)) for a, b in w]


def _load(name):
    return json.loads(gzip.decompress((UPSTREAM / f"{name}.json.gz").read_bytes()))


def _ours(T, n, spec, fps, start=None, end=None):
    try:
        return list(frame_indices(T, n, convention=spec, fps=fps, start=start, end=end))
    except (ConfigError, VideoError):
        return "raises"


# --------------------------------------------------------------------------- qwen-vl-utils (PyPI)


class _QwenReader:
    clip: tuple[int, float] = (1, 1.0)
    asked: list[int] | None = None

    def __init__(self, path, *a, **k):
        self.T, self.fps = _QwenReader.clip

    def __len__(self):
        return self.T

    def get_avg_fps(self):
        return self.fps

    def get_batch(self, idx):
        _QwenReader.asked = list(idx)
        return types.SimpleNamespace(asnumpy=lambda: np.zeros((len(idx), 1, 1, 3), np.uint8))


@pytest.fixture(scope="module")
def qwen_upstream():
    vp = pytest.importorskip("qwen_vl_utils.vision_process")
    assert importlib.metadata.version("qwen-vl-utils") == "0.0.14"
    logging.getLogger(vp.__name__).setLevel(logging.ERROR)
    saved = sys.modules.get("decord")
    sys.modules["decord"] = types.SimpleNamespace(VideoReader=_QwenReader)

    def call(T, fps, ele):
        _QwenReader.clip, _QwenReader.asked = (T, fps), None
        try:
            vp._read_video_decord({"video": "clip.mp4", **ele})
        except (ValueError, AssertionError):
            return "raises"
        return _QwenReader.asked

    yield call
    if saved is None:
        del sys.modules["decord"]
    else:
        sys.modules["decord"] = saved


def _qwen_ele(start, end, **kw):
    ele = dict(kw)
    if start is not None:
        ele["video_start"] = start
    if end is not None:
        ele["video_end"] = end
    return ele


def test_qwen_nframes_mode_matches_upstream_on_grid(qwen_upstream):
    cases = mismatched = 0
    raised = 0
    for T in TS:
        for fps in FPSS:
            for start, end in [(None, None), *windows(T, fps)]:
                for n in NS:
                    want = qwen_upstream(T, fps, _qwen_ele(start, end, nframes=n))
                    got = _ours(T, n, "qwen-vl-utils", fps, start, end)
                    cases += 1
                    raised += want == "raises"
                    mismatched += got != want
                    assert got == want, (T, fps, n, start, end)
    assert cases == 13 * 6 * 10 * 64 and mismatched == 0
    assert 0 < raised < cases  # both branches exercised


@pytest.mark.parametrize("knobs", [{}, {"fps": 0.5}, {"fps": 1.0}, {"fps": 4.0}, {"fps": 1.0, "max_frames": 64},
                                   {"min_frames": 7, "max_frames": 33}, {"fps": 2.0, "min_frames": 16}])
def test_qwen_fps_mode_matches_upstream(qwen_upstream, knobs):
    # {} is upstream's full default (FPS = 2, min 4, max min(768, T)); the preset reaches it with fps=2
    spec_knobs = knobs or {"fps": 2.0}
    spec = "qwen-vl-utils:" + ",".join(f"{k}={v}" for k, v in spec_knobs.items())
    n_ok = 0
    for T in TS:
        for fps in FPSS:
            for start, end in [(None, None), *windows(T, fps)]:
                want = qwen_upstream(T, fps, _qwen_ele(start, end, **knobs))
                got = _ours(T, 8, spec, fps, start, end)
                assert got == want, (T, fps, start, end, spec)
                n_ok += want != "raises"
    assert n_ok > 100


def test_qwen_issue_examples_and_record():
    assert frame_indices(7, 3, convention="qwen-vl-utils") == [0, 2, 4, 6]
    idx = frame_indices(16, 8, convention="qwen-vl-utils", fps=29.97, start=0.04, end=0.96)
    assert idx == [2, 4, 6, 8, 9, 11, 13, 15]
    assert idx.record["arithmetic"] == "torch" and "0.0.14" in idx.record["upstream"]
    with pytest.raises(ConfigError, match="qwen-vl-utils.*outside"):
        frame_indices(2, 4, convention="qwen-vl-utils")


def test_qwen_long_clip_uses_torch_where_emulation_is_one_frame_off():
    torch = pytest.importorskip("torch")
    # the issue's case: T = 14385 at 29.97 fps, fps mode at upstream's defaults -> 768 frames
    idx = frame_indices(14385, 8, convention="qwen-vl-utils:fps=2", fps=29.97)
    want = torch.linspace(0, 14384, 768).round().long().tolist()
    assert len(idx) == 768 and idx == want and idx.record["arithmetic"] == "torch"
    emulated = linspace_round(0, 14384, 768, backend="emulation")[0]
    # torch's vectorised kernel and the scalar emulation disagree here (on this CPU: index 558)
    assert sum(a != b for a, b in zip(emulated, want, strict=True)) <= 2


def test_qwen_without_torch_uses_emulation_and_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    idx = frame_indices(300, 8, convention="qwen-vl-utils")
    assert idx.record["arithmetic"] == "emulation"
    assert idx == [round(i * 299 / 7) for i in range(8)]  # exact values here are far from .5


def test_qwen_emulation_agrees_with_torch_on_grid():
    torch = pytest.importorskip("torch")
    diffs = 0
    for T in TS:
        for n in range(2, 65, 2):
            if n > T:
                continue
            want = torch.linspace(0, T - 1, n).round().long().tolist()
            diffs += linspace_round(0, T - 1, n, backend="emulation")[0] != want
            assert linspace_round(0, T - 1, n, backend="torch") == (want, "torch")
    assert diffs == 0


# --------------------------------------------------------------------------- lmms-eval (PyPI, single module)


@pytest.fixture(scope="module")
def lmms():
    spec = importlib.util.find_spec("lmms_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("lmms-eval not installed (test extra)")
    assert importlib.metadata.version("lmms-eval") == "0.7.3"
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "model_utils" / "load_video.py"
    mspec = importlib.util.spec_from_file_location("_lmms_load_video", path)
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)  # imports av and numpy only
    return mod


class _Frame:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i

    def to_ndarray(self, format=None):
        return np.full((1, 1, 1), self.i, dtype=np.int64)


_FRAMES: dict[int, list[_Frame]] = {}


class _Container:
    def __init__(self, T, rate):
        self.T = T
        self.frames = _FRAMES.setdefault(T, [_Frame(i) for i in range(T)])
        st = types.SimpleNamespace(frames=T, average_rate=rate, thread_type=None)
        self.streams = types.SimpleNamespace(video=[st])

    def decode(self, video=0):
        return iter(self.frames)

    def demux(self, video=0):
        for f in self.frames:
            yield types.SimpleNamespace(decode=lambda f=f: [f])

    def seek(self, t):
        pass

    def close(self):
        pass


def _lmms_call(mod, monkeypatch, backend, T, fps, n, sfps, force):
    if backend == "pyav":
        monkeypatch.setattr(mod, "av", types.SimpleNamespace(open=lambda p: _Container(T, Fraction(fps))))
        out = mod.read_video("clip.mp4", num_frm=n, fps=sfps, force_include_last_frame=force, backend="pyav")
        return [int(v) for v in out[:, 0, 0, 0]]
    asked = []
    if backend == "torchcodec":
        class Decoder:
            def __init__(self, path, **kw):
                self.metadata = types.SimpleNamespace(num_frames=T, average_fps=fps)

            def get_frames_at(self, idx):
                asked.extend(idx)
                return np.zeros((len(idx), 1, 1, 3), np.uint8)
        monkeypatch.setitem(sys.modules, "torchcodec", types.ModuleType("torchcodec"))
        monkeypatch.setitem(sys.modules, "torchcodec.decoders", types.SimpleNamespace(VideoDecoder=Decoder))
        mod.read_video("clip.mp4", num_frm=n, fps=sfps, force_include_last_frame=force, backend="torchcodec")
        return [int(v) for v in asked]

    class Reader:
        def __init__(self, path, ctx=None, num_threads=1):
            pass

        def __len__(self):
            return T

        def get_batch(self, idx):
            asked.extend(idx)
            return types.SimpleNamespace(asnumpy=lambda: np.zeros((len(idx), 1, 1, 3), np.uint8))
    monkeypatch.setitem(sys.modules, "decord", types.SimpleNamespace(VideoReader=Reader, cpu=lambda i: None))
    mod.load_video_decord("clip.mp4", n)
    return [int(v) for v in asked]


def _lmms_spec(backend, sfps, force):
    knobs = [f"backend={backend}"]
    if sfps is not None:
        knobs.append(f"fps={sfps}")
    if force:
        knobs.append("force_include_last_frame=true")
    return "lmms-eval:" + ",".join(knobs)


@pytest.mark.parametrize("backend", [pytest.param("pyav", marks=pytest.mark.slow), "torchcodec", "decord"])
def test_lmms_eval_matches_upstream_on_grid(lmms, monkeypatch, backend):
    opts = [(None, False)] if backend == "decord" else [(None, False), (None, True), (0.5, False), (1.0, True),
                                                        (4.0, False)]
    count = 0
    for T in TS:
        for fps in FPSS:
            for sfps, force in opts:
                if sfps is None and fps != 30.0:
                    continue  # the clip's fps only matters with the fps knob
                for n in NS:
                    want = _lmms_call(lmms, monkeypatch, backend, T, fps, n, sfps, force)
                    assert _ours(T, n, _lmms_spec(backend, sfps, force), fps) == want, (T, fps, n, sfps, force)
                    count += 1
    assert count >= 13 * 64


def test_lmms_eval_default_is_pyav_unique_frames():
    assert frame_indices(2, 4, convention="lmms-eval") == [0, 1]
    assert frame_indices(300, 8, convention="lmms-eval") == list(np.linspace(0, 299, 8, dtype=int))
    assert frame_indices(2, 4, convention="lmms-eval:backend=decord") == [0, 0, 0, 1]
    with pytest.raises(ConfigError, match="lmms-eval.*decord"):
        frame_indices(30, 4, convention="lmms-eval:backend=decord,fps=1", fps=30)


# --------------------------------------------------------------------------- VLMEvalKit, InternVL (stored upstream runs)


def test_vlmevalkit_matches_stored_upstream_run():
    d = _load("vlmevalkit")
    assert d["repository"] == "open-compass/VLMEvalKit" and d["commit"] == PRESETS["vlmevalkit"].upstream.split("@")[1][:40]
    seen_T = set()
    for T, clip_fps, nframe, sfps, want in d["cases"]:
        seen_T.add(T)
        if nframe is not None:
            assert _ours(T, nframe, "vlmevalkit", None) == want, (T, nframe)
            assert _ours(T, 5, f"vlmevalkit:nframe={nframe}", None) == want
        else:
            got = _ours(T, 8, f"vlmevalkit:fps={sfps}", clip_fps)
            assert got == (want or "raises"), (T, clip_fps, sfps)
    assert seen_T == set(TS) and len(d["cases"]) == 13 * 64 + 13 * 6 * 4
    # the issue's case: step first, then int(i·step)
    assert frame_indices(45, 32, convention="vlmevalkit")[10] == 14


def test_internvl_matches_stored_upstream_run():
    d = _load("internvl")
    assert d["repository"] == "OpenGVLab/InternVL" and d["commit"] in PRESETS["internvl"].upstream
    valid = rejected = 0
    for T, fps, n, start, end, want in d["cases"]:
        got = _ours(T, n, "internvl", fps, start, end)
        if all(0 <= i <= T - 1 for i in want):
            assert got == want, (T, fps, n, start, end)
            valid += 1
        else:
            assert got == "raises", (T, fps, n, start, end)
            rejected += 1
    assert valid > 20000 and rejected > 0 and len(d["cases"]) == 13 * 64 + 13 * 6 * 7 * 64


def test_window_cut_presets_equal_upstream_on_the_cut_clip():
    # lmms-eval, VLMEvalKit and videostf have no window upstream: the window is cut first
    for spec in ("lmms-eval", "vlmevalkit", "videostf", "lmms-eval:backend=torchcodec"):
        for T, fps, a, b in [(300, 30.0, 2.0, 6.0), (1000, 29.97, 0.5, 20.0)]:
            lo, hi = round(a * fps), round(b * fps)
            for n in (1, 8, 33):
                got = frame_indices(T, n, convention=spec, fps=fps, start=a, end=b)
                assert got == [lo + i for i in frame_indices(hi - lo + 1, n, convention=spec)]


def test_preset_spec_errors_name_preset_and_knob():
    with pytest.raises(ConfigError, match="'qwen-vl-utils'.*unknown knob 'frames'"):
        parse_spec("qwen-vl-utils:frames=8")
    with pytest.raises(ConfigError, match="'qwen-vl-utils' knob `fps` must be a positive"):
        parse_spec("qwen-vl-utils:fps=-1")
    with pytest.raises(ConfigError, match="'lmms-eval' knob `force_include_last_frame` must be true or false"):
        parse_spec("lmms-eval:force_include_last_frame=maybe")
    with pytest.raises(ConfigError, match="`nframes` cannot be combined"):
        frame_indices(300, 8, convention="qwen-vl-utils:nframes=8,fps=1", fps=30)
    with pytest.raises(ConfigError, match="'vlmevalkit'.*cannot both be set"):
        frame_indices(300, 8, convention="vlmevalkit:nframe=8,fps=1", fps=30)
    with pytest.raises(FrameRangeError, match="internvl.*outside the clip"):
        frame_indices(300, 8, convention="internvl", fps=30, start=20.0, end=25.0)
    assert parse_spec("qwen-vl-utils:fps=1,max_frames=64")[1] == {"fps": 1.0, "max_frames": 64}


def test_preset_record_reaches_the_run_log_frame_spec():
    from pytest_posbias.video.decode import VideoInfo
    from pytest_posbias.video.frames import FrameSpec

    info = VideoInfo("clip.mp4", "ab" * 32, 300, 29.97, 10.01, 64, 48, "fake")
    idx = frame_indices(300, 8, convention="qwen-vl-utils:fps=1,max_frames=64", fps=29.97)
    spec = FrameSpec.from_video("clip.mp4", idx, info=info)
    rec = spec.to_dict()["records"][0]
    assert rec["sampler"] == "qwen-vl-utils" and rec["knobs"] == {"fps": 1.0, "max_frames": 64}
    assert rec["arithmetic"] in ("torch", "emulation") and "0.0.14" in rec["upstream"]
    assert spec.indices == list(idx) and "records" not in spec.key()
    plain = FrameSpec.from_video("clip.mp4", frame_indices(300, 8, convention="left"), info=info)
    assert plain.records == ()


def test_posbias_samplers_cli_lists_presets_knobs_and_sources(capsys):
    from pytest_posbias.cli import main

    assert main(["samplers", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["presets"]) == set(PRESETS)
    assert set(d["presets"]["qwen-vl-utils"]["knobs"]) == {"nframes", "fps", "min_frames", "max_frames"}
    assert set(d["presets"]["lmms-eval"]["knobs"]) == {"backend", "fps", "force_include_last_frame"}
    assert "0.7.3" in d["presets"]["lmms-eval"]["upstream"]
    assert "e8e78f05f3080fe28154f2130321f17951c3be94" in d["presets"]["vlmevalkit"]["upstream"]
    assert main(["samplers"]) == 0
    assert "qwen-vl-utils 0.0.14" in capsys.readouterr().out


def test_phase_settings_accept_preset_specs():
    from pytest_posbias.probes.settings import validate_probe_settings

    ok = validate_probe_settings("phase", {"samplers": ["left", "qwen-vl-utils", "qwen-vl-utils:fps=1,max_frames=64"]},
                                 where="[tool.posbias.probes.phase]")
    assert ok["samplers"][2] == "qwen-vl-utils:fps=1,max_frames=64"
    with pytest.raises(ConfigError, match=r"samplers: sampler 'qwen-vl-utils': unknown knob 'frames'"):
        validate_probe_settings("phase", {"samplers": ["left", "qwen-vl-utils:frames=3"]}, where="[tool.posbias.probes.phase]")
    with pytest.raises(ConfigError, match="values must be among"):
        validate_probe_settings("phase", {"samplers": ["left", "uniform"]}, where="[tool.posbias.probes.phase]")
