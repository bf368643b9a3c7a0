"""Batched seeded sampling on the ``hf`` backend: a request's tokens depend on its own seed only.

For a tiny random-weight checkpoint of every family, each of eight sampled requests gives
the same tokens alone, in a batch of 8, and in a batch with other requests whose prompts have
different lengths (so its row is left-padded differently). Also: the Gumbel-max draw has the
distribution of ``softmax(filtered logits / T)``, checked against the closed form.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from pytest_posbias.engine import Decoding, Request
from pytest_posbias.models.hf import HFBackend
from pytest_posbias.models.hf_sampling import gumbel_noise, make_processor, step_seed
from pytest_posbias.models.registry import resolve
from pytest_posbias.models.tiny import FAMILIES
from pytest_posbias.video.compose import TextPart, VideoPart
from pytest_posbias.video.frames import FrameSpec

PROMPTS = ["Describe.", "Summarize each video in 4 sentences.", "What colour is the circle?",
           "A red circle moves from left to right. Please describe this video in detail.",
           "Tell me.", "Answer with the option letter only.", "In which direction does it move?",
           "The green triangle turns yellow. The screen goes black for a moment. Describe it."]
OTHERS = ["Hi.", "A white flash fills the screen. A blue square stays still in the middle. Summarize the video now.",
          "Video 0: 8 uniformly sampled frames"]


# qwen2_vl (mrope position ids under left padding) in the quick pass, every other family marked slow (CI runs them)
@pytest.mark.parametrize("family", [f if f == "qwen2_vl" else pytest.param(f, marks=pytest.mark.slow) for f in FAMILIES])
def test_sampled_tokens_do_not_depend_on_the_batch(family, tiny_checkpoints, store, synthetic_clips):
    b = HFBackend(resolve(str(tiny_checkpoints[family])), store, device="cpu", batch_size=8)
    try:
        spec = FrameSpec.from_video(synthetic_clips[0], [0, 20, 40, 60], size=56)
        dec = Decoding(max_new_tokens=12, temperature=0.9, top_p=0.95, top_k=50)

        def req(prompt: str, seed: int) -> Request:
            return Request(b.resolved.spec, (VideoPart(spec), TextPart(prompt)), dec, seed=seed)

        mine = [req(p, 1000 + k) for k, p in enumerate(PROMPTS)]
        others = [req(p, 7 + k) for k, p in enumerate(OTHERS)]
        lengths = {len(b._inputs([r])["input_ids"][0]) for r in mine + others}
        assert len(lengths) >= 4  # rows of different lengths: left padding differs between batches
        alone = [b.generate([r])[0] for r in mine]
        batch8 = b.generate(mine)
        b.max_batch_size = 8
        mixed = b.generate([others[0], mine[3], others[1], mine[0], mine[5], others[2], mine[7], mine[1]])
        mixed_mine = {3: mixed[1], 0: mixed[3], 5: mixed[4], 7: mixed[6], 1: mixed[7]}
        for k, g in enumerate(alone):
            assert g.ok and g.n_tokens >= 1
            assert (batch8[k].text, batch8[k].n_tokens, batch8[k].finish_reason) == (g.text, g.n_tokens, g.finish_reason), k
            if k in mixed_mine:
                m = mixed_mine[k]
                assert (m.text, m.n_tokens, m.finish_reason) == (g.text, g.n_tokens, g.finish_reason), k
            # token accounting: the row's own prompt, whatever padding the batch added
            assert batch8[k].prompt_tokens == g.prompt_tokens == len(b._inputs([mine[k]])["input_ids"][0])
            assert 0 < g.visual_tokens < g.prompt_tokens
        # seeds matter: eight seeds give more than one distinct output on the same prompt
        same_prompt = b.generate([req(PROMPTS[0], s) for s in range(8)])
        assert len({g.text for g in same_prompt}) > 1
    finally:
        b.close()


def test_gumbel_max_draws_follow_the_filtered_softmax():
    """Over 20,000 seeds, the first-step draw's frequencies match softmax(top-k(logits / T))."""
    import torch

    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]])
    T, k = 0.7, 4
    proc = make_processor(list(range(20_000)), 3, temperature=T, top_k=k)
    ids = torch.zeros((20_000, 3), dtype=torch.long)
    scores = proc(ids, logits.repeat(20_000, 1))
    draws = scores.argmax(-1).numpy()
    p = np.exp(logits[0, :k].numpy() / T)
    p /= p.sum()
    freq = np.bincount(draws, minlength=6) / draws.size
    assert freq[k:].sum() == 0  # filtered tokens are never drawn
    se = np.sqrt(p * (1 - p) / draws.size)
    assert np.all(np.abs(freq[:k] - p) < 4.5 * se), (freq, p)


def test_noise_is_a_function_of_seed_and_step_only():
    a = gumbel_noise(5, 3, 100)
    assert bool((a == gumbel_noise(5, 3, 100)).all())
    assert not bool((a == gumbel_noise(5, 4, 100)).all()) and not bool((a == gumbel_noise(6, 3, 100)).all())
    assert step_seed(5, 3) != step_seed(3, 5)
    # a sample mean and variance near the Gumbel's (Euler-Mascheroni 0.5772, pi^2 / 6)
    x = gumbel_noise(1, 0, 200_000).numpy()
    assert abs(x.mean() - 0.5772) < 0.02 and abs(x.var() - np.pi**2 / 6) < 0.05
