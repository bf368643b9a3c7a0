"""The report's property-search section, from the search gates' verdicts in the run log
(:mod:`~pytest_posbias.gates.search`): the success rate and queries to the first break, the replay
of stored counterexamples, and per broken item its minimal counterexample (both frame strips with
the changed frames marked, what changed, both answers). jinja2's autoescape escapes every text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .sections import highlight_repeats

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PROPERTY_TITLES = {"order": "option order", "phase": "sampling phase", "stressor": "temporal stressor (repetition)",
                   "coverage": "slot coverage"}


def _frames(strip: Sequence[Mapping[str, Any]], thumbs: Mapping[str, str]) -> list[dict[str, Any]]:
    """One strip's frames for the template: thumbnail, label (frame index; foreign frames as
    ``other:i``), and the changed / gap-before marks."""
    out = []
    for pos, f in enumerate(strip):
        src, idx = str(f.get("source", "clip")), int(f["index"])
        out.append({"pos": pos, "index": idx, "source": src, "thumb": thumbs.get(f"{src}:{idx}", ""),
                    "label": str(idx) if src == "clip" else f"other:{idx}", "changed": bool(f.get("changed")),
                    "gap_before": bool(f.get("gap_before"))})
    return out


def perturbation_text(prop: str, value: Mapping[str, Any] | None) -> str:
    """A stored perturbation in words (the replay table; the counterexample cards spell it out)."""
    v = dict(value or {})
    if prop == "order" and "order" in v:
        return "options shown as " + " ".join(LETTERS[int(k)] for k in v["order"])
    if prop == "phase" and "phase" in v:
        return f"phase {v['phase']}"
    if prop == "stressor" and "edits" in v:
        return "; ".join(edit_text(e) for e in v["edits"]) or "no edit"
    if prop == "coverage" and "order" in v:
        return (f"slots show videos {' '.join(str(int(k) + 1) for k in v['order'])}, boundary {v.get('boundary')}, "
                f"{v.get('placement')}, labels from {v.get('label_base')}")
    return ", ".join(f"{k} {val}" for k, val in sorted(v.items()))


def edit_text(e: Mapping[str, Any]) -> str:
    """One stressor edit in words, positions 0-based in the sampled frame list it applies to."""
    kind, pos, src = str(e.get("kind")), list(e.get("positions", [])), list(e.get("sources", []))
    pairs = ", ".join(f"{p}←{s}" for p, s in zip(pos, src, strict=False))
    return {"replace": f"replace (position←sampled frame of the clip) {pairs}",
            "foreign": f"replace with the other video (position←its sampled frame) {pairs}",
            "add": f"insert copies (before position←sampled frame) {pairs}",
            "delete": f"delete positions {', '.join(map(str, pos))}",
            "reverse": f"reverse positions {', '.join(map(str, pos))}",
            "shuffle": f"rotate positions {', '.join(map(str, pos))} by one"}.get(kind, f"{kind} {pos} {src}")


def _options(c: Mapping[str, Any], perm: Sequence[int]) -> list[dict[str, Any]]:
    opts = list(c.get("options") or [])
    return [{"letter": LETTERS[slot], "content": int(k), "text": opts[int(k)] if int(k) < len(opts) else "?",
             "moved": int(k) != slot, "correct": int(k) == c.get("correct")} for slot, k in enumerate(perm)]


def _answer_text(answer: Any, c: Mapping[str, Any] | None = None) -> str:
    """A replayed answer in words: an option's text, or the description's first characters."""
    if isinstance(answer, Mapping):
        if "coverage" in answer:
            return "coverage " + " · ".join(f"{float(x):.2f}" for x in answer["coverage"])
        return str(answer.get("text", ""))[:300]
    if isinstance(answer, int) and c is not None and c.get("options"):
        return str(c["options"][answer]) if 0 <= answer < len(c["options"]) else str(answer)
    return "" if answer is None else str(answer)


def _shown(row: Mapping[str, Any], which: str, c: Mapping[str, Any] | None) -> str:
    """A replayed query's answer (``which`` = answer or reference): ``B — option text`` for a
    multiple-choice item, else the text or coverage."""
    if row.get(f"{which}_text") is not None:
        letter = row.get(f"{which}_letter")
        return f"{letter} — {row[f'{which}_text']}" if letter else str(row[f"{which}_text"])
    return _answer_text(row.get(which), c)


def counterexample_view(c: Mapping[str, Any]) -> dict[str, Any]:
    """One minimal counterexample (``extra.counterexamples[i]``) ready for the template."""
    prop = str(c.get("property"))
    thumbs = dict(c.get("thumbnails") or {})
    frames = c.get("frames") or {}
    v: dict[str, Any] = {"item": c.get("item"), "property": prop, "replayed": bool(c.get("replayed")),
                         "found_by": list(c.get("found_by") or []),
                         **{k: c.get(k) for k in ("size", "queries_to_first_break", "queries", "shrink_queries")},
                         "perturbation": perturbation_text(prop, c.get("perturbation")),
                         "original": _frames(frames.get("original", []), thumbs),
                         "perturbed": _frames(frames.get("perturbed", []), thumbs)}
    v["n_changed"] = sum(f["changed"] for f in v["perturbed"])
    v["n_gaps"] = sum(f["gap_before"] for f in v["perturbed"])
    if prop in ("order", "phase"):
        n = len(c.get("options") or [])
        v.update({k: c.get(k) for k in ("video", "reference_letter", "reference_text", "answer_letter", "answer_text",
                                        "transpositions")},
                 question=c.get("question", ""), original_options=_options(c, list(range(n))),
                 perturbed_options=_options(c, c.get("option_order") or range(n)),
                 reference_correct=c.get("reference_answer") == c.get("correct"),
                 answer_correct=c.get("answer") == c.get("correct"), phase=c.get("phase", "0"),
                 same_frames=[f["index"] for f in v["original"]] == [f["index"] for f in v["perturbed"]])
    elif prop == "stressor":
        v.update({k: c.get(k) for k in ("video", "foreign_video", "stressed_frames", "finish_reason")},
                 edits=[edit_text(e) for e in c.get("edits") or []],
                 reference_tokens=highlight_repeats(str(c.get("reference_text", ""))),
                 answer_tokens=highlight_repeats(str(c.get("answer_text", ""))))
    elif prop == "coverage":
        videos = list(c.get("videos") or [])
        ref_cov, cov = list(c.get("reference_coverage") or []), list(c.get("coverage") or [])
        fell = set(c.get("fell_below") or [])
        by_vid = {vid: (ref_cov[i] if i < len(ref_cov) else None, cov[i] if i < len(cov) else None)
                  for i, vid in enumerate(videos)}

        def slots(order: Sequence[str], which: int) -> list[dict[str, Any]]:
            return [{"slot": s + 1, "video": vid, "thumb": thumbs.get(f"video:{vid}", ""),
                     "coverage": by_vid.get(vid, (None, None))[which],
                     "fell": vid in fell and which == 1, "moved": order[s] != videos[s] if s < len(videos) else False}
                    for s, vid in enumerate(order)]

        v.update(floor=c.get("floor"), layout=dict(c.get("layout") or {}), original_slots=slots(videos, 0),
                 perturbed_slots=slots(list(c.get("slots") or []), 1),
                 fell_below=sorted(fell), reference_text=c.get("reference_text", ""),
                 answer_text=c.get("answer_text", ""))
    return v


def search_gates(verdicts: Sequence[Mapping[str, Any]], anchor: Callable[[Mapping[str, Any]], str] | None = None
                 ) -> list[dict[str, Any]]:
    """Every search gate of the report's verdicts with its counterexamples and replay, in the
    verdicts' order (failures first, as the verdict table)."""
    out = []
    for v in verdicts:
        ex = v.get("extra") or {}
        if ex.get("gate") != "search" or "counterexamples" not in ex:
            continue
        prop = str(ex.get("property"))
        cx = [dict(c) for c in ex.get("counterexamples") or []]
        by_item = {c.get("item"): c for c in cx}
        rp = dict(ex.get("replay") or {})
        replay_rows = []
        for outcome, key in (("still breaks", "still_break"), ("survived", "survived"), ("lost", "lost")):
            for row in rp.get(key) or []:
                c = by_item.get(row.get("item"))
                replay_rows.append({"item": row.get("item"), "outcome": outcome,
                                    "perturbation": perturbation_text(prop, row.get("value")),
                                    "found_by": ", ".join(row.get("found_by") or []),
                                    "answer": _shown(row, "answer", c), "reference": _shown(row, "reference", c)})
        out.append({"name": v.get("name"), "model": v.get("model") or ex.get("model"), "passed": bool(v.get("passed")),
                    "anchor": anchor(v) if anchor else "", "property": prop, "unit": v.get("unit") or "searched items",
                    "title": PROPERTY_TITLES.get(prop, prop),
                    **{k: v.get(k) for k in ("estimate", "ci_low", "ci_high", "threshold")},
                    **{k: ex.get(k) for k in ("budget", "shrink_budget", "searched", "broken", "held", "excluded",
                                              "lost", "total_queries", "shrink_queries", "baseline_model",
                                              "baseline_broken", "paired")},
                    "median_q": ex.get("median_queries_to_first_break"),
                    "mean_q": ex.get("mean_queries_to_first_break"),
                    "replay_line": ex.get("summary_line", ""), "replay_rows": replay_rows,
                    "replay_survived": len(rp.get("survived") or []), "replay_still": len(rp.get("still_break") or []),
                    "newly_broken": list(ex.get("newly_broken") or []), "fixed": list(ex.get("fixed") or []),
                    "counterexamples": [counterexample_view(c) for c in cx]})
    return out


__all__ = ["counterexample_view", "edit_text", "perturbation_text", "search_gates"]
