"""Hugging Face Hub ids as ``--model`` values: resolved from the local Hub cache, offline.

Placed with ``models/registry.py``, which resolves the ids."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from pytest_posbias.errors import ModelLoadError
from pytest_posbias.models.registry import hub_cache_dir, model_label, resolve

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def place_in_hub_cache(src: Path, cache: Path, repo_id: str, commit: str, *, ref: str | None = "main") -> Path:
    """Copy the files of ``src`` into ``cache`` in the Hub's own layout: content-addressed
    ``blobs/``, ``snapshots/<commit>/`` of relative symlinks to them, ``refs/<ref>`` naming the commit."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for f in sorted(src.iterdir()):
        if not f.is_file():
            continue
        blob = repo / "blobs" / hashlib.sha256(f.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(f, blob)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    if ref is not None:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def _config_dir(tmp_path: Path, name: str, model_type: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": model_type}))
    return d


def test_hub_id_and_revision_resolve_to_the_cached_snapshot(hub_cache, tmp_path):
    snap_a = place_in_hub_cache(_config_dir(tmp_path, "a", "qwen3_vl"), hub_cache, "Qwen/Qwen3-VL-8B-Instruct", COMMIT_A)
    snap_b = place_in_hub_cache(_config_dir(tmp_path, "b", "qwen3_vl"), hub_cache, "Qwen/Qwen3-VL-8B-Instruct", COMMIT_B,
                                ref="v2")
    r = resolve("Qwen/Qwen3-VL-8B-Instruct")
    assert (r.backend, r.family, r.hub_id, r.revision) == ("hf", "qwen3_vl", "Qwen/Qwen3-VL-8B-Instruct", COMMIT_A)
    assert Path(r.target) == snap_a and r.entry is not None and r.entry.alias == "qwen3vl8b"
    # a branch/tag name through refs/, a commit hash directly
    assert resolve("Qwen/Qwen3-VL-8B-Instruct@v2").revision == COMMIT_B
    assert Path(resolve(f"Qwen/Qwen3-VL-8B-Instruct@{COMMIT_B}").target) == snap_b
    # the registry alias resolves the same way
    alias = resolve("qwen3vl8b")
    assert (alias.target, alias.revision, alias.hub_id) == (str(snap_a), COMMIT_A, "Qwen/Qwen3-VL-8B-Instruct")
    assert model_label("Qwen/Qwen3-VL-8B-Instruct@v2") == "Qwen3-VL-8B-Instruct@v2"
    with pytest.raises(ModelLoadError, match="at revision v9 is not in the local Hugging Face cache"):
        resolve("Qwen/Qwen3-VL-8B-Instruct@v9")


def test_hf_home_sets_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache_dir() == str(tmp_path / "home" / "hub")
    place_in_hub_cache(_config_dir(tmp_path, "a", "qwen2_vl"), tmp_path / "home" / "hub", "org/tiny", COMMIT_A)
    assert resolve("org/tiny").revision == COMMIT_A


def test_an_uncached_hub_id_names_the_id_the_cache_and_the_download_command(hub_cache):
    with pytest.raises(ModelLoadError) as err:
        resolve("Qwen/Qwen3-VL-8B-Instruct")
    msg = str(err.value)
    assert "--posbias-model Qwen/Qwen3-VL-8B-Instruct" in msg and str(hub_cache) in msg
    assert "`hf download Qwen/Qwen3-VL-8B-Instruct`" in msg and "huggingface-cli download" in msg
    with pytest.raises(ModelLoadError, match="hf download OpenGVLab/InternVL3_5-8B-HF"):
        resolve("internvl35-8b")  # an alias names its Hub id


def test_pytest_refuses_an_uncached_hub_id_as_a_usage_error(pytester, hub_cache):
    pytester.makepyfile(test_x="def test_a():\n    pass\n")
    res = pytester.runpytest_subprocess("--posbias-model", "org/not-downloaded")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    err = res.stderr.str()
    assert "org/not-downloaded is not in the local Hugging Face cache" in err and "hf download org/not-downloaded" in err


def test_a_tiny_checkpoint_loads_offline_from_the_hub_cache(hub_cache, tmp_path):
    pytest.importorskip("transformers")
    from pytest_posbias.models.hf import HFBackend
    from pytest_posbias.models.tiny import build_tiny_checkpoint
    from pytest_posbias.video.frames import FrameStore

    src = build_tiny_checkpoint("qwen2_vl", tmp_path / "tiny")
    place_in_hub_cache(src, hub_cache, "tiny-org/tiny-qwen2vl", COMMIT_A)
    place_in_hub_cache(src, hub_cache, "tiny-org/tiny-qwen2vl", COMMIT_B, ref=None)
    store = FrameStore()
    b = HFBackend(resolve("tiny-org/tiny-qwen2vl"), store, device="cpu")
    ident = dict(b.identity())
    assert (ident["model_id"], ident["revision"], ident["family"]) == ("tiny-org/tiny-qwen2vl", COMMIT_A, "qwen2_vl")
    b.close()
    pinned = HFBackend(resolve(f"tiny-org/tiny-qwen2vl@{COMMIT_B}"), store, device="cpu")
    assert pinned.identity()["revision"] == COMMIT_B  # the revision is part of the cache key's identity
    pinned.close()
