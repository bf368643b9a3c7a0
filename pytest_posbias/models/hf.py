"""Hugging Face transformers backend (torch and transformers are imported lazily, here only).

Inputs go through the model's own processor and chat template (:mod:`.hf_inputs`). Requests are
batched with left padding, a batch holding one decoding setting and videos of one shape; sampled
rows are seeded per row (:mod:`.hf_sampling`), so a request's tokens never depend on its batch.
Letter log-probs come from one forward pass at the answer position (the empty think block
prefilled for reasoning models). bf16 on CUDA, float32 on CPU; placement and attention kernel
come from :mod:`.hf_loading` and are recorded in the identity. Every Generation carries its
prompt tokens (non-padding tokens of its row), of which visual (media placeholder) tokens.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..engine import Generation, Request
from ..errors import BackendError, ModelLoadError
from ..video.compose import ImagePart, VideoPart
from ..video.frames import FrameStore
from .hf_inputs import ADAPTERS, ANSWER_TEXT, InputBuilder
from .hf_loading import load_model, pick_attn_implementation, pick_device, plan_placement
from .hf_sampling import GUMBEL_SAMPLER, make_processor
from .registry import ResolvedModel


def _dir_revision(path: Path) -> str:
    """Content revision of a local checkpoint: its small files that shape an input or an output
    (config, processor, generation and tokenizer files: ``.json``, ``.jinja``, ``.txt``, ``.model``,
    ``.tiktoken``), the safetensors headers, and each weight file's size and every byte (SHA-256,
    streamed). A header fixes shapes, not values, and a fine-tune may change only small tensors (norms,
    biases, a few embedding rows) that no sample of the file would see: hashing every byte makes any
    new weights saved over the directory a new revision, and a byte-identical copy (a per-job download,
    without the file times) keeps it. The cost is one read of the weights per worker per run, small
    beside the model calls it keys."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if f.suffix in (".json", ".jinja", ".txt", ".model", ".tiktoken") and f.is_file():
            h.update(f.name.encode())
            h.update(f.read_bytes())
        elif f.suffix in (".safetensors", ".bin", ".pt", ".pth"):
            h.update(f"{f.name}:{f.stat().st_size}".encode())
            with f.open("rb") as fh:
                if f.suffix == ".safetensors":
                    n = int.from_bytes(fh.read(8), "little")
                    h.update(fh.read(min(n, 1 << 24)))
                    fh.seek(0)
                h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()[:16]


class HFBackend(InputBuilder):
    """Backend protocol implementation for transformers image-text-to-text video models."""

    name = "hf"
    supports_letter_logprobs = True

    def __init__(self, resolved: ResolvedModel, store: FrameStore, *, device: str = "auto", worker: str = "main",
                 batch_size: int = 4, attn_implementation: str = "auto", device_map: str = "fit") -> None:
        try:
            import torch
            from transformers import AutoProcessor
            from transformers.utils import logging as hf_logging
        except ImportError as exc:
            raise ModelLoadError(f"--posbias-model {resolved.spec}: the `hf` extra is not installed (pip install "
                                 f"'pytest-posbias[hf]'): {exc}") from None
        hf_logging.set_verbosity_error()
        if resolved.family not in ADAPTERS:
            raise ModelLoadError(f"--posbias-model {resolved.spec}: no input adapter for family {resolved.family!r}")
        self.placement = plan_placement(resolved, device=pick_device(device, worker), option=device_map, worker=worker)
        self.attn_implementation = pick_attn_implementation(attn_implementation, self.placement.device)
        dtype = torch.bfloat16 if self.placement.device.startswith("cuda") else torch.float32
        self.max_batch_size = int(batch_size)
        try:
            processor = AutoProcessor.from_pretrained(resolved.target)
            self.model = load_model(resolved, self.placement, dtype=dtype, attn=self.attn_implementation)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as exc:
            raise ModelLoadError(f"--posbias-model {resolved.spec}: transformers could not load {resolved.target} "
                                 f"({type(exc).__name__}: {exc})") from None
        embed = self.model.get_input_embeddings().weight.device if self.placement.sharded else self.placement.device
        super().__init__(resolved, store, processor, device=str(embed), dtype=dtype)  # sharded: the first shard
        tok = self.tokenizer
        gc = self.model.generation_config
        eos = gc.eos_token_id if gc.eos_token_id is not None else tok.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else next(iter(self.eos_ids), 0)
        path = Path(resolved.target)
        if resolved.hub_id and resolved.revision:  # a snapshot of the Hugging Face cache: its id and commit hash
            model_id, revision = resolved.hub_id, resolved.revision
        elif path.is_dir():
            model_id, revision = path.name, _dir_revision(path)
        else:
            model_id = resolved.entry.hf_id if resolved.entry else resolved.target
            revision = str(getattr(self.model.config, "_commit_hash", None) or "unknown")
        self._identity = {"backend": "hf", "model_id": model_id, "revision": revision, "family": self.family,
                          "dtype": str(self.dtype).replace("torch.", ""), "device_type": self.device.split(":")[0],
                          "prefill": resolved.prefill, "attn_implementation": self.attn_implementation,
                          "sampler": GUMBEL_SAMPLER}
        try:  # the think tags change the answer text only where the tokenizer or the template has some
            think = any(self.think_tags())
        except BackendError:  # a chat template that fails fails every request: nothing is cached under this key
            think = True
        if think:
            self._identity["answer_text"] = ANSWER_TEXT
        # how the weights were placed: in the run log's model record, not in the cache key (it does not change outputs)
        self.placement_info = {"device": self.placement.device, "sharded": self.placement.sharded,
                               "device_map": (self.placement.device_map if isinstance(self.placement.device_map, str)
                                              else None),
                               "devices": (sorted({str(d) for d in getattr(self.model, "hf_device_map", {}).values()})
                                           or [self.device]),
                               "reason": self.placement.reason}
        self._letter_ids: dict[str, int] = {}

    def identity(self) -> Mapping[str, Any]:
        return self._identity

    def close(self) -> None:
        import gc

        del self.model
        gc.collect()

    # -- input building
    @staticmethod
    def _signature(r: Request) -> tuple[Any, ...]:
        return (*tuple((len(p.frames), p.frames.size, p.frames.aspect) for p in r.parts if isinstance(p, VideoPart)),
                sum(1 for p in r.parts if isinstance(p, ImagePart)))

    def _groups(self, requests: Sequence[Request], *, forward_only: bool = False) -> list[list[int]]:
        """Indices grouped so a batch holds requests whose videos have the same shapes (processors
        of some families stack videos) and, for generation, one decoding setting (greedy or
        sampled alike: sampled rows are seeded per row, see :mod:`.hf_sampling`)."""
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            key = self._signature(r) if forward_only else (self._signature(r), r.decoding, r.want == "both")
            groups.setdefault(key, []).append(i)
        n = self.max_batch_size
        return sorted(idx[k : k + n] for idx in groups.values() for k in range(0, len(idx), n))

    def letter_ids(self, letters: Sequence[str]) -> list[int]:
        for letter in letters:
            if letter not in self._letter_ids:
                ids = self.tokenizer.encode(letter, add_special_tokens=False)
                if len(ids) != 1:
                    raise BackendError(f"option letter {letter!r} is not a single token for {self.resolved.spec} "
                                       f"({ids}); letter scoring needs single-token letters")
                self._letter_ids[letter] = int(ids[0])
        return [self._letter_ids[letter] for letter in letters]

    # -- protocol
    def generate(self, requests: Sequence[Request]) -> list[Generation]:
        import torch

        results: list[Generation | None] = [None] * len(requests)
        for idx in self._groups(requests):
            batch = [requests[i] for i in idx]
            dec = batch[0].decoding
            t0 = time.perf_counter()
            inputs = self._inputs(batch)
            n_in = int(inputs["input_ids"].shape[1])
            kw: dict[str, Any] = {"max_new_tokens": dec.max_new_tokens, "do_sample": False,
                                  "temperature": None, "top_p": None, "top_k": None,
                                  "pad_token_id": self.pad_id, "return_dict_in_generate": True,
                                  "output_logits": any(r.want == "both" for r in batch)}
            if not dec.greedy:  # seeded per row: greedy over Gumbel-perturbed, filtered scores
                kw["logits_processor"] = [make_processor([r.seed for r in batch], n_in, temperature=dec.temperature,
                                                         top_k=dec.top_k, top_p=dec.top_p)]
            if dec.repetition_penalty != 1.0:
                kw["repetition_penalty"] = dec.repetition_penalty
            try:
                with torch.inference_mode():
                    out = self.model.generate(**inputs, **kw)
            except (RuntimeError, ValueError, IndexError) as exc:
                raise BackendError(f"generate failed for {self.resolved.spec}: {type(exc).__name__}: {exc}") from None
            dt = (time.perf_counter() - t0) / len(batch)
            counts = self.token_counts(inputs)
            seqs = out.sequences[:, n_in:].tolist()
            first_logits = out.logits[0].float().log_softmax(-1) if kw["output_logits"] else None
            for row, (i, r) in enumerate(zip(idx, batch, strict=True)):
                toks = seqs[row]
                n = next((k for k, t in enumerate(toks) if t in self.eos_ids), None)
                finish = "length" if n is None and len(toks) >= dec.max_new_tokens else "stop"
                body = [t for t in toks[:n] if t != self.pad_id]  # n None: no end of sequence, all of it
                text = self.answer_text(body)
                lp = None
                if r.want == "both" and first_logits is not None:
                    ids = self.letter_ids(r.letters)
                    lp = {letter: float(first_logits[row, tid]) for letter, tid in zip(r.letters, ids, strict=True)}
                results[i] = Generation(text, len(body), finish, lp, dt, prompt_tokens=counts[row][0],
                                        visual_tokens=counts[row][1], input_form="video")
        return [g for g in results if g is not None]

    def score_generations(self, requests: Sequence[Request]) -> list[Generation]:
        """Letter scores as Generations (one forward pass per batch), with prompt and visual token counts."""
        import torch

        results: list[Generation | None] = [None] * len(requests)
        for idx in self._groups(requests, forward_only=True):
            by_letters: dict[tuple[str, ...], list[int]] = {}
            for i in idx:
                by_letters.setdefault(tuple(requests[i].letters), []).append(i)
            for letters, sub in by_letters.items():
                ids = self.letter_ids(letters)
                batch = [requests[i] for i in sub]
                t0 = time.perf_counter()
                inputs = self._inputs(batch, prefill=self.resolved.prefill)
                try:
                    with torch.inference_mode():
                        logits = self.model(**inputs).logits[:, -1, :].float().log_softmax(-1)
                except (RuntimeError, ValueError, IndexError) as exc:
                    raise BackendError(f"forward pass failed for {self.resolved.spec}: "
                                       f"{type(exc).__name__}: {exc}") from None
                dt = (time.perf_counter() - t0) / len(batch)
                counts = self.token_counts(inputs)
                for row, i in enumerate(sub):
                    lp = {letter: float(logits[row, tid]) for letter, tid in zip(letters, ids, strict=True)}
                    if any(math.isnan(v) or v > 0.0 for v in lp.values()):  # NaN logits (bf16 overflow): no scores
                        results[i] = Generation(finish_reason="error", seconds=dt, input_form="video",
                                                error=f"{self.resolved.spec}: the letter log-probabilities are not "
                                                      f"finite log-probabilities ({lp}): the forward pass overflowed")
                        continue
                    results[i] = Generation("", 0, "stop", lp, dt, prompt_tokens=counts[row][0],
                                            visual_tokens=counts[row][1], input_form="video")
        return [g for g in results if g is not None]

    def score_options(self, requests: Sequence[Request], letters: Sequence[str]) -> list[dict[str, float]]:
        """Log-probability of each of ``letters`` per request (:meth:`score_generations`)."""
        gens = self.score_generations([replace(r, letters=tuple(letters)) for r in requests])
        return [dict(g.letter_logprobs or {}) for g in gens]
