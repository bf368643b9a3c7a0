"""Gates that cannot be fooled, through the real probes and the run's end: every call failing is
no measurement, a few failed calls fail past the floor, empty descriptions and garbage summaries
are lost units, and a run that decided nothing or left tests without a verdict is never reported
as passed."""

from __future__ import annotations

import pytest

from pytest_posbias.run_options import RunOptions
from pytest_posbias.stats import rate_verdict


def _verdict():
    return rate_verdict(0, 8, name="order flip rate", threshold=0.15, mode="detect", alpha=0.05, unit="items")


class _Flaky:
    """Wraps a backend: the calls whose request hash falls below ``share`` fail (as an endpoint
    error would), the others are answered by the wrapped backend."""

    def __init__(self, inner, share):
        self.inner, self.share = inner, share
        self.name, self.max_batch_size = inner.name, inner.max_batch_size
        self.supports_letter_logprobs = inner.supports_letter_logprobs

    def identity(self):
        return {**self.inner.identity(), "flaky": self.share}

    def _fails(self, r):
        import hashlib
        import json

        h = hashlib.sha256(json.dumps([str(r.meta), r.seed, r.replicate], sort_keys=True).encode()).digest()
        return int.from_bytes(h[:4], "little") / 2**32 < self.share

    def generate(self, reqs):
        from pytest_posbias.engine import Generation

        ok = [r for r in reqs if not self._fails(r)]
        gens = iter(self.inner.generate(ok) if ok else [])
        return [Generation(finish_reason="error", error="injected: HTTP 503") if self._fails(r) else next(gens)
                for r in reqs]

    def score_generations(self, reqs):
        from pytest_posbias.engine import Generation

        out = []
        for r in reqs:
            if self._fails(r):
                out.append(Generation(finish_reason="error", error="injected: HTTP 503"))
            else:
                out.append(Generation("", 0, "stop", dict(self.inner.score_options([r], r.letters)[0])))
        return out

    def score_options(self, reqs, letters):
        return self.inner.score_options(reqs, letters)

    def close(self):
        self.inner.close()


def _context(tmp_path, manifest, share, *, mode="detect"):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    pcfg = PosbiasConfig(probes={"phase": {"items": 12}, "stressor": {"videos": 6, "trials": 2, "frames": [16]}})
    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "cache"), data=str(manifest),
                                       sequential=False, mode=mode, judge="auto"),
                            pcfg, rootdir=tmp_path,
                            worker="t", run_id=f"flaky-{share}")
    if share:
        ctx._backends["sim:unbiased"] = _Flaky(ctx.backend("sim:unbiased"), share)
    return ctx


def test_every_call_failing_is_no_measurement_not_a_pass(tmp_path, small_set):
    """8/8 failed calls gave order PASS and clean repetition PASS."""
    from pytest_posbias.gates import phase_verdict, stressor_verdict

    ctx = _context(tmp_path, small_set, 1.0)
    try:
        for mode in ("detect", "certify"):
            ctx.mode = mode  # the probes are memoized: only the decision is recomputed
            for v in (phase_verdict(ctx, "order", "sim:unbiased"), stressor_verdict(ctx, "repetition", "sim:unbiased", 16),
                      stressor_verdict(ctx, "stressor", "sim:unbiased", 16, "shuffle"),
                      stressor_verdict(ctx, "attack", "sim:unbiased", 16, "shuffle")):
                assert not v.passed, v.reason
                assert "no measurement" in v.reason
                assert v.extra["measurement"]["measured"] == 0
    finally:
        ctx.close()


def test_a_few_failed_calls_past_the_floor_fail_and_below_it_pass(tmp_path, small_set):
    """10% of calls failing is past the 5% failure share: the stressor gates fail in detect mode
    although sim:unbiased never loops; with every call answered they pass."""
    from pytest_posbias.gates import stressor_verdict

    clean_ctx = _context(tmp_path / "a", small_set, 0.0)
    flaky_ctx = _context(tmp_path / "b", small_set, 0.10)
    try:
        good = stressor_verdict(clean_ctx, "stressor", "sim:unbiased", 16, "shuffle")
        bad = stressor_verdict(flaky_ctx, "stressor", "sim:unbiased", 16, "shuffle")
        assert good.passed and good.extra["measurement"]["failed_calls"] == 0
        m = bad.extra["measurement"]
        assert m["failed_calls"] > 0.05 * m["calls"]
        assert not bad.passed
        assert "too many failed model calls" in bad.reason or "measurement floor not met" in bad.reason
        # the gate counts exactly the failed calls behind it: the clean calls and the shuffle walk's
        res = flaky_ctx.stressor("sim:unbiased", 16)
        behind = [res.clean, *res.variants["shuffle"]]
        assert m["failed_calls"] == sum(not ok for t in behind for ok in t.ok) > 0
        assert m["calls"] == sum(len(t.ok) for t in behind)
        assert bad.extra["measurement"]["measured"] < 6 or m["failed_calls"] > 0.05 * m["calls"]
    finally:
        clean_ctx.close()
        flaky_ctx.close()


def _report_text(tmp_path, header_extra, verdicts=()):
    import json
    import re

    from pytest_posbias import SCHEMA_VERSION
    from pytest_posbias.report.render import render

    log = tmp_path / "run.jsonl"
    header = {"kind": "header", "schema_version": SCHEMA_VERSION, "run_id": "r", "models": ["openai:x"], "seed": 0,
              "mode": "detect", "alpha": 0.05, "started": "2026-11-30T00:00:00+00:00", "command": ["pytest"],
              "calls": {}, "environment": {}, **header_extra}
    log.write_text("\n".join(json.dumps(r) for r in [header, *verdicts]) + "\n")
    html = re.sub(r"<style.*?</style>", "", render([log]), flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_a_run_that_decided_nothing_is_not_reported_as_passed(tmp_path):
    """The run stopped at start (exit 4, endpoint unreachable): 0 gates must not read ALL PASSED."""
    txt = _report_text(tmp_path, {"exitstatus": 4})
    assert "ALL PASSED" not in txt
    assert "RUN DID NOT FINISH (pytest exit 4)" in txt and "NO GATE DECIDED" in txt


def test_tests_that_ended_without_a_verdict_are_named(tmp_path):
    v = _verdict().to_dict() | {"kind": "verdict", "nodeid": "suites/t.py::test_order", "p_bh": 1.0}
    txt = _report_text(tmp_path, {"exitstatus": 1, "errored_tests": [
        {"nodeid": "suites/t.py::test_dpb[x]", "when": "call", "message": ["KeyError: 'phase:0'"]}]}, [v])
    assert "ALL PASSED" not in txt
    assert "1 TESTS ENDED WITHOUT A VERDICT" in txt and "test_dpb[x]" in txt and "KeyError" in txt


class _Garbage(_Flaky):
    """Answers every request with ``text`` (an empty answer, or words that match no reference)."""

    def __init__(self, inner, text):
        super().__init__(inner, 0.0)
        self.text = text

    def identity(self):
        return {**self.inner.identity(), "garbage": self.text}

    def generate(self, reqs):
        from pytest_posbias.engine import Generation

        return [Generation(self.text, len(self.text.split()), "stop") for _ in reqs]


@pytest.mark.parametrize("text", ["", "Lorem ipsum dolor sit amet. Consectetur adipiscing elit."])
def test_a_model_writing_garbage_does_not_pass_meg_or_dpb(tmp_path, small_set, text):
    """Every multi-video output empty or unalignable gave 6 x MEG PASS (MEG = 0, CI ±5e-12)."""
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.gates import positional_verdict
    from pytest_posbias.run.context import RunContext
    from pytest_posbias.run.suite_params import positional_spec

    ctx = RunContext.create(RunOptions(models=("sim:unbiased",), cache=str(tmp_path / "c"), data=str(small_set),
                                       sequential=True, judge="auto"),
                            PosbiasConfig(probes={"positional": {"groups": 8, "scales": [4]}}), rootdir=tmp_path,
                            worker="t", run_id="garbage")
    ctx._backends["sim:unbiased"] = _Garbage(ctx.backend("sim:unbiased"), text)
    try:
        spec = positional_spec(ctx.probe_settings("positional"), "cooking", "short", 4)
        for gate in ("meg", "dpb"):
            v = positional_verdict(ctx, gate, "sim:unbiased", spec)
            assert not v.passed, v.reason
            assert "no measurement" in v.reason
            lost = v.extra["measurement"]["lost"]
            # an empty answer, and the same text to every group, are lost units with their reason
            assert lost == {("empty_answer" if not text else "constant_answer"): v.extra["measurement"]["planned"]}
        cov = positional_verdict(ctx, "coverage", "sim:unbiased", spec)
        assert not cov.passed and "no measurement" in cov.reason  # neither is scored at zero coverage
        contam = positional_verdict(ctx, "contamination", "sim:unbiased", spec)
        assert not contam.passed and "no measurement" in contam.reason  # no slot matches any reference
    finally:
        ctx.close()


def test_empty_descriptions_are_lost_not_clean(tmp_path, small_set):
    """A server answering "" to every description gave repetition and attack PASS."""
    from pytest_posbias.gates import stressor_verdict

    ctx = _context(tmp_path, small_set, 0.0)
    ctx._backends["sim:unbiased"] = _Garbage(ctx.backend("sim:unbiased"), "")
    try:
        for gate, s in (("repetition", None), ("attack", "add1"), ("stressor", "add1")):
            v = stressor_verdict(ctx, gate, "sim:unbiased", 16, s)
            assert not v.passed and "no measurement" in v.reason, v.reason
    finally:
        ctx.close()
