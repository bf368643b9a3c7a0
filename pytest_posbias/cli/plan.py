"""``posbias plan [PYTEST ARGS] [--prefill-tps N --decode-tps N | --measure]``: cost before a run (docs/cost.md).

It runs ``pytest ARGS --posbias-plan DIR --posbias-fixed`` in a subprocess, so the probes' own request
builders plan every request (:mod:`.models.plan`); ``--measure`` first warms up each model
(:func:`measure`) and plans again with the measured output lengths.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import shlex
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..exitcodes import USAGE_ERROR
from ..gate_registry import GATES, gate_of_test
from ..safe_text import strict_json

SEQUENTIAL_EXPECTED = 0.5  # share of the maximum sample at the median stop under a compliant model (calibration)
MEASURE_PER_KIND = 4  # requests of each kind (probe, output, cap, temperature) in the warm-up


class PlanUsageError(ConfigError):
    """The plan run of the selection stopped with pytest's usage error (exit 4: bad options or settings, no
    model to test): ``posbias plan`` prints it and exits 4, as the run itself would."""


def register(sub: Any, register_fn: Any) -> None:
    """Add ``posbias plan`` to the command line."""
    p = register_fn(sub, "plan", _plan, "requests, frames, tokens and GPU-hours per gate before a run "
                                        "(takes pytest's options: -m, --model, --posbias-data, ...)")
    p.add_argument("--prefill-tps", type=float, default=None, metavar="TOK/S",
                   help="prompt tokens per second of one GPU at the run's batch size")
    p.add_argument("--decode-tps", type=float, default=None, metavar="TOK/S",
                   help="output tokens per second of one GPU at the run's batch size (all rows of a batch together)")
    p.add_argument("--measure", action="store_true",
                   help="measure output lengths (and, on hf, prefill/decode tok/s) with a short warm-up on the model")
    p.add_argument("--plan-json", default=None, metavar="PATH", help="also write the plan as JSON")
    p.add_argument("pytest_args", nargs="*", help="pytest options and test paths (anything not named above)")


OWN_VALUE_OPTIONS = ("--prefill-tps", "--decode-tps", "--plan-json")


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(plan's own options, pytest's arguments in their order) of ``posbias plan ARGS``."""
    own: list[str] = []
    rest: list[str] = []
    it = iter(argv)
    for a in it:
        name = a.partition("=")[0]
        if name in OWN_VALUE_OPTIONS:
            own.append(a)
            value = next(it, None) if "=" not in a else None
            if value is not None:  # none left: argparse names the option that lacks its value
                own.append(value)
        elif a in ("--measure", "-h", "--help"):
            own.append(a)
        else:
            rest.append(a)
    return own, rest


def long_options(args: Sequence[str]) -> list[str]:
    """``args`` with the suites' short options (``--model X``, ``--baseline=X``, ...) spelled as the
    plugin's own ``--posbias-*`` options (config.SHORT_ALIASES), which every project accepts."""
    from ..config import SHORT_ALIASES

    return [SHORT_ALIASES[name] + a[len(name):] if (name := a.partition("=")[0]) in SHORT_ALIASES else a for a in args]


def _plan(args: argparse.Namespace) -> int:
    for name in ("prefill_tps", "decode_tps"):
        v = getattr(args, name)
        if v is not None and not 0 < v < math.inf:  # inf would plan 0 GPU-hours for its side of the cost
            raise ConfigError(f"--{name.replace('_', '-')} must be a finite number > 0; got {v!r}")
    if args.plan_json and (Path(args.plan_json).is_dir() or not Path(args.plan_json).parent.is_dir()):
        raise ConfigError(f"--plan-json {args.plan_json}: " + ("is a folder" if Path(args.plan_json).is_dir() else
                                                                "its folder does not exist") + "; name a JSON file")
    pytest_args = [a for a in args.pytest_args if a != "--"]
    with tempfile.TemporaryDirectory(prefix="posbias-plan-") as tmp:
        try:
            plan = run_plan(pytest_args, Path(tmp))
        except PlanUsageError as exc:  # the run would stop with the same usage error: the same message and status
            print(f"posbias plan: error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        tps = {"prefill": args.prefill_tps, "decode": args.decode_tps, "source": "given"}
        if args.measure:
            measured = measure(plan, Path(tmp), pytest_args)
            (Path(tmp) / "out2").mkdir()
            lengths = {k: v for m in measured.values() for k, v in m["output_lengths"].items()}
            plan = run_plan(pytest_args, Path(tmp) / "out2", output_lengths=lengths)
            plan["measured"] = measured
            hf = [m for m in measured.values() if m.get("prefill_tps")]
            if hf and args.prefill_tps is None and args.decode_tps is None:
                tps = {"prefill": hf[0]["prefill_tps"], "decode": hf[0]["decode_tps"], "source": "measured"}
    plan["tps"] = tps
    for line in format_plan(plan):
        print(line)
    if args.plan_json:
        Path(args.plan_json).write_text(strict_json(plan, indent=2, sort_keys=True, default=str))
    return 0 if plan["rows"] else 1


def run_plan(pytest_args: Sequence[str], tmp: Path, *,
             output_lengths: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Run the selection in plan mode; per gate test: requests, frames, tokens, design."""
    rec = tmp / "requests"
    rec.mkdir(parents=True, exist_ok=True)
    if output_lengths:
        (rec / "output_lengths.json").write_text(json.dumps(dict(output_lengths)))
    js = tmp / "plan.json"
    cmd = [sys.executable, "-m", "pytest", *long_options(pytest_args), f"--posbias-plan={rec}", "--posbias-fixed",
           f"--posbias-cache={tmp / 'cache'}", f"--posbias-report={tmp / 'report.html'}", f"--posbias-json={js}",
           "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    if proc.returncode == USAGE_ERROR:
        errors = [line.removeprefix("ERROR: ") for line in (proc.stderr + proc.stdout).splitlines()
                  if line.startswith("ERROR: ")]
        raise PlanUsageError("\n".join(errors) or tail)
    if not js.is_file():
        raise ConfigError(f"the plan run of `pytest {shlex.join(pytest_args)}` did not finish (exit "
                          f"{proc.returncode}):\n{tail}")
    out = json.loads(js.read_text())
    rows = [json.loads(line) for f in sorted(rec.glob("requests-*.jsonl")) for line in f.read_text().splitlines()
            if line]
    from ..models.plan import configured_sequential

    # the plan run records the design the project's run would use (a baseline, given either way, fixes it)
    fixed = "--posbias-fixed" in pytest_args or not configured_sequential(rec)
    return {"args": list(pytest_args),
            "gates": aggregate(rows, out.get("verdicts", []), sequential=not fixed,
                               reads=[json.loads(line) for f in sorted(rec.glob("reads-*.jsonl"))
                                      for line in f.read_text().splitlines() if line]),
            "rows": rows, "token_sources": sorted({r["token_source"] for r in rows}),
            "skipped": [line.removeprefix("SKIPPED ") for line in proc.stdout.splitlines()
                        if line.startswith("SKIPPED ")]}


def aggregate(rows: Sequence[Mapping[str, Any]], verdicts: Sequence[Mapping[str, Any]], *,
              sequential: bool, reads: Sequence[Mapping[str, str]] = ()) -> list[dict[str, Any]]:
    """Per gate test (in run order): new requests, frames and tokens from the recorded rows,
    shared requests and the gate from its verdict, and the sequential design's shares of its cost
    (:func:`sequential_shares`; 1 for a test decided under the fixed design in a sequential run too,
    a probe one shares, or a run that is not ``sequential``). A test whose probe results other tests
    read (``reads``: :func:`pytest_posbias.models.plan.record_read`) makes its requests up to the
    furthest look any of them reaches: a request counts at the largest share among the tests that read
    its probe result (its row's ``family``) or asked for it (its ``key``: a probe of another gate sharing
    requests through the cache), a test's shares are the mean over its requests."""
    by_test: dict[str, dict[str, Any]] = {}

    def entry(test: str) -> dict[str, Any]:
        return by_test.setdefault(test, {"test": test, "requests": 0, "frames": 0, "prompt_tokens": 0,
                                         "visual_tokens": 0, "output_tokens": 0, "models": set(),
                                         "gate": _gate_from_nodeid(test), "shared": 0, "verdict": None})

    for r in rows:
        g = entry(r["test"])
        g["requests"] += 1
        for k in ("frames", "prompt_tokens", "visual_tokens", "output_tokens"):
            g[k] += int(r[k])
        g["models"].add(r["model"])
    for v in verdicts:
        g = entry(v["nodeid"])
        extra = v.get("extra") or {}
        g["gate"] = extra.get("gate", "") or _gate_from_nodeid(g["test"])
        g["shared"] = int((extra.get("calls") or {}).get("shared", 0))
        g["verdict"] = v
    # requests are counted once, on the gate that made them; a fixed-design gate that shares a
    # probe's results (the stressor amplification shares the stressor probe) needs all of them;
    # the parity gates draw their probe's units at full size, so that probe's gates cannot stop early
    fixed_probes = {GATES[g["gate"]].probe for g in by_test.values()
                    if g["gate"] in GATES and GATES[g["gate"]].fixed and (g["requests"] or g["shared"])}
    out = []
    for g in by_test.values():
        v = g.pop("verdict")
        spec = GATES.get(g["gate"])
        seq = sequential and v is not None and spec is not None and spec.probe not in fixed_probes
        expected, best = sequential_shares(v, spec.value_range) if seq and spec is not None else (1.0, 1.0)
        out.append({**g, "models": sorted(g["models"]), "sequential_expected": expected, "sequential_best": best})
    share = {g["test"]: (g["sequential_expected"], g["sequential_best"]) for g in out}
    read: dict[str, tuple[float, float]] = {}  # a probe result's family or a request's key -> its largest share
    for r in reads:
        if r["test"] in share:
            for name in [r.get("family") or "", *(r.get("keys") or ())]:
                if name:
                    read[name] = _larger(read.get(name, (0.0, 0.0)), share[r["test"]])
    per_row: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        found = [read[n] for n in (r.get("family"), r.get("key")) if n in read]
        per_row[r["test"]].append(_larger(*found) if found else share[r["test"]])
    for g in out:
        if rs := per_row[g["test"]]:
            g["sequential_expected"], g["sequential_best"] = (sum(x) / len(rs) for x in zip(*rs, strict=True))
    return out


def _larger(*shares: tuple[float, float]) -> tuple[float, float]:
    """The larger (expected, best) share of each kind (a tuple's ``max`` would compare them in order)."""
    return max(e for e, _ in shares), max(b for _, b in shares)


def sequential_shares(verdict: Mapping[str, Any], value_range: tuple[float, float]) -> tuple[float, float]:
    """(expected, best) share of a gate test's fixed-design cost under the sequential design, from the
    ``sequential_form`` of its plan verdict (:func:`pytest_posbias.gates.design.sequential_form`; (1, 1)
    without one: the test decides under the fixed design in a sequential run too).

    Best: the fewest units on which the gate can pass
    (:func:`~pytest_posbias.stats.sequential.gsd_best_stop`: a mean gate needing 8 groups cannot pass at
    look 1 or 2 of a 12-group design). Expected: the calibration's median stop for a model
    well inside its threshold, half the maximum sample (docs/calibration.md), at the first look from
    there, and not before the best case."""
    from ..gates.design import LOOKS
    from ..stats.sequential import gsd_best_stop, gsd_sizes

    form = (verdict.get("extra") or {}).get("sequential_form")
    if not form:
        return 1.0, 1.0
    n_max = int(form["n_max"])
    best = gsd_best_stop(n_max=n_max, looks=LOOKS, kind=form["kind"], lower=float(verdict["lower"]),
                         upper=float(verdict["upper"]), mode=verdict["mode"], alpha=float(verdict["alpha"]),
                         value_range=value_range, rule=form["rule"], lattice_step=form["lattice_step"],
                         certify_from=int(form["certify_from"]))
    expected = next(n for n in gsd_sizes(n_max, LOOKS) if n >= max(best, n_max * SEQUENTIAL_EXPECTED))
    return expected / n_max, best / n_max


def _gate_from_nodeid(nodeid: str) -> str:
    """The gate whose verdicts the test of ``nodeid`` gives (its function's name in the registry);
    empty for a test that gives none."""
    gate = gate_of_test(nodeid.split("::")[-1].split("[")[0])
    return gate.name if gate is not None else ""


def hours(prompt: float, output: float, tps: Mapping[str, Any]) -> float | None:
    """GPU-hours = (prompt / prefill tok/s + output / decode tok/s) / 3600; None without both rates."""
    if not tps.get("prefill") or not tps.get("decode"):
        return None
    return (prompt / float(tps["prefill"]) + output / float(tps["decode"])) / 3600.0


def format_plan(plan: Mapping[str, Any]) -> list[str]:
    """The per-gate table and the totals (fixed-sample and sequential expected)."""
    tps = plan.get("tps") or {}
    gates = plan["gates"]
    src = ", ".join(plan.get("token_sources") or ["none"])
    lines = [f"posbias plan: pytest {shlex.join(plan.get('args') or [])}",
             f"prompt tokens from: {src}" + ("" if src == "processor" else
                                             "  (estimate: text chars/4 + 16 template tokens; a video frame of side s "
                                             "= ceil(s/28)^2 / 2 tokens, Qwen2-VL-style)"),
             "output tokens: " + ("measured mean per request kind (--measure)" if plan.get("measured") else
                                  "the decoding cap max_new_tokens per text request (an upper bound); none for letter "
                                  "scoring")]
    if hours(1, 1, tps) is not None:
        lines.append(f"throughput ({tps.get('source')}): prefill {float(tps['prefill']):,.0f} tok/s, decode "
                     f"{float(tps['decode']):,.0f} tok/s")
    else:
        lines.append("GPU-hours: give --prefill-tps and --decode-tps, or --measure")
    head = (f"{'gate test':<58} {'requests':>9} {'shared':>7} {'frames':>9} {'prompt tok':>12} {'visual':>12} "
            f"{'output tok':>11} {'GPU-h':>8} {'seq. exp.':>9}")
    lines += ["", head, "-" * len(head)]
    tot: defaultdict[str, float] = defaultdict(float)
    for g in gates:
        h = hours(g["prompt_tokens"], g["output_tokens"], tps)
        hs = "" if h is None else f"{h:8.3f}"
        seq = g["sequential_expected"]
        name = g["test"].split("::")[-1]
        name = name if len(name) <= 58 else name[:55] + "..."
        lines.append(f"{name:<58} {g['requests']:>9,} {g['shared']:>7,} {g['frames']:>9,} "
                     f"{g['prompt_tokens']:>12,} {g['visual_tokens']:>12,} {g['output_tokens']:>11,} {hs:>8} "
                     f"{seq:>8.0%}")
        for k in ("requests", "frames", "prompt_tokens", "visual_tokens", "output_tokens"):
            tot[k] += g[k]
            tot["seq_" + k] += g[k] * seq
            tot["best_" + k] += g[k] * g["sequential_best"]
    lines.append("-" * len(head))
    for label, pre in (("fixed-sample design (every gate at its maximum)", ""),
                       ("sequential design, expected (model well inside the thresholds)", "seq_"),
                       ("sequential design, best case (every gate passes at its earliest look)", "best_")):
        h = hours(tot[pre + "prompt_tokens"], tot[pre + "output_tokens"], tps)
        lines.append(f"{label}: {tot[pre + 'requests']:,.0f} requests, {tot[pre + 'frames']:,.0f} frames, "
                     f"{tot[pre + 'prompt_tokens']:,.0f} prompt tokens ({tot[pre + 'visual_tokens']:,.0f} visual), "
                     f"{tot[pre + 'output_tokens']:,.0f} output tokens"
                     + ("" if h is None else f", {h:,.2f} GPU-hours"))
    if any(g["gate"] == "search" for g in gates):
        lines.append("search gates: every item at its budget (the reference, budget + shrink_budget distinct "
                     "queries, fewer where the perturbation space holds fewer); not counted: the stored "
                     "counterexamples of other models a run replays first (one request each, from the cache's "
                     "hypothesis/ folder)")
    if not plan["rows"]:
        skipping = ": the selected tests skip" if plan.get("skipped") else ""
        lines.append(f"no selected test would call a model{skipping}")
        lines += [f"  {line}" for line in plan.get("skipped") or []]
    if tot["requests"]:
        lines.append(f"sequential saves {1 - tot['seq_requests'] / tot['requests']:.0%} of the requests expected "
                     f"(at most {1 - tot['best_requests'] / tot['requests']:.0%}); near a threshold it saves little "
                     "(docs/calibration.md)")
    for spec, m in (plan.get("measured") or {}).items():
        at = f"per GPU over {m['gpus']} GPU(s) of the vLLM servers" if m.get("gpus") else f"at batch {m['batch_size']}"
        extra = (f", prefill {m['prefill_tps']:,.0f} tok/s, decode {m['decode_tps']:,.0f} tok/s {at}"
                 if m.get("prefill_tps") else "")
        lines.append(f"measured on {spec}: {m['requests']} warm-up requests in {m['seconds']:.1f} s{extra}")
    return lines


def measure(plan: Mapping[str, Any], tmp: Path, pytest_args: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A short warm-up on each planned model: up to MEASURE_PER_KIND requests of each kind
    through the real backend. Returns per model the mean output tokens per kind and, on ``hf``,
    prefill tok/s (one forward pass over a batch) and decode tok/s (output tokens over the
    generation time minus that prefill time), at the backend's batch size."""
    from ..config import PosbiasConfig
    from ..engine import Request
    from ..run.context import RunContext
    from ..run_options import RunOptions

    opts = _run_options(pytest_args)
    by_model: dict[str, dict[str, list[Request]]] = defaultdict(lambda: defaultdict(list))
    for r in plan["rows"]:
        kinds = by_model[r["model"]]
        if len(kinds[r["group"]]) < MEASURE_PER_KIND:
            kinds[r["group"]].append(Request.from_log(r["request"]))
    out: dict[str, dict[str, Any]] = {}
    options = RunOptions(**opts, models=tuple(by_model), cache=str(tmp / "measure-cache"))
    ctx = RunContext.create(options, PosbiasConfig(), rootdir=Path.cwd(), worker="main", run_id="plan-measure",
                            quiet=True)
    try:
        for spec, kinds in by_model.items():
            backend = ctx.backend(spec)
            t0 = time.perf_counter()
            lengths: dict[str, float] = {}
            pre_tok = pre_s = dec_tok = dec_s = 0.0
            n = 0
            served = spec.startswith("vllm:")  # served by the run's vLLM: tok/s from the requests' timing
            timed: list[tuple[bool, float, float, float]] = []  # (letters, prompt tokens, output tokens, seconds)
            for kind, reqs in kinds.items():
                if reqs[0].want == "letters":
                    lengths[kind] = 0.0
                    if served:
                        _timed_generate(backend, reqs, timed, one_token=True)
                        n += len(reqs)
                    continue
                if served and len(reqs) > 1:
                    # prefill: one-token answers to every other request (others than those generated
                    # below, so vLLM's prefix cache cannot shorten either pass)
                    one = [replace(r, decoding=replace(r.decoding, max_new_tokens=1)) for r in reqs[1::2]]
                    _timed_generate(backend, one, timed, one_token=True)
                    n += len(one)
                    reqs = reqs[::2]
                gens = _timed_generate(backend, reqs, timed if served else None)
                n += len(reqs)
                lengths[kind] = sum(g.n_tokens for g in gens) / len(gens)
                if backend.name == "hf":
                    p_s = _prefill_seconds(backend, reqs)
                    g_s = _cuda_seconds(backend.generate, list(reqs))
                    pre_tok += sum(g.prompt_tokens or 0 for g in gens)
                    pre_s += p_s
                    dec_tok += sum(g.n_tokens for g in gens)
                    dec_s += max(g_s - p_s, 1e-9)
            m: dict[str, Any] = {"output_lengths": lengths, "requests": n, "seconds": time.perf_counter() - t0,
                                 "batch_size": int(getattr(backend, "max_batch_size", 1))}
            if served:
                m.update(_served_rates(timed, gpus=int(getattr(backend, "gpus", 1))))
            elif pre_s > 0 and dec_tok > 0:
                m.update(prefill_tps=pre_tok / pre_s, decode_tps=dec_tok / dec_s)
            out[spec] = m
    finally:
        ctx.close()
    return out


def _served_rates(timed: Sequence[tuple[bool, float, float, float]], *, gpus: int) -> dict[str, float]:
    """Per-GPU prefill and decode tok/s of a served model from its warm-up requests' timing.

    ``timed``: (one-token batch?, prompt tokens, output tokens, wall seconds) per batch. Letter
    requests and the one-token copies of generation requests generate one token, so prefill tok/s = their prompt tokens
    / their seconds; the generation batches' seconds minus their prompt tokens at that rate are decode time, so decode
    tok/s = their output tokens / that time. Both are divided by ``gpus`` (every GPU the servers
    hold: replicas x tensor-parallel size; 1 on vLLM-CPU), so GPU-hours = tokens / rate / 3600 as
    on ``hf``. Empty when the warm-up had no letter batch or no output tokens."""
    lp, ls = sum(t[1] for t in timed if t[0]), sum(t[3] for t in timed if t[0])
    gp, go, gs = (sum(t[i] for t in timed if not t[0]) for i in (1, 2, 3))
    if not (lp > 0 and ls > 0 and go > 0):
        return {}
    prefill = lp / ls
    decode_s = max(gs - gp / prefill, 1e-9)
    g = max(1, gpus)
    return {"prefill_tps": prefill / g, "decode_tps": go / decode_s / g, "gpus": g}


def _timed_generate(backend: Any, reqs: list[Any], timed: list[tuple[bool, float, float, float]] | None, *,
                    one_token: bool = False) -> list[Any]:
    """``backend.generate(reqs)``; with ``timed``, appends (one_token, prompt tokens, output tokens, seconds)."""
    t0 = time.perf_counter()
    gens: list[Any] = backend.generate(reqs)
    if timed is not None:
        timed.append((one_token, sum(g.prompt_tokens or 0 for g in gens),
                      0.0 if one_token else sum(g.n_tokens for g in gens), time.perf_counter() - t0))
    return gens


def _prefill_seconds(backend: Any, reqs: Sequence[Any]) -> float:
    import torch

    inputs = backend._inputs(list(reqs))
    with torch.inference_mode():
        backend.model(**inputs)  # warm-up
        return _cuda_seconds(backend.model, **inputs)


def _cuda_seconds(fn: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    """Wall seconds of ``fn(*args, **kwargs)``, with CUDA's queued work finished before and after."""
    import torch

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    sync()
    return time.perf_counter() - t0


def _run_options(pytest_args: Sequence[str]) -> dict[str, Any]:
    """The backend options a run of ``pytest_args`` would use (device, batch size, kernels, endpoint), as
    :class:`~pytest_posbias.run_options.RunOptions` keywords."""
    names = ("device", "batch_size", "attn_implementation", "device_map", "api_base", "concurrency", "vllm_command",
             "vllm_args", "vllm_timeout")
    keys = {"--posbias-" + k.replace("_", "-"): k for k in names}
    opts: dict[str, Any] = {}
    args = long_options(pytest_args)
    for (name, eq, val), following in zip((a.partition("=") for a in args), [*args[1:], ""], strict=False):
        if name in keys:
            v = val if eq else following
            opts[keys[name]] = int(v) if keys[name] in ("batch_size", "concurrency", "vllm_timeout") else v
    return opts
