"""The run context shared by the suites, and what happens when a run finishes.

The plugin creates one :class:`RunContext` per pytest process (the controller, or each
xdist worker); it owns the generation cache, the frame store, this process's run log and
the loaded backends. :func:`finish_run` runs on the controller at the end: it merges the
workers' logs into one run log (header first, deterministic order), appends the verdicts
with their Benjamini–Hochberg p-values, and renders the report from that log alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import SCHEMA_VERSION
from .config import PosbiasConfig
from .data.manifest import Manifest, load_manifest
from .engine import (
    Backend,
    Engine,
    GenerationCache,
    RunLog,
    gc_paused,
)
from .errors import ConfigError
from .gate_registry import GATES
from .measurement import DEFAULT_FLOOR, check_floor
from .models.registry import ResolvedModel, resolve
from .probes import conditions as C
from .probes.phase import PhaseResult, PhaseSpec, run_phase
from .probes.positional import PositionalResult, PositionalSpec, run_positional
from .probes.settings import settings_for
from .probes.stressor import PARTS as STRESSOR_PARTS
from .probes.stressor import StressorResult, StressorSpec, merge_parts, run_stressor
from .run_id import new_run_id
from .run_merge import merge_run_log_lines, merge_run_logs
from .safe_text import redact_args, redact_value
from .scoring.judges import JudgeSet
from .stats import Verdict, mean_verdict, rate_verdict
from .video.frames import FrameStore
from .video.stressors import STRESSORS


def environment() -> dict[str, Any]:
    """Versions, torch/CUDA/GPU (only when torch is already importable), platform, git commit."""
    import importlib.metadata as md

    def ver(name: str) -> str | None:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return None

    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {n: ver(n) for n in ("pytest-posbias", "pytest", "numpy", "scipy", "transformers", "torch",
                                         "torchvision", "openai", "sentence-transformers", "decord", "av", "jinja2", "matplotlib")},
    }
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        env["cuda"] = getattr(torch.version, "cuda", None)
        if torch.cuda.is_available():
            env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    try:
        env["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                           check=False).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["git_commit"] = None
    return env



def _requests_behind(result: Any) -> int:
    """How many model requests a probe result rests on (made, from the cache, or shared)."""
    calls = getattr(result, "calls", None)
    if not isinstance(calls, dict):
        return 0
    return (int(calls.get("made", 0)) + int(calls.get("cache_hits", 0)) + int(calls.get("rereads", 0))
            + int(calls.get("shared", 0)))


PROGRESS_AFTER_S = 2.0  # a probe's model calls get a progress line once they have run this long
PROGRESS_EVERY_S = 2.0  # and then at most one line this often (plus the last)
PROGRESS_LIVE_EVERY_S = 0.5  # on a terminal, where the line is redrawn in place, this often
SHARED_MEMO_PREFIXES = ("positional|", "phase|", "stressor|")  # probe results shared across xdist workers

class RunContext:
    """Models, engine, data, thresholds and seeds for one pytest process."""

    def __init__(self, options: Mapping[str, Any], pcfg: PosbiasConfig, *, rootdir: Path, worker: str,
                 run_id: str, invocation: Sequence[str] = (), quiet: bool = False,
                 progress: Callable[[str], None] | None = None) -> None:
        self.options = dict(options)
        self.pcfg = pcfg
        self.rootdir = rootdir
        self.worker = worker
        self.run_id = run_id
        self.quiet = quiet
        self._progress = progress
        self.seed = int(self.options.get("seed", 0))
        self.mode = str(self.options.get("mode", "detect"))
        self.alpha = float(self.options.get("alpha", 0.05))
        self.n_resamples = int(self.options.get("n_resamples", 9999))
        self.sequential = bool(self.options.get("sequential", True))
        self.floor = check_floor(self.options.get("measurement_floor", DEFAULT_FLOOR))
        self.paired_test = str(self.options.get("paired_test") or "bootstrap")
        if self.paired_test not in ("bootstrap", "permutation"):
            raise ConfigError(f"`paired_test` must be bootstrap or permutation; got {self.paired_test!r}")
        cache_dir = Path(self.options.get("cache", ".posbias"))
        self.cache_dir = cache_dir if cache_dir.is_absolute() else rootdir / cache_dir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.models: list[str] = list(self.options.get("models") or ["sim:unbiased"])
        self.baseline: str | None = self.options.get("baseline")
        self.parity: str | None = self.options.get("parity")  # the parity gates' reference deployment
        self.resolved: dict[str, ResolvedModel] = {m: resolve(m, locate=not self.options.get("plan"))
                                                   for m in dict.fromkeys([*self.models,
                                                                           *([self.baseline] if self.baseline else []),
                                                                           *([self.parity] if self.parity else [])])}
        # an unusable video (empty, not a video, truncated, too short) is logged as a data problem when found
        self.store = FrameStore(disk_dir=self.cache_dir / "frames",
                                on_problem=lambda p: self.observe("data", {"type": "problem", "problem": p.to_dict()}))
        self.cache = GenerationCache(self.cache_dir / "generations.sqlite",
                                     read_only=self.options.get("cache_mode") == "read-only")
        self.run_dir = self.cache_dir / "runs" / run_id
        header = {
            "run_id": run_id,
            "worker": worker,
            "started": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "models": self.models,
            "baseline": self.baseline,
            "parity": self.parity,
            "seed": self.seed,
            "mode": self.mode,
            "alpha": self.alpha,
            "judge": self.options.get("judge"),
            # credentials inside URLs (--api-base user-info, ?api-key=) never reach the log
            "config": redact_value({k: v for k, v in self.options.items() if k not in ("threshold_overrides",)}),
            "thresholds": {m: self.thresholds(m) for m in self.models},
            "command": ["pytest", *redact_args(invocation)],
            "environment": environment(),
        }
        self.runlog = RunLog(self.run_dir / f"log-{worker}.jsonl", header)
        self._backends: dict[str, Backend] = {}
        self._backend_lock = threading.Lock()
        self._memo: dict[str, Any] = {}
        self._memo_lock = threading.Lock()
        self._memo_holding = False
        self.memo_from_workers = 0  # probe results this worker read from another worker (xdist)
        self._last_progress = 0.0
        self.engine = Engine(self.cache, backend_for=self.backend, runlog=self.runlog,
                             batch_size=self.options.get("batch_size"), progress=self._on_progress)
        self.cache.on_unstored = self._unstored

    def _unstored(self, n: int, reason: str) -> None:
        """Count answers the cache could not store (the summary shows them) and say the first reason."""
        with self.engine._lock:
            first = self.engine.stats.unstored == 0
            self.engine.stats.unstored += n
        if first:
            self.note(f"answers are not stored: {reason}; they are counted and the next run makes them again")

    @classmethod
    def create(cls, options: Mapping[str, Any], pcfg: PosbiasConfig, *, rootdir: Path, worker: str, run_id: str,
               invocation: Sequence[str] = (), quiet: bool = False,
               progress: Callable[[str], None] | None = None) -> RunContext:
        """A run context for one pytest process (the serial run, an xdist worker) or the CLI."""
        return cls(options, pcfg, rootdir=rootdir, worker=worker, run_id=run_id, invocation=invocation, quiet=quiet,
                   progress=progress)

    # -- backends
    def backend(self, spec: str) -> Backend:
        with self._backend_lock:
            if spec not in self._backends:
                r = self.resolved.get(spec) or resolve(spec)
                b: Backend
                extra: dict[str, Any] = {}
                if self.options.get("plan"):  # posbias plan: record the requests, call no model
                    from .plan import PlanBackend

                    b = PlanBackend(r, self.store, str(self.options["plan"]), worker=self.worker,
                                    output_lengths=self.options.get("plan_output_lengths"))
                elif r.backend == "sim":
                    from .models.sim import SimBackend

                    b = SimBackend(r.target, self.store)
                elif r.backend == "openai":
                    from .models.openai_backend import make_backend

                    ob = make_backend(r, self.store, self.options, notify=self.note)
                    try:  # fail at start, naming the URL and the server's message
                        extra["check"] = ob.check()
                    except BaseException:
                        ob.close()
                        raise
                    b = ob
                elif r.backend == "vllm":  # served with vLLM for the run (or by the xdist controller)
                    from .models.vllm_managed import make_backend as make_vllm_backend

                    vb = make_vllm_backend(r, self.store, self.options, log_dir=self.run_dir, notify=self.note)
                    try:
                        extra["check"] = vb.check()
                        extra["vllm_urls"] = vb.url
                    except BaseException:
                        vb.close()
                        raise
                    b = vb
                else:
                    from .models.hf import HFBackend

                    hb = HFBackend(r, self.store, device=str(self.options.get("device", "auto")), worker=self.worker,
                                   batch_size=int(self.options.get("batch_size") or 4),
                                   attn_implementation=str(self.options.get("attn_implementation") or "auto"),
                                   device_map=str(self.options.get("device_map") or "fit"))
                    extra["placement"] = hb.placement_info
                    b = hb
                self._backends[spec] = b
                self.runlog.write({"kind": "model", "spec": spec, "identity": dict(b.identity()), **extra})
            return self._backends[spec]

    def judge_model(self) -> str | None:
        """The model spec of an LLM judge (``--judge openai[:MODEL]``), or None for offline judges."""
        if not str(self.options.get("judge") or "").startswith("openai"):
            return None
        from .models.openai_backend import judge_spec

        return judge_spec(self.options.get("judge"))

    def load_models(self) -> None:
        """Load every model (and an LLM judge) now so a failure stops the run before any probe (not
        midway): endpoints are checked here (raises ModelLoadError naming the URL and the cause)."""
        judge = self.judge_model()
        for spec in [*self.resolved, *([judge] if judge and judge not in self.resolved else [])]:
            self.backend(spec)

    # -- progress
    def _on_progress(self, done: int, total: int, hits: int, elapsed: float) -> None:
        if self._progress is None or total == 0:
            return
        if elapsed < PROGRESS_AFTER_S:  # a short batch prints nothing: lines only where a wait needs explaining
            return
        live = bool(getattr(self._progress, "live", False))  # one line redrawn in place on a terminal
        now = time.monotonic()
        if done < total and now - self._last_progress < (PROGRESS_LIVE_EVERY_S if live else PROGRESS_EVERY_S):
            return
        self._last_progress = now
        from .summary import progress_text

        if live:  # the plugin's terminal writer (plugin._progress_writer) takes the bar's keywords
            redraw: Any = self._progress
            redraw(progress_text(done, total, hits, elapsed, bar=True), transient=True, final=done >= total)
        else:
            self._progress(progress_text(done, total, hits, elapsed))

    def note(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    # -- thresholds, seeds, memo
    def thresholds(self, model: str) -> dict[str, float]:
        return self.pcfg.thresholds_for(model, self.options.get("threshold_overrides"))

    def threshold(self, gate: str, model: str) -> float:
        return self.thresholds(model)[gate]

    def probe_settings(self, name: str) -> dict[str, Any]:
        return settings_for(name, self.pcfg.probes.get(name))

    def rng(self, *keys: Any) -> np.random.Generator:
        """A generator seeded by the run seed and ``keys`` (never the global one)."""
        h = hashlib.sha256(json.dumps([self.seed, *map(str, keys)]).encode()).digest()
        return np.random.default_rng(int.from_bytes(h[:8], "little"))

    def memo(self, key: str, fn: Callable[[], Any]) -> Any:
        """Compute once per run: probes shared by several tests (DPB and MEG of one config).

        In one process the result is kept in memory. Under pytest-xdist a probe result
        (keys ``positional|``, ``phase|``, ``stressor|``) is also shared across workers: the
        first worker to need it computes it holding a file lock keyed on the memo key under the
        run directory and leaves it there (pickled); a worker that needs it meanwhile waits on
        the lock and reads it, making no model call (:meth:`_across_workers`)."""
        with self._memo_lock:
            if key in self._memo:
                # the decision rests on these requests too: count them as shared, not as new calls
                self.engine.stats.shared += _requests_behind(self._memo[key])
                return self._memo[key]
        if self.worker != "main" and key.startswith(SHARED_MEMO_PREFIXES) and not self._memo_holding:
            value = self._across_workers(key, fn)
        else:
            value = fn()
        with self._memo_lock:
            return self._memo.setdefault(key, value)

    def _across_workers(self, key: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` computed once across the run's xdist workers: under an exclusive ``fcntl`` lock
        on ``<run dir>/memo/<sha256(key)>.lock``, read the result another worker stored there
        (counted as ``shared`` requests, like an in-process memo hit), or compute it and store it
        (written to a temporary file, then renamed). A result that cannot be stored is simply
        recomputed by the next worker (its requests then come from the generation cache)."""
        import pickle

        folder = self.run_dir / "memo"
        folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        stored = folder / f"{name}.pkl"
        with (folder / f"{name}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when a killed worker exits
            try:
                if stored.is_file():
                    try:
                        value = pickle.loads(stored.read_bytes())
                    except Exception:  # a truncated or foreign file: compute it here instead
                        value = None
                    if value is not None:
                        self.engine.stats.shared += _requests_behind(value)
                        self.memo_from_workers += 1
                        return value
                self._memo_holding = True  # a probe that needs another probe computes that one itself (no lock order)
                try:
                    value = fn()
                finally:
                    self._memo_holding = False
                tmp = folder / f"{name}.{self.worker}.tmp"
                try:
                    tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                    tmp.replace(stored)
                except (pickle.PicklingError, TypeError, AttributeError, OSError):
                    tmp.unlink(missing_ok=True)
                return value
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def calls(self) -> dict[str, Any]:
        return self.engine.stats.snapshot()

    # -- data, judges, probes (each computed once per process and shared by the tests)
    def manifest(self) -> Manifest:
        return self.memo("manifest", self._load_manifest)

    def _load_manifest(self) -> Manifest:
        data = self.options.get("data")
        path = Path(data) if data else synthetic_manifest(self.rootdir, progress=self.note)
        m = load_manifest(path)
        for problem in m.problems:
            self.note(f"manifest: {problem} (skipped)")
        self.observe("data", {"type": "manifest", "path": str(path), "videos": len(m.videos), "groups": len(m.groups),
                              "mcq": len(m.mcq), "problems": [p.to_dict() for p in m.problems]})
        return m

    def judges(self) -> JudgeSet:
        return self.memo("judges", self._judge_set)

    def _judge_set(self) -> JudgeSet:
        """The run's judges; the embed judge's sentence embeddings are kept in the cache folder's
        SQLite file (:mod:`.scoring.embed_cache`), and so are the fragment judge's coverage values,
        so a re-run loads neither the embedding model nor spaCy."""
        from .scoring.embed_cache import (
            EmbeddingCache,
            embed_judge_identity,
            fragment_judge_identity,
        )
        from .scoring.judges import Embedder, FragmentJudge

        ro = self.options.get("cache_mode") == "read-only"
        store = EmbeddingCache(self.cache.path, judge=embed_judge_identity(), read_only=ro)
        frag_id = fragment_judge_identity()
        scores = EmbeddingCache(self.cache.path, judge=frag_id, read_only=ro, dim=1, dtype="float64", table="judge_scores")
        self._judge_stores = (store, scores)
        return JudgeSet(str(self.options.get("judge") or "auto"), engine=self.engine,
                        embedder=Embedder(store=store, notify=self.note),
                        fragment=FragmentJudge(store=scores, tokenizer=frag_id.split("|")[1].split("==")[0]))

    def phase_spec(self) -> PhaseSpec:
        return PhaseSpec.from_settings(self.probe_settings("phase"))

    def phase(self, model: str, gate: str, budget: int | None = None, n: int | None = None) -> PhaseResult:
        """The phase/order probe with exactly the conditions a gate needs (shared requests are cached):
        order: phase 0 in every ordering; phase: every phase in every ordering plus the re-run of
        phase 0; parity: phase 0 in every ordering plus its re-run (the reference's floor); flip: every sampler at a budget; fusion: the S phases, their origin-shifted grids
        and the union passes, identity ordering only; equivalence: the S phases and one left-sampler
        pass at 4b frames, identity ordering only."""
        spec = self.phase_spec()
        S = spec.phases
        b = budget or spec.budget
        conds: list[str] = []
        ident: list[str] = []
        rerun = False
        if gate == "order":
            conds = [C.phase(0)]
        elif gate == "parity":
            conds, rerun = [C.phase(0)], True
        elif gate == "phase":
            conds, rerun = C.phases(S), True
        elif gate == "flip":
            conds = [C.sampler_at(s, b, spec.budget) for s in spec.samplers]
        elif gate == "fusion":
            ident = C.fusion_conditions(S)
        elif gate == "equivalence":
            ident = C.equivalence_conditions(S, b)
        else:
            raise ConfigError(f"`gate` must be order, parity, phase, flip, fusion or equivalence; got {gate!r}")
        if gate == "equivalence":  # a confirmatory TOST needs far more items than a flip rate
            spec = dataclasses.replace(spec, items=int(self.probe_settings("phase")["equivalence_items"]))
        n = min(n or spec.items, spec.items)
        key = f"phase|{model}|{spec.key()}|{gate}|{b}|{n}"
        return self.memo(key, lambda: run_phase(self, model, spec, self.manifest(), conditions=conds, identity=ident,
                                                rerun=rerun, n_items=n))

    def stressor_spec(self, frames: int) -> StressorSpec:
        return StressorSpec.from_settings(self.probe_settings("stressor"), frames)

    def stressor(self, model: str, frames: int, n: int | None = None, part: str | None = None) -> StressorResult:
        """The stressor probe at ``frames`` on the first ``n`` videos, in parts (:data:`.probes.stressor.PARTS`):
        ``part`` "clean" (the clean outputs), "controls", or a stressor's name (its variants, with the
        clean outputs); None: every part, joined. The clean outputs of every video are one part
        computed first and once (under ``-n``, by whichever worker needs them first; the others read
        them), and each other part reads them, so the parts share no request and the scheduler can
        send each to its own worker (:func:`.suite_support.probe_group`)."""
        spec = self.stressor_spec(frames)
        n = min(n or spec.videos, spec.videos)
        if part is not None and part not in STRESSOR_PARTS:
            raise ConfigError(f"`part` must be one of {', '.join(STRESSOR_PARTS)}; got {part!r}")
        base = f"stressor|{model}|{spec.key()}"
        clean = self.memo(f"{base}|clean", lambda: run_stressor(self, model, spec, self.manifest(), stressors=(),
                                                                controls=False, part="clean"))

        def one(p: str) -> StressorResult:
            return self.memo(f"{base}|{n}|{p}", lambda: run_stressor(
                self, model, spec, self.manifest(), stressors=(p,) if p in STRESSORS else (), controls=p == "controls",
                n_videos=n, clean=clean, part=p))

        if part is not None:
            return one(part)
        return merge_parts([one(p) for p in STRESSOR_PARTS])

    def stressor_clean(self, model: str, frames: int) -> StressorResult:
        """The clean descriptions of the stressor probe's videos only (no stressed variants, no
        controls): what the parity repetition gate compares. Its requests are the stressor probe's
        clean requests: the probe's clean part (:meth:`stressor`), computed once for both."""
        return self.stressor(model, frames, part="clean")

    def positional(self, model: str, spec: PositionalSpec, n: int | None = None) -> PositionalResult:
        n = min(n or spec.groups, spec.groups)
        return self.memo(f"positional|{model}|{spec.key()}|{n}",
                         lambda: run_positional(self, model, spec, self.manifest(), self.judges(), n_groups=n))

    # -- verdicts
    def mean_gate(self, gate: str, model: str, values: Any, clusters: Any, *, name: str, unit: str,
                  method: str | None = None, extra: Mapping[str, Any] | None = None,
                  lattice_step: float | None = None) -> Verdict:
        """A mean gate: cluster bootstrap of the mean of ``values`` (the gate's registered interval
        method unless ``method`` is given; ``skew-t`` with ``lattice_step`` for the positional MEG
        gates, ``t`` for DPB) against the gate's threshold and side (docs/design.md section 5)."""
        spec = GATES[gate]
        return mean_verdict(values, clusters, name=name, threshold=self.threshold(gate, model), sides=spec.side,
                            mode=self.mode, alpha=self.alpha, unit=unit, n_resamples=self.n_resamples,
                            method=method or spec.bootstrap, lattice_step=lattice_step,
                            rng=self.rng("bootstrap", gate, name, model), extra={"gate": gate, "model": model, **(extra or {})})

    def rate_gate(self, gate: str, model: str, k: int, n: int, *, name: str, unit: str,
                  extra: Mapping[str, Any] | None = None) -> Verdict:
        return rate_verdict(k, n, name=name, threshold=self.threshold(gate, model), mode=self.mode, alpha=self.alpha,
                            unit=unit, extra={"gate": gate, "model": model, **(extra or {})})

    def baseline_gate(self, gate: str, model: str, cand: Any, base: Any, clusters: Any, *, name: str, unit: str,
                      worse: str, extra: Mapping[str, Any] | None = None) -> Verdict:
        """Paired non-inferiority against ``--baseline`` on the same instances; compliant when the
        candidate is worse by at most the gate's margin.

        * ``worse='abs'`` (DPB, MEG): Δ = |mean cand| − |mean base|, intersection–union bounds
          over groups (:func:`~.paired.paired_abs_mean_verdict`);
        * ``worse='binary'`` (flip, phase, order, fusion, repetition): Δ = rate cand − rate base,
          an exact unconditional non-inferiority test for paired proportions at the margin
          (exact McNemar at margin 0; :func:`~.stats.paired_change_verdict`);
        * ``worse='amplification'`` (stressor): ``cand``/``base`` are (n, 2) arrays of (stressed
          repetition share, clean repetition flag) per video; a t bound of the share difference
          plus an exact paired bound of the clean flags (:func:`~.paired.paired_amplification_verdict`),
          whatever ``paired_test`` says;
        * ``worse='higher'``/``'lower'`` (means): d_i = cand_i − base_i (or its negative),
          cluster bootstrap of mean d, or the sign-flip permutation test with ``paired_test =
          "permutation"`` (:func:`~.paired.paired_permutation_verdict`: inconclusive at a non-zero
          margin, where sign flips do not hold their size on skewed differences).
        """
        from .paired import paired_abs_mean_verdict
        from .stats import paired_change_verdict

        c = np.asarray(cand, dtype=float)
        b = np.asarray(base, dtype=float)
        margin = self.pcfg.margins()[gate]
        ex = {"gate": gate, "model": model, "baseline": self.baseline, "comparison": "non-inferiority",
              "margin": margin, **(extra or {})}
        if worse == "abs":
            return paired_abs_mean_verdict(c, b, clusters, name=f"{name} vs baseline", margin=margin, mode=self.mode,
                                           alpha=self.alpha, unit=unit, extra=ex)
        if worse == "binary":
            return paired_change_verdict(c.astype(int), b.astype(int), name=f"{name} vs baseline", threshold=margin,
                                         mode=self.mode, alpha=self.alpha, unit=unit, extra=ex)
        if worse == "amplification":
            from .paired import paired_amplification_verdict

            return paired_amplification_verdict(c[:, 0], c[:, 1], b[:, 0], b[:, 1], name=f"{name} vs baseline",
                                                margin=margin, mode=self.mode, alpha=self.alpha, unit=unit, extra=ex)
        if worse == "higher":
            d = c - b
        elif worse == "lower":
            d = b - c
        else:
            raise ConfigError(f"`worse` must be abs, binary, amplification, higher or lower; got {worse!r}")
        if self.paired_test == "permutation":
            from .paired import paired_permutation_verdict

            return paired_permutation_verdict(d, clusters, name=f"{name} vs baseline", threshold=margin, sides="upper",
                                              mode=self.mode, alpha=self.alpha, unit=unit, seed=self.seed, extra=ex)
        return mean_verdict(d, clusters, name=f"{name} vs baseline", threshold=margin, sides="upper", mode=self.mode,
                            alpha=self.alpha, unit=unit, n_resamples=self.n_resamples,
                            rng=self.rng("baseline", gate, name, model), extra=ex)

    def observe(self, probe: str, data: Mapping[str, Any]) -> None:
        """Append a probe observation (per-instance values, figures' data) to the run log."""
        self.runlog.write({"kind": "observation", "probe": probe, "worker": self.worker, **data})

    def close(self) -> None:
        for b in self._backends.values():
            with contextlib.suppress(Exception):
                b.close()
        self.runlog.close()
        for store in getattr(self, "_judge_stores", ()):
            store.close()
        self.cache.close()


# --------------------------------------------------------------------------- data


def synthetic_manifest(rootdir: Path, *, progress: Callable[[str], None] | None = None) -> Path:
    """The default synthetic set, built on first use (a file lock serialises xdist workers)."""
    from .video.synthetic import build_set, default_set_dir

    out = default_set_dir(rootdir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.jsonl"
    with (out / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if progress:
                progress(f"checking the synthetic set in {out} (built once, then reused)")
            build_set(out, progress=progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return manifest


# --------------------------------------------------------------------------- finish


@gc_paused()  # the whole end of the run: see the docstring
def finish_run(
    *,
    config_rootdir: Path,
    options: Mapping[str, Any],
    verdict_rows: Sequence[Mapping[str, Any]],
    calls: Mapping[str, Any],
    run_id: str | None,
    terminal: Any = None,
    exitstatus: int | None = None,
    errored: Sequence[Mapping[str, Any]] = (),
    run_decision: Mapping[str, Any] | None = None,
) -> Path | None:
    """Merge the workers' logs into ``run.jsonl`` (+ verdicts), remove the workers' logs (the
    merged log is the run's one copy), remove the run folders beyond ``options['keep_runs']``
    (:func:`.retention.prune_runs`; never this run's) and render the report.

    Returns the run log path, or None when no run context was created in this run.
    ``run_decision``: the run-level decision (:mod:`.decision`), kept in the header; each verdict
    record carries its gate's part of it (``row["gate"]``).

    The cyclic garbage collector is off until it returns: the merged log's records (tens of
    thousands of acyclic dicts, freed by reference counting) are young objects, and the report's
    matplotlib figures, allocating many small objects, set off collections that walked all of them
    (about 2 s of a 6 s render on the main job). The figures' own cycles wait for the next collection.
    """
    cache_dir = Path(options.get("cache", ".posbias"))
    cache_dir = cache_dir if cache_dir.is_absolute() else config_rootdir / cache_dir
    if run_id is None:
        return None
    run_dir = cache_dir / "runs" / run_id
    import shutil

    shutil.rmtree(run_dir / "memo", ignore_errors=True)  # probe results the workers shared (see RunContext.memo)
    if not run_dir.is_dir() or not any(run_dir.glob("log-*.jsonl")):
        for empty in (run_dir, run_dir.parent, cache_dir):  # no suite test set the run up: leave no
            with contextlib.suppress(OSError):               # empty folder behind
                empty.rmdir()
        if run_decision is None or run_decision.get("n_gates") or not run_decision.get("skipped"):
            return None
        # gate tests were selected and every one skipped: no decision, and the report says so
        header: dict[str, Any] = {"run_id": run_id, "models": list(options.get("models") or []), "mode": options.get("mode"),
                  "alpha": options.get("alpha"), "seed": options.get("seed"), "config": {}}
        header["started"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        pairs: list[tuple[dict[str, Any], str | None]] = []
    else:
        header, pairs = merge_run_log_lines(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    header["finished"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    header["calls"] = dict(calls)
    if exitstatus is not None:
        header["exitstatus"] = int(exitstatus)  # the report says when a run did not finish (errors, usage, interrupt)
    header["errored_tests"] = [redact_value(dict(e)) for e in errored]
    if run_decision is not None:
        header["run_decision"] = dict(run_decision)
    path = run_dir / "run.jsonl"
    tmp = path.with_name(f"run.jsonl.{os.getpid()}.tmp")  # unique per process, then an atomic rename
    head_line = json.dumps({**header, "kind": "header", "schema_version": SCHEMA_VERSION}, sort_keys=True)
    verdict_lines = [json.dumps({"kind": "verdict", "nodeid": row["nodeid"], "p_bh": row["p_bh"],
                                 **row["verdict"].to_dict(), **(row["gate"].to_dict() if row.get("gate") else {})},
                                sort_keys=True) for row in verdict_rows]
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(head_line + "\n")
        for r, line in pairs:
            fh.write((line if line is not None else json.dumps(r, sort_keys=True)) + "\n")
        for line in verdict_lines:
            fh.write(line + "\n")
    tmp.replace(path)
    # one copy of the run's log: the workers' logs are in run.jsonl now (an interrupted run that
    # never got here keeps them, and `posbias report` / the history read them there)
    for worker_log in run_dir.glob("log-*.jsonl"):
        with contextlib.suppress(OSError):
            worker_log.unlink()
    # The report reads what was just written; the records are already parsed JSON, so they are
    # handed over instead of parsed a second time (header and verdicts go through their lines).
    loaded = (json.loads(head_line), [r for r, _ in pairs] + [json.loads(line) for line in verdict_lines])
    del pairs
    if terminal is not None:
        terminal.write_line(f"[posbias] run log: {path}")
    if options.get("keep_runs"):  # [tool.posbias] keep_runs: the older run folders go (never this run's)
        from .retention import prune_runs

        pruned = prune_runs(cache_dir, keep_runs=int(options["keep_runs"]), keep=[run_id])
        if terminal is not None and pruned.removed:
            terminal.write_line(f"[posbias] keep_runs = {options['keep_runs']}: {pruned.line()}")
    try:
        from .report.render import write_reports
    except ImportError:
        return path
    try:
        written = write_reports([path], rootdir=config_rootdir, explicit=options.get("report"),
                                report_dir=options.get("report_dir", "reports"), loaded={path: loaded})
    except Exception as exc:
        if terminal is not None:
            terminal.write_line(f"[posbias] report not written ({type(exc).__name__}: {exc}); "
                                f"re-render with: posbias report {path} -o report.html", red=True)
        return path
    if terminal is not None:
        for w in written:
            terminal.write_line(f"[posbias] report: {w}")
    return path


__all__ = ["RunContext", "finish_run", "merge_run_log_lines", "merge_run_logs", "new_run_id", "synthetic_manifest"]
