"""Batch-independent seeded sampling for the ``hf`` backend (torch imported lazily, here only).

Sampling is done as greedy decoding over perturbed scores (the Gumbel-max trick): at step t
of request i, with filtered scores ``s = top_p(top_k(logits / T))`` (transformers'
``TemperatureLogitsWarper``, ``TopKLogitsWarper``, ``TopPLogitsWarper``, in that order, as
``generate(do_sample=True)`` applies them), the next token is

    argmax_v  s[v] + G[v],    G[v] = -log(-log U[v]),  U ~ Uniform(0, 1)

which is a draw from ``softmax(s)`` (Gumbel 1954; Maddison, Tarlow & Minka 2014, "A* Sampling",
section 2). ``U`` comes from a ``torch.Generator`` seeded with ``sha256(request seed, step)``,
one per request and step, so a request's tokens are a function of its own seed, prompt and
model only: never of the batch it ran in, of its row, or of how many tokens the other rows
produced. Filtered-out tokens keep ``-inf`` and cannot be drawn.

The noise is drawn on the scores' device in float64 (a CUDA generator on a GPU, so a GPU run
reproduces itself but not a CPU run: the device type is part of the backend identity).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

GUMBEL_SAMPLER = "gumbel-max/sha256(seed,step)/v1"  # recorded in the backend identity (cache key)


def step_seed(seed: int, step: int) -> int:
    """The generator seed of (request seed, decoding step): the first 63 bits of
    sha256("posbias-gumbel", seed, step)."""
    h = hashlib.sha256(f"posbias-gumbel|{int(seed)}|{int(step)}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def gumbel_noise(seed: int, step: int, n: int, *, device: Any = "cpu") -> Any:
    """Standard Gumbel noise of length ``n`` for (seed, step): ``-log(-log U)`` with U drawn in
    float64 from a generator seeded with :func:`step_seed` (U is clamped to (0, 1) open)."""
    import torch

    g = torch.Generator(device=device)
    g.manual_seed(step_seed(seed, step))
    u = torch.rand(n, generator=g, device=device, dtype=torch.float64)
    u = u.clamp(min=torch.finfo(torch.float64).tiny, max=1.0 - 1e-16)
    return -torch.log(-torch.log(u))


def make_processor(seeds: Sequence[int], prompt_len: int, *, temperature: float, top_k: int = 0,
                   top_p: float = 1.0) -> Any:
    """A transformers ``LogitsProcessor`` that turns greedy decoding into seeded sampling, one
    seed per batch row (see the module docstring). ``prompt_len`` is the padded prompt length:
    step t = current length - prompt_len."""
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    if temperature <= 0:
        raise ValueError(f"`temperature` must be > 0 for sampling; got {temperature!r}")
    warpers: list[Any] = [TemperatureLogitsWarper(float(temperature))]
    if top_k:
        warpers.append(TopKLogitsWarper(top_k=int(top_k)))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=float(top_p)))
    seeds_t = [int(s) for s in seeds]

    class SeededGumbelProcessor(LogitsProcessor):
        """Temperature/top-k/top-p, then per-row seeded Gumbel noise (argmax = a sample)."""

        def __call__(self, input_ids: Any, scores: Any) -> Any:
            import torch

            if scores.shape[0] != len(seeds_t):
                raise ValueError(f"seeded sampler: {scores.shape[0]} rows for {len(seeds_t)} seeds")
            step = int(input_ids.shape[1]) - prompt_len
            s = scores
            for w in warpers:  # in the scores' dtype, as generate(do_sample=True) filters them
                s = w(input_ids, s)
            noise = torch.stack([gumbel_noise(seed, step, s.shape[1], device=s.device) for seed in seeds_t])
            return s.to(torch.float64) + noise

    return SeededGumbelProcessor()
