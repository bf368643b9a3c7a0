"""The property search in the report and the terminal summary: the minimal counterexamples' frame
strips (thumbnails recorded in the run log, changed frames marked), the option orders / phases /
stressor edits / slot layouts with both answers, escaped; the replay of stored counterexamples."""

from __future__ import annotations

import base64
import html as htmllib
import io
import json
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from pytest_posbias.gates.search import search_verdict
from pytest_posbias.probes.search import Outcome, run_search
from pytest_posbias.probes.search_corpus import corpus_for
from pytest_posbias.run_options import RunOptions

EVIL = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'


def _ctx(root: Path, manifest: Path, model: str, run_id: str) -> Any:
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    return RunContext(RunOptions(models=(model,), data=str(manifest), cache=str(root / ".posbias"), seed=0),
                      PosbiasConfig(), rootdir=root, worker="main", run_id=run_id)


def _log(path: Path, model: str, verdicts: list[Any]) -> Path:
    """A run log as the session writes it: a header, then one verdict record per gate."""
    from pytest_posbias.engine import SCHEMA_VERSION

    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": "header", "schema_version": SCHEMA_VERSION, "models": [model], "run_id": path.stem,
                             "seed": 0}) + "\n")
        for i, v in enumerate(verdicts):
            fh.write(json.dumps({"kind": "verdict", "nodeid": f"suites/test_search.py::t{i}[{model}]", "p_bh": v.p_value,
                                 **v.to_dict()}) + "\n")
    return path


def _jpeg_size(uri: str) -> tuple[int, int]:
    from PIL import Image

    assert uri.startswith("data:image/jpeg;base64,")
    img = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert img.format == "JPEG"
    return img.size


def _cards(html: str) -> dict[str, str]:
    """The counterexample cards of the report by item id."""
    parts = re.split(r'<div class="sx-card" data-item="', html)[1:]
    return {p.split('"', 1)[0]: p for p in parts}


def _order_verdict(ctx: Any, model: str, n: int) -> Any:
    from pytest_posbias.probes.phase import item_order
    from pytest_posbias.probes.search_mcq import McqProperty

    items = item_order(ctx, ctx.manifest())[:n]
    res = [run_search(ctx, McqProperty(ctx, model, it, "order", ctx.phase_spec()), corpus=corpus_for(ctx), seed=0)
           for it in items]
    return search_verdict(ctx, model, "order", res, planned=n, budget=30, shrink_budget=60)


def test_order_counterexamples_strips_answers_and_replay_in_report_and_summary(tmp_path, small_set):
    from pytest_posbias.report.render import render
    from pytest_posbias.report.summary import verdict_lines

    ctx = _ctx(tmp_path, small_set, "sim:letter-bias", "r1")
    v = _order_verdict(ctx, "sim:letter-bias", 6)
    items = {it.id: it for it in ctx.manifest().mcq}
    ctx.close()
    cx = v.extra["counterexamples"]
    assert cx and len(cx) == v.extra["broken"]
    for c in cx:
        # the run log carries one small JPEG per frame of the strips (the order property shows the same frames)
        keys = {f"clip:{f['index']}" for f in c["frames"]["original"] + c["frames"]["perturbed"]}
        assert set(c["thumbnails"]) == keys
        assert all(max(_jpeg_size(u)) <= 64 for u in c["thumbnails"].values())
    log = _log(tmp_path / "lb.jsonl", "sim:letter-bias", [v])
    html = render([log])
    assert "5. Property search: minimal counterexamples" in html and "6. Examples from failing gates" in html
    cards = _cards(html)
    assert set(cards) == {c["item"] for c in cx}
    for c in cx:
        card, it = cards[c["item"]], items[c["item"]]
        assert all(u in card for u in c["thumbnails"].values())  # the strip, read from the log alone
        assert re.findall(r'<span class="idx">(\d+)</span>', card) == [str(f["index"]) for f in c["frames"]["original"]]
        assert 'class="sx-fr changed' not in card  # reordering options changes no frame
        # both option orders, in the order shown, and both answers (letter and option text)
        shown = [htmllib.unescape(x) for x in re.findall(r"<li[^>]*>[A-Z]\. (.*?)(?: <span|</li>)", card)]
        k = len(it.options)
        assert shown == [it.options[j] for j in range(k)] + [it.options[j] for j in c["option_order"]]
        assert f"<b>{c['reference_letter']}</b> — {htmllib.escape(c['reference_text'])}" in card
        assert f"<b>{c['answer_letter']}</b> — {htmllib.escape(c['answer_text'])}" in card
        assert "1 transposition," in card

    # a candidate replays the stored counterexamples first: the summary line, the verdict and the report say so
    ctx2 = _ctx(tmp_path, small_set, "sim:unbiased", "r2")
    v2 = _order_verdict(ctx2, "sim:unbiased", 6)
    ctx2.close()
    rp = v2.extra["replay"]
    assert len(rp["survived"]) == len(cx) and rp["still_break"] == [] and rp["found_by"] == ["sim:letter-bias"]
    line = f"replayed {len(cx)} stored counterexamples first (found by sim:letter-bias): 0 still break, {len(cx)} survived"
    assert v2.extra["summary_line"] == line and line in v2.reason
    lines = [t for t, _ in verdict_lines([{"nodeid": "suites/test_search.py::t[sim:unbiased]", "verdict": v2, "p_bh": 0.5}],
                                         width=400)]
    assert any(t.strip() == line for t in lines)
    html2 = render([_log(tmp_path / "ub.jsonl", "sim:unbiased", [v2])])
    assert htmllib.escape(line) in html2 and f"sim:unbiased now survives {len(cx)} old counterexample" in html2
    table = html2.split('class="replay-table"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(.*?)</td>.*?</tr>", table, flags=re.S)
    assert sorted(rows) == sorted(c["item"] for c in cx)
    assert table.count(">survived</td>") == len(cx)
    for c in cx:  # the stored ordering, and the candidate's answers unperturbed and under it
        assert "options shown as " + " ".join("ABCDEFGH"[j] for j in c["option_order"]) in table


def test_stressor_strip_marks_the_changed_frames_and_texts_are_escaped(tmp_path, small_set):
    from pytest_posbias.probes.search_stressor import StressorProperty
    from pytest_posbias.probes.stressor import select_videos
    from pytest_posbias.report.render import render

    ctx = _ctx(tmp_path, small_set, "sim:looping", "r1")
    videos = select_videos(ctx, ctx.manifest(), 4)
    spec = ctx.stressor_spec(16)
    res = [run_search(ctx, StressorProperty(ctx, "sim:looping", v, videos[(i + 1) % 4], spec), corpus=corpus_for(ctx), seed=0)
           for i, v in enumerate(videos)]
    v = search_verdict(ctx, "sim:looping", "stressor", res, planned=4, budget=30, shrink_budget=60)
    ctx.close()
    cx = v.extra["counterexamples"]
    assert cx
    html = render([_log(tmp_path / "lp.jsonl", "sim:looping", [v])])
    cards = _cards(html)
    for c in cx:
        card = cards[c["item"]]
        strips = re.findall(r'<div class="sx-strip">(.*?)</div>', card, flags=re.S)
        assert len(strips) == 2
        pert = re.findall(r'<span class="sx-fr( changed)?( foreign)?"', strips[1])
        assert [bool(ch) for ch, _ in pert] == [f["changed"] for f in c["frames"]["perturbed"]]
        assert sum(bool(ch) for ch, _ in pert) >= 1 and 'sx-fr changed' not in strips[0]
        assert strips[1].count('class="sx-gap"') == sum(f["gap_before"] for f in c["frames"]["perturbed"])
        labels = re.findall(r'<span class="idx">([^<]+)</span>', strips[1])
        assert labels == [str(f["index"]) if f["source"] == "clip" else f"other:{f['index']}" for f in c["frames"]["perturbed"]]
        assert f"{c['stressed_frames']} stressed frame" in card and "<mark>" in card  # the loop's repeated 5-grams

    # untrusted text: every model text and item text is escaped
    d = v.to_dict()
    for c in d["extra"]["counterexamples"]:
        c["answer_text"] = c["reference_text"] = EVIL + " same words again " * 3
        c["item"] = EVIL
    d["extra"]["replay"]["survived"] = [{"item": EVIL, "value": {"edits": [{"kind": "replace", "positions": [0],
                                                                             "sources": [1]}]},
                                         "found_by": [EVIL], "answer": {"text": EVIL}, "reference": {"text": EVIL}}]
    d["extra"]["replay"]["queried"] = 1
    log = tmp_path / "evil.jsonl"
    _log(log, "sim:looping", [])
    with log.open("a") as fh:
        fh.write(json.dumps({"kind": "verdict", "nodeid": "suites/test_search.py::t[sim:looping]", "p_bh": 0.5, **d}) + "\n")
    evil = render([log])
    assert "<script>" not in evil and "onerror=alert(1)>" not in evil.replace("&gt;", "")
    assert evil.count("&lt;script&gt;") >= 3 * len(cx) + 3


def test_phase_and_coverage_counterexamples_show_both_phases_and_both_layouts(tmp_path, small_set):
    """describe() of a phase and a slot-layout counterexample (no model call), recorded and rendered."""
    from pytest_posbias.probes.phase import item_order
    from pytest_posbias.probes.positional import PositionalSpec
    from pytest_posbias.probes.search import ItemSearch
    from pytest_posbias.probes.search_coverage import CoverageProperty
    from pytest_posbias.probes.search_mcq import McqProperty
    from pytest_posbias.report.render import render
    from pytest_posbias.strategies import Layout

    ctx = _ctx(tmp_path, small_set, "sim:unbiased", "r1")
    it = item_order(ctx, ctx.manifest())[0]
    ph = McqProperty(ctx, "sim:unbiased", it, "phase", ctx.phase_spec())
    ref = Outcome(True, False, it.answer, {"answer_text": it.options[it.answer], "answer_letter": "ABCDE"[it.answer]})
    other = (it.answer + 1) % len(it.options)
    out = Outcome(True, True, other, {"answer_text": EVIL, "answer_letter": "ABCDE"[other]})
    m_phase = ph.describe(Fraction(1, 2), out, ref)
    manifest = ctx.manifest()
    group = next(g for g in manifest.groups if g.P == 4)
    spec = PositionalSpec(group.domain, group.bucket, 4, frames=8, resolution=160)
    cov = CoverageProperty(ctx, "sim:unbiased", group, manifest, spec, floor=0.5)
    lay = Layout((1, 0, 2, 3))
    m_cov = cov.describe(lay, Outcome(True, True, {"coverage": [0.2, 0.8, 0.6, 0.7], "text": EVIL}),
                         Outcome(True, False, {"coverage": [0.9, 0.8, 0.6, 0.7], "text": "ok"}))
    results = [ItemSearch("phase", it.id, "sim:unbiased", "broken", queries_to_first_break=2, queries=5, minimal=m_phase),
               ItemSearch("coverage", group.id, "sim:unbiased", "broken", queries_to_first_break=1, queries=3, minimal=m_cov)]
    verdicts = [search_verdict(ctx, "sim:unbiased", "phase", results[:1], planned=1, budget=30, shrink_budget=60),
                search_verdict(ctx, "sim:unbiased", "coverage", results[1:], planned=1, budget=30, shrink_budget=60)]
    ctx.close()
    c_phase, c_cov = (v.extra["counterexamples"][0] for v in verdicts)
    assert set(c_cov["thumbnails"]) == {f"video:{vid}" for vid in group.videos}
    assert set(c_phase["thumbnails"]) == {f"clip:{i}" for i in ph.indices(Fraction(0)) + ph.indices(Fraction(1, 2))}
    html = render([_log(tmp_path / "x.jsonl", "sim:unbiased", verdicts)])
    cards = _cards(html)
    card = cards[it.id]
    assert "original (phase 0)" in card and "perturbed (phase 1/2)" in card
    strips = re.findall(r'<div class="sx-strip">(.*?)</div>', card, flags=re.S)
    orig = [int(x) for x in re.findall(r'<span class="idx">(\d+)</span>', strips[0])]
    pert = re.findall(r'<span class="sx-fr( changed)?"[^>]*>.*?<span class="idx">(\d+)</span>', strips[1], flags=re.S)
    assert orig == ph.indices(Fraction(0)) and [int(i) for _, i in pert] == ph.indices(Fraction(1, 2))
    assert [bool(ch) for ch, _ in pert] == [int(i) not in orig for _, i in pert] and any(ch for ch, _ in pert)
    assert "&lt;script&gt;" in card and "<script>" not in html
    card = cards[group.id]
    slots = re.findall(r'<div class="sx-slot( moved)?( fell)?">', card)
    # slot 1 now shows video 2 and slot 2 video 1, whose coverage fell below the floor there
    assert slots == [("", "")] * 4 + [(" moved", ""), (" moved", " fell"), ("", ""), ("", "")]
    assert f"fell below: {group.videos[0]}" in card and c_cov["thumbnails"][f"video:{group.videos[0]}"] in card


@pytest.mark.parametrize("prop,value,text", [
    ("order", {"order": [1, 0, 2]}, "options shown as B A C"),
    ("phase", {"phase": "1/3"}, "phase 1/3"),
    ("stressor", {"edits": [{"kind": "delete", "positions": [3, 5], "sources": []}]}, "delete positions 3, 5"),
    ("coverage", {"order": [1, 0], "boundary": "none", "placement": "prompt-first", "label_base": 1},
     "slots show videos 2 1, boundary none, prompt-first, labels from 1"),
])
def test_perturbation_in_words(prop, value, text):
    from pytest_posbias.report.search import perturbation_text

    assert perturbation_text(prop, value) == text


@pytest.mark.slow  # two models searched through the suite's settings
def test_baseline_pairs_the_searched_items_with_an_exact_test_and_names_newly_broken_ones(tmp_path, small_set):
    """``--baseline``: both models searched on the same items, Δ = broken share (candidate) − (baseline)."""
    from pytest_posbias.config import parse_config
    from pytest_posbias.gates.search import search_gate
    from pytest_posbias.report.render import render
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.stats.paired import paired_binary_bound, paired_binary_p

    # 6 pairs: the fewest at margin 0.10 where some outcome (every pair newly broken) shows a violation
    cfg = parse_config({"probes": {"search": {"items": 6, "budget": 10}}})
    ctx = RunContext(RunOptions(models=("sim:letter-bias",), baseline="sim:unbiased", data=str(small_set),
                                cache=str(tmp_path / ".posbias"), seed=0),
                     cfg, rootdir=tmp_path, worker="main", run_id="b1")
    v = search_gate(ctx, "sim:letter-bias", "order")
    ctx.close()
    ex = v.extra
    items = {r["item"]: r["status"] for r in ex["items"]}
    assert ex["paired"] == sum(s in ("broken", "held") for s in items.values()) == v.n == 6
    n10 = len(ex["newly_broken"])
    n01 = len(ex["fixed"])
    assert ex["newly_broken"] == [i for i, s in items.items() if s == "broken"] and ex["baseline_broken"] == n01 == 0
    assert n10 == ex["broken"] > 0 and v.estimate == pytest.approx((n10 - n01) / 6)
    # margin 0.10: the exact unconditional non-inferiority test, each CI bound inverting it at the margin
    assert (v.ci_low, v.ci_high) == pytest.approx((paired_binary_bound(n10, n01, 6, 0.05, side="lower", anchor=0.10),
                                                   paired_binary_bound(n10, n01, 6, 0.05, side="upper", anchor=0.10)))
    assert v.p_value == pytest.approx(paired_binary_p(n10, n01, 6, 0.10, alternative="greater"))
    assert "exact unconditional" in ex["method"]
    assert v.threshold == pytest.approx(0.10) and ex["baseline_model"] == "sim:unbiased" and ex["budget"] == 10
    html = render([_log(tmp_path / "b.jsonl", "sim:letter-bias", [v])])
    assert "Against the baseline sim:unbiased on the 6 items searched for both" in html
    assert "Newly broken: " + ", ".join(ex["newly_broken"]) in html and "Fixed: none" in html
    assert set(_cards(html)) == set(ex["newly_broken"])
