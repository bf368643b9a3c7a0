"""Calibrate the embed judge's threshold on the synthetic set; prints a table.

For every ActivityNet-style clip of the synthetic set, each reference sentence is paired
with (a) the simulated model's sentence for the same fact, written from the true scene
(positive), and (b) the sentences the model would write about a *different* scene of
the same domain, excluding facts that happen to be true of both (negative). A reference
sentence should be covered by its own fact and not by a different object's.

Run: python benchmarks/judge_threshold.py [--count N]
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_posbias.models.sim import facts
from pytest_posbias.models.sim_vision import ObjectTrack, VideoView
from pytest_posbias.scoring.judges import EMBED_THRESHOLD, Embedder
from pytest_posbias.video import synthetic as SY


def view_of(scene: SY.SceneSpec) -> VideoView:
    objs = tuple(ObjectTrack(o.shape, o.colour, o.change_to or o.colour, o.motion) for o in scene.objects)
    return VideoView(objs, tuple(e.kind for e in scene.events), SY.DOMAINS[scene.domain]["bg_name"], 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=40, help="scenes per domain")
    args = ap.parse_args()
    emb = Embedder()
    pos: list[float] = []
    neg: list[float] = []
    for domain in ("cooking", "domestic", "leisure"):
        scenes = [SY.make_scene(f"cal-{domain}-{k}", domain, "short", seed=900 + k) for k in range(args.count)]
        for i, sc in enumerate(scenes):
            other = scenes[(i + 1) % len(scenes)]
            mine = facts(view_of(sc))
            theirs = [f for f in facts(view_of(other)) if f.kind == "object"]
            refs = [r for r in SY.references(sc) if "slides" in r or "sits still" in r]
            own_objects = [f.text for f in mine if f.kind == "object"]
            for r in refs:
                pos.append(float(emb.similarity([r], own_objects).max()))
                # negatives: the other scene's object sentences, unless they state the same colour+shape
                cands = [f.text for f in theirs if not any(f"{o.colour} {o.shape}" in f.text for o in sc.objects)]
                if cands:
                    neg.append(float(emb.similarity([r], cands).max()))
    p, n = np.array(pos), np.array(neg)
    print(f"{len(p)} positive pairs (reference vs the same fact), {len(n)} negative pairs (another object)")
    print(f"{'threshold':>9} {'covered(pos)':>13} {'rejected(neg)':>14} {'balanced acc':>13}")
    best = (0.0, 0.0)
    for t in np.arange(0.50, 0.86, 0.05):
        tp, tn = float((p >= t).mean()), float((n < t).mean())
        bal = (tp + tn) / 2
        best = max(best, (bal, t))
        mark = "  <- EMBED_THRESHOLD" if abs(t - EMBED_THRESHOLD) < 1e-9 else ""
        print(f"{t:>9.2f} {tp:>13.3f} {tn:>14.3f} {bal:>13.3f}{mark}")
    print(f"best balanced accuracy {best[0]:.3f} at {best[1]:.2f}; configured EMBED_THRESHOLD = {EMBED_THRESHOLD}")


if __name__ == "__main__":
    main()
