"""Model registry: aliases → Hugging Face ids and family, and resolution of ``--model`` specs.

``--model`` accepts a registry alias (``posbias models`` lists them), a local checkpoint
directory (the family from its ``config.json``), a Hub id ``ORG/NAME[@REVISION]`` found in the
local Hugging Face cache without network access (registry aliases of transformers models
resolve the same way), ``sim:PROFILE``, ``openai:NAME`` (with ``--api-base``) or ``vllm:SPEC``
(:mod:`.vllm_managed`). A model transformers cannot load natively, or a Hub id not in the cache,
fails at start with a message saying what to do. Resolution reads ``config.json`` only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, ModelLoadError

# model_type in config.json → adapter family (its own, except glm4v_moe, which writes media as glm4v)
_OWN_FAMILY = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "internvl", "llava_onevision", "llava_next_video",
               "glm4v")
NATIVE_FAMILIES: dict[str, str] = {**{t: t for t in _OWN_FAMILY}, "glm4v_moe": "glm4v"}
EMPTY_THINK = "<think>\n\n</think>\n\n"
# ORG/NAME with the Hub's repository-name characters, optionally @REVISION (branch, tag or commit)
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?$")


@dataclass(frozen=True)
class ModelEntry:
    """One registry model: its Hugging Face id, adapter family and how to run it."""

    alias: str
    hf_id: str
    family: str  # adapter family, or "openai", or "unsupported"
    prefill: str = ""  # assistant prefill for letter scoring (empty think block for reasoning models)
    api_base: str = ""
    note: str = ""
    video_form: str = "auto"  # openai backend: "video" (one video_url), "images" (image-only APIs), "auto" (probe)
    params_b: float = 0.0  # parameters in billions (bf16 weights = 2 bytes each): decides sharding on `hf`
    shard: bool = False  # always shard over the node's GPUs (device_map="auto"), whatever one device holds


REGISTRY: dict[str, ModelEntry] = {e.alias: e for e in [
    ModelEntry("qwen3vl8b", "Qwen/Qwen3-VL-8B-Instruct", "qwen3_vl",
               note="phase paper core model; VideoSTF; multi-video paper", params_b=8.8),
    ModelEntry("qwen3vl30b", "Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3_vl_moe", note="MoE; multi-video paper",
               params_b=31.1),
    ModelEntry("qwen25vl7b", "Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_5_vl", note="phase paper core model", params_b=8.3),
    ModelEntry("qwen25vl72b", "Qwen/Qwen2.5-VL-72B-Instruct", "qwen2_5_vl", params_b=73.4,
               note="72B class: 147 GB of bf16 weights, sharded over the node's GPUs (device_map=auto)"),
    ModelEntry("qwen2vl7b", "Qwen/Qwen2-VL-7B-Instruct", "qwen2_vl", params_b=8.3),
    ModelEntry("internvl35-8b", "OpenGVLab/InternVL3_5-8B-HF", "internvl",
               note="multi-video paper; VideoSTF; phase paper replication", params_b=8.5),
    ModelEntry("internvl35-14b", "OpenGVLab/InternVL3_5-14B-HF", "internvl", note="multi-video paper", params_b=15.1),
    ModelEntry("internvl25-8b", "OpenGVLab/InternVL2_5-8B", "unsupported",
               note="the public checkpoint is remote code (InternVLChatModel); convert it with transformers' "
                    "convert_internvl_weights_to_hf.py and pass the converted directory to --posbias-model, or serve "
                    "it with vLLM and use --posbias-model openai:NAME --posbias-api-base URL"),
    ModelEntry("minicpm-o-45", "openbmb/MiniCPM-o-4_5", "unsupported",
               note="needs trust_remote_code, which transformers does not load natively; serve it with vLLM "
                    "(vllm serve openbmb/MiniCPM-o-4_5 --trust-remote-code) and use --posbias-model openai:NAME "
                    "--posbias-api-base URL"),
    ModelEntry("glm41v-9b-thinking", "zai-org/GLM-4.1V-9B-Thinking", "glm4v", prefill=EMPTY_THINK,
               note="reasoning model: empty think block prefilled for letter scoring", params_b=10.3),
    ModelEntry("mimo-vl-7b-rl", "XiaomiMiMo/MiMo-VL-7B-RL", "qwen2_5_vl", prefill=EMPTY_THINK,
               note="reasoning model (Qwen2.5-VL architecture): empty think block prefilled for letter scoring",
               params_b=8.3),
    ModelEntry("llava-video-7b", "llava-hf/LLaVA-Video-7B-Qwen2-hf", "llava_onevision", note="VideoSTF", params_b=8.0),
    ModelEntry("llava-next-video-7b", "llava-hf/LLaVA-NeXT-Video-7B-hf", "llava_next_video", note="VideoSTF",
               params_b=7.1),
    ModelEntry("llava-ov-7b", "llava-hf/llava-onevision-qwen2-7b-ov-hf", "llava_onevision", params_b=8.0),
    ModelEntry("molmo2-8b", "allenai/Molmo2-8B", "unsupported",
               note="no adapter in this release; serve it with vLLM and use --posbias-model openai:NAME "
                    "--posbias-api-base URL"),
    ModelEntry("sharegpt4video-8b", "Lin-Chen/sharegpt4video-8b", "unsupported",
               note="remote-code LLaVA variant not loadable by transformers natively; serve it and use --posbias-model "
                    "openai:NAME"),
    ModelEntry("videollama2-7b", "DAMO-NLP-SG/VideoLLaMA2-7B", "unsupported",
               note="remote code (videollama2 package), not loadable by transformers natively; serve it and use "
                    "--posbias-model openai:NAME"),
    ModelEntry("gpt-5.4", "gpt-5.4", "openai", note="OpenAI API; key from OPENAI_API_KEY", video_form="images"),
    ModelEntry("gemini-3.1-pro", "gemini-3.1-pro", "openai",
               api_base="https://generativelanguage.googleapis.com/v1beta/openai/",
               note="Gemini's OpenAI-compatible API; key from OPENAI_API_KEY (or GEMINI_API_KEY)", video_form="images"),
]}


@dataclass(frozen=True)
class ResolvedModel:
    """What a ``--model`` spec names: the backend, what to load, and the registry entry if any."""

    spec: str
    backend: str  # "hf" | "openai" | "sim" | "vllm"
    target: str  # hf id or directory, endpoint model name, or sim profile
    family: str = ""
    entry: ModelEntry | None = None
    hub_id: str = ""  # ORG/NAME when target is a snapshot of the local Hugging Face cache
    revision: str = ""  # that snapshot's commit hash

    @property
    def prefill(self) -> str:
        """The assistant prefill for letter scoring (the registry entry's; empty without one)."""
        return self.entry.prefill if self.entry else ""


def _by_hf_id(hf_id: str) -> ModelEntry | None:
    return next((e for e in REGISTRY.values() if e.hf_id == hf_id), None)


def _family_from_dir(path: Path) -> tuple[str, str]:
    cfg = path / "config.json"
    if not cfg.is_file():
        raise ModelLoadError(f"--posbias-model {path}: the directory has no config.json, so it is not a transformers "
                             "checkpoint")
    try:
        data = json.loads(cfg.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"--posbias-model {path}: config.json is not readable JSON ({exc})") from None
    mt = str(data.get("model_type", ""))
    if mt not in NATIVE_FAMILIES:
        arch = data.get("architectures") or []
        hint = " (it needs trust_remote_code)" if data.get("auto_map") else ""
        raise ModelLoadError(
            f"--posbias-model {path}: model_type {mt!r} {arch} is not a video family this plugin drives "
            f"natively{hint}; supported: {', '.join(sorted(NATIVE_FAMILIES))}. Serve the model with vLLM and use "
            f"--posbias-model openai:NAME --posbias-api-base URL instead."
        )
    return NATIVE_FAMILIES[mt], str(data.get("_name_or_path", ""))


def hub_cache_dir() -> str:
    """The Hugging Face Hub cache folder: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else
    huggingface_hub's default (read from the environment at call time)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return os.path.join(os.environ["HF_HOME"], "hub")
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def locate_hub_snapshot(repo_id: str, revision: str | None = None, *, spec: str) -> tuple[Path, str]:
    """The local snapshot folder of ``repo_id`` at ``revision`` (default ``main``) and its commit
    hash, from the Hugging Face cache only (``snapshot_download(..., local_files_only=True)``);
    ModelLoadError names ``spec``, the cache folder and the download command when it is missing."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    cache = hub_cache_dir()
    try:
        folder = Path(snapshot_download(repo_id, revision=revision, cache_dir=cache, local_files_only=True))
    except HFValidationError as exc:
        raise ModelLoadError(f"--posbias-model {spec}: {repo_id!r} is not a valid Hugging Face Hub id "
                             f"({exc})") from None
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        at = f" at revision {revision}" if revision else ""
        rev = f" --revision {revision}" if revision else ""
        raise ModelLoadError(
            f"--posbias-model {spec}: {repo_id}{at} is not in the local Hugging Face cache {cache} (HF_HUB_CACHE, else "
            f"HF_HOME/hub) and is never downloaded during a run; download it first with "
            f"`hf download {repo_id}{rev}` (older huggingface_hub: `huggingface-cli download {repo_id}{rev}`), "
            "or pass a checkpoint directory") from None
    return folder, folder.name


def _resolve_hub(spec: str, repo_id: str, revision: str | None, entry: ModelEntry | None) -> ResolvedModel:
    """A Hub id (or a registry alias's) resolved to its cached snapshot; the family comes from
    the snapshot's ``config.json``, the registry entry (prefill, size) from the id."""
    folder, commit = locate_hub_snapshot(repo_id, revision, spec=spec)
    family, _ = _family_from_dir(folder)
    entry = entry or _by_hf_id(repo_id)
    return ResolvedModel(spec, "hf", str(folder), family, entry, hub_id=repo_id, revision=commit)


def model_label(spec: str) -> str:
    """A short name for a ``--model`` value in test ids and report file names: a checkpoint
    directory's last path component, anything else as given."""
    if spec.startswith("vllm:"):
        return "vllm:" + model_label(spec[5:])
    if spec.startswith(("sim:", "openai:")) or spec in REGISTRY or not ("/" in spec or spec.startswith((".", "~"))):
        return spec
    return Path(spec).expanduser().name or spec


def resolve(spec: str, *, locate: bool = True) -> ResolvedModel:
    """Resolve a ``--model`` value without loading anything; raise ModelLoadError at start.

    ``locate``: find Hub ids and transformers registry aliases in the local Hugging Face cache
    (the target is the snapshot folder, ``revision`` its commit); False leaves them as Hub ids,
    for what needs no weights (``posbias plan``)."""
    if spec.startswith("sim:"):
        from .sim import check_profile

        profile = spec[4:]
        try:
            check_profile(profile)  # a profile, or a dose sim:dose,GATE=VALUE[,...]
        except ConfigError as exc:
            raise ModelLoadError(f"--posbias-model {spec}: {exc}") from None
        return ResolvedModel(spec, "sim", profile)
    if spec.startswith("openai:"):
        name = spec[7:]
        if not name:
            raise ModelLoadError("--posbias-model openai:NAME needs the endpoint's model name after the colon")
        entry = REGISTRY.get(name) or _by_hf_id(name)  # vLLM serves a model under its Hub id by default
        return ResolvedModel(spec, "openai", entry.hf_id if entry and entry.family == "openai" else name, "openai",
                             entry)
    if spec.startswith("vllm:"):
        return _resolve_vllm(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        family, name = _family_from_dir(path)
        entry = next((e for e in REGISTRY.values() if name and name.rstrip("/").endswith(e.hf_id.split("/")[-1])), None)
        return ResolvedModel(spec, "hf", str(path.resolve()), family, entry)
    entry = REGISTRY.get(spec)
    hub = HUB_ID.match(spec) if entry is None and not spec.startswith((".", "~", "/")) else None
    if hub is not None and locate:
        return _resolve_hub(spec, hub["repo"], hub["rev"], None)
    if hub is not None:
        return ResolvedModel(spec, "hf", hub["repo"], "", _by_hf_id(hub["repo"]), hub_id=hub["repo"],
                             revision=hub["rev"] or "")
    if entry is None:
        if "/" in spec or spec.startswith((".", "~")):
            raise ModelLoadError(f"--posbias-model {spec}: no such checkpoint directory")
        raise ModelLoadError(f"--posbias-model {spec}: unknown model; use a registry alias "
                             f"({', '.join(sorted(REGISTRY))}), "
                             "a checkpoint directory, sim:PROFILE or openai:NAME (`posbias models` lists the registry)")
    if entry.family == "unsupported":
        raise ModelLoadError(f"--posbias-model {spec} ({entry.hf_id}) cannot be loaded by transformers natively: "
                             f"{entry.note}")
    if entry.family == "openai":
        return ResolvedModel(spec, "openai", entry.hf_id, "openai", entry)
    if locate:
        return _resolve_hub(spec, entry.hf_id, None, entry)
    return ResolvedModel(spec, "hf", entry.hf_id, entry.family, entry, hub_id=entry.hf_id)


def _resolve_vllm(spec: str) -> ResolvedModel:
    """``vllm:SPEC``: a registry alias (its Hub id; remote-code entries too, vLLM may serve them),
    a checkpoint directory, or a Hub id ``org/name``."""
    inner = spec[len("vllm:"):].strip()
    if not inner:
        raise ModelLoadError("--posbias-model vllm:SPEC needs a registry alias, a checkpoint directory or a Hub id "
                             "after the colon")
    path = Path(inner).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"--posbias-model {spec}: the directory has no config.json, so it is not a checkpoint")
        return ResolvedModel(spec, "vllm", str(path.resolve()), "vllm")
    entry = REGISTRY.get(inner)
    if entry is not None:
        if entry.family == "openai":
            raise ModelLoadError(f"--posbias-model {spec}: {inner} is an API model ({entry.hf_id}); vLLM cannot serve "
                                 "it")
        return ResolvedModel(spec, "vllm", entry.hf_id, "vllm", entry)
    hub = HUB_ID.fullmatch(inner)
    if hub is not None and hub["rev"]:
        raise ModelLoadError(f"--posbias-model {spec}: give the revision to vLLM as --posbias-vllm-args '--revision "
                             f"{hub['rev']}' and the id without @{hub['rev']}")
    if inner.startswith((".", "~", "/")) or hub is None:
        raise ModelLoadError(f"--posbias-model {spec}: {inner!r} is neither a checkpoint directory, a registry alias "
                             f"({', '.join(sorted(REGISTRY))}) nor a Hub id org/name")
    return ResolvedModel(spec, "vllm", inner, "vllm", _by_hf_id(inner))
