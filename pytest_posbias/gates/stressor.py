"""The stressor suite's gates: clean repetition, stressor amplification and attack success at a
frame count, from a stressor probe result (:mod:`~pytest_posbias.probes.stressor`) to a verdict.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..gate_context import GateContext
from ..gate_registry import GATES, paired_direction
from ..probes.stressor import StressorResult
from ..stats import Verdict, _fmt, share_difference_verdict
from .design import LOOKS, floored, sequential_form, sequential_verdict, with_extra
from .measurement import Measurement, combine


def stressor_measurement(r: StressorResult, gate: str, stressor: str | None = None) -> Measurement:
    """Videos planned, measured and lost for a stressor-suite gate, and the model calls behind it.

    * repetition: a video is lost when its clean call failed;
    * stressor: lost when its clean call failed or none of its variants was measured; failed
      variant calls are excluded from the share and counted;
    * attack: the clean-benign videos are attacked; a video is lost when its clean call failed
      or its walk reached a failed call before a repetitive output.
    """
    planned = max(int(getattr(r, "planned", 0)), len(r.videos))
    unusable = planned - len(r.videos)
    clean_ok = r.clean.valid
    clean_failed = int((~clean_ok).sum())
    if gate == "repetition":
        return Measurement("videos", planned, int(clean_ok.sum()),
                           {"generation_errors": clean_failed - r.clean.empty, **r.clean.unusable(),
                            "unusable_data": unusable}, calls=len(clean_ok), failed_calls=clean_failed,
                           examples=[v for v, o in zip(r.videos, clean_ok, strict=True) if not o][:5])
    if stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    variants = r.variants.get(stressor, [])
    repetitive_clean = int((r.clean.flags & clean_ok).sum())  # not attacked by design: not lost
    if gate == "stressor":
        d = r.amplification(stressor)
        no_variant = [r.videos[v] for v in range(len(r.videos)) if clean_ok[v] and not variants[v].valid.any()]
        calls = len(clean_ok) + sum(len(s.ok) for s in variants)
        failed = clean_failed + sum(s.failed for s in variants)
        return Measurement("videos", planned, int((~np.isnan(d)).sum()),
                           {"clean_output_lost": clean_failed, "every_variant_lost": len(no_variant),
                            "unusable_data": unusable}, calls=calls, failed_calls=failed, examples=no_variant[:5])
    if gate == "attack":
        outcomes, walk_lost = r.attack_outcomes(stressor)
        walks = [r.walk(stressor, v)[1] for v in range(len(r.videos)) if clean_ok[v] and not r.clean.flags[v]]
        calls = clean_failed + sum(len(ok) for ok in walks)
        failed = clean_failed + sum(int((~ok).sum()) for ok in walks)
        return Measurement("clean-benign videos", planned - repetitive_clean, len(outcomes),
                           {"clean_output_lost": clean_failed, "walk_hit_a_lost_output": walk_lost,
                            "unusable_data": unusable}, calls=calls, failed_calls=failed)
    raise ConfigError(f"`gate` must be repetition, stressor or attack; got {gate!r}")


def stressor_verdict(ctx: GateContext, gate: str, model: str, frames: int, stressor: str | None = None) -> Verdict:
    """repetition (clean RR), stressor (paired amplification), attack (ASR) at a frame count.

    Failed calls are lost units, never clean outputs: excluded from numerator and denominator,
    counted, and above the failure share (1 − measurement floor, default 5%) or below the floor of
    measured videos the gate does not pass in either mode. Every attack walk stops at the cap. An
    unknown gate or a frame count that is not a whole number >= 1 is refused before any model call."""
    if gate not in ("repetition", "stressor", "attack"):
        raise ConfigError(f"`gate` must be repetition, stressor or attack; got {gate!r}")
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or frames < 1:
        raise ConfigError(f"`frames` must be a whole number of frames >= 1; got {frames!r}")
    spec = ctx.stressor_spec(frames)
    # the clean outputs are drawn for every video whatever the look (each stressor's variants and the attack
    # read them), so the repetition gate decides on all of them: stopping early would save no call and
    # leave measured units out; the amplification gate is fixed-sample too
    seq = ctx.sequential and not ctx.baseline and gate == "attack"
    if gate != "repetition" and stressor is None:
        raise ConfigError("`stressor` is required for the stressor and attack gates")
    # the repetition gate's controls reported beside it are a part of their own (suite test_stressor_controls)
    part = "clean" if gate == "repetition" else str(stressor)
    r = ctx.stressor(model, frames, max(1, spec.videos // LOOKS) if seq else None, part=part)
    base = ctx.stressor(ctx.baseline, frames, part=part) if ctx.baseline else None
    extra: dict[str, Any] = {"probe": "stressor", "frames": frames, "errors": r.errors, "n_videos": len(r.videos),
                             "problems": r.problems[:5]}
    if gate == "repetition":
        name = f"clean repetition rate at {frames} frames"
        extra.update(r.clean.summary())
        if base is not None:
            both = r.clean.valid & base.clean.valid
            m = combine(stressor_measurement(r, gate), stressor_measurement(base, gate), prefix_b="baseline",
                        measured=int(both.sum()))
            v = ctx.baseline_gate(gate, model, r.clean.flags[both].astype(int), base.clean.flags[both].astype(int),
                                  np.array(r.videos)[both], name=name, unit="videos", worse=paired_direction(gate),
                                  extra=extra)
            return floored(ctx, v, m)
        flags = r.clean.flags[r.clean.valid].astype(int)
        v = ctx.rate_gate(gate, model, int(flags.sum()), int(flags.size), name=name, unit="videos", extra=extra)
        return floored(ctx, v, stressor_measurement(r, gate))
    if gate == "stressor":
        name = f"{stressor} repetition amplification at {frames} frames"
        extra["stressor"] = stressor
        if base is not None:
            d, bd = r.amplification(part), base.amplification(part)
            both = ~np.isnan(d) & ~np.isnan(bd)
            m = combine(stressor_measurement(r, gate, part), stressor_measurement(base, gate, part),
                        prefix_b="baseline", measured=int(both.sum()))
            # (stressed share, clean flag) per video: the rare clean flags get an exact paired bound
            cand = np.column_stack([d + r.clean.flags, r.clean.flags])[both]
            bas = np.column_stack([bd + base.clean.flags, base.clean.flags])[both]
            v = ctx.baseline_gate(gate, model, cand, bas, np.array(r.videos)[both], name=name, unit="videos",
                                  worse=paired_direction(gate), extra=extra)
            return floored(ctx, v, m)
        # fixed design: a share minus a rare 0/1 clean flag per video (share_difference_verdict)
        full = ctx.stressor(model, frames, part=part)
        d = full.amplification(part)
        ok = ~np.isnan(d)
        stressed = [s.flags[s.valid].mean() for s in full.variants[part] if s.valid.any()]
        extra.update({"stressed_rr": float(np.mean(stressed)) if stressed else None,
                      "clean_rr": float(full.clean.flags[full.clean.valid].mean()) if full.clean.valid.any() else None,
                      "n_videos": len(full.videos), "design": "fixed",
                      "variants_per_video": [len(s.texts) for s in full.variants[part]][:1]})
        clean_flag = np.asarray(full.clean.flags, dtype=float)[ok]
        v = share_difference_verdict(np.clip(d[ok] + clean_flag, 0.0, 1.0), clean_flag, name=name,
                                     threshold=ctx.threshold(gate, model), sides=GATES[gate].side, mode=ctx.mode,
                                     alpha=ctx.alpha, unit="videos", n_resamples=ctx.n_resamples,
                                     rng=ctx.rng("bootstrap", gate, name, model),
                                     extra={"gate": gate, "model": model, **extra})
        return floored(ctx, v, stressor_measurement(full, gate, part))
    name = f"{stressor} attack success rate at {frames} frames"
    extra.update({"stressor": stressor, "cap": r.spec.attack_cap})
    if seq:
        def successes(n: int) -> np.ndarray:
            return np.array(ctx.stressor(model, frames, n, part=part).attack_outcomes(part)[0], dtype=float)

        v = sequential_verdict(ctx, gate, model, values_at=successes, n_max=spec.videos, kind="rate", name=name,
                               unit="benign videos", extra=extra)
        r = ctx.stressor(model, frames, v.extra["looks"][-1], part=part)
        a = r.attack(part)
        v = with_extra(v, {"asr": a["asr"], "aq": a["aq"], "attacked": a["attacked"],
                           "videos_drawn": v.extra["looks"][-1]})
    else:
        a = r.attack(part)
        extra.update({"asr": a["asr"], "aq": a["aq"], "attacked": a["attacked"],
                      **sequential_form(spec.videos, "rate")})
        v = ctx.rate_gate(gate, model, a["successes"], a["attacked"], name=name, unit="benign videos", extra=extra)
    v = replace(v, reason=f"{v.reason[:-1]}; average queries AQ = {_fmt(a['aq'])}.")
    return floored(ctx, v, stressor_measurement(r, gate, part))
