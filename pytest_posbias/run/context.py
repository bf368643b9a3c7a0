"""The run context: what one pytest process (the controller, or each xdist worker) knows of the
run, and what the suites' tests ask of it.

:class:`RunContext` owns the run's options and thresholds, the generation cache, the frame
store, this process's run log, the loaded backends (:mod:`.backend_factory`), the engine, the
in-process memo of probe results, the manifest and the judges. Its probe entry points (:meth:`~RunContext.positional`,
:meth:`~RunContext.phase`, :meth:`~RunContext.stressor`) run each probe once; its verdict builders
(:mod:`.gates.verdict_builders`) apply a gate's threshold and side. It implements the
:class:`~.gate_context.GateContext` and :class:`~.gate_context.ProbeContext` protocols.
:func:`.run.finish.finish_run` ends the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from ..config import PosbiasConfig
from ..data.manifest import Manifest, load_manifest
from ..engine import Backend, Engine, GenerationCache, RunLog
from ..errors import ConfigError
from ..gates import verdict_builders
from ..gates.measurement import check_floor
from ..models.plan import CURRENT_FAMILY, CURRENT_TEST, record_read
from ..models.registry import ResolvedModel, resolve
from ..probes import conditions as C
from ..probes.phase import PhaseResult, PhaseSpec, run_phase
from ..probes.positional import PositionalResult, PositionalSpec, run_positional
from ..probes.search import item_seed
from ..probes.settings import settings_for
from ..probes.stressor import PARTS as STRESSOR_PARTS
from ..probes.stressor import StressorResult, StressorSpec, merge_parts, run_stressor
from ..run_options import RunOptions, options_record
from ..safe_text import redact_args, redact_value
from ..scoring.judges import Embedder, FragmentJudge, JudgeSet
from ..stats import Verdict
from ..video.frames import FrameStore
from ..video.stressors import STRESSORS
from .backend_factory import load_backend


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
                                         "torchvision", "openai", "sentence-transformers", "decord", "av", "jinja2",
                                         "matplotlib")},
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
    return sum(int(calls.get(k, 0)) for k in ("made", "cache_hits", "rereads", "shared"))


PROGRESS_AFTER_S = 2.0  # a probe's model calls get a progress line once they have run this long
PROGRESS_EVERY_S = 2.0  # and then at most one line this often (plus the last)
PROGRESS_LIVE_EVERY_S = 0.5  # on a terminal, where the line is redrawn in place, this often
T = TypeVar("T")  # the type of a memoised result


class RunContext:
    """Models, engine, data, thresholds and seeds for one pytest process (module docstring)."""

    def __init__(self, options: RunOptions, pcfg: PosbiasConfig, *, rootdir: Path, worker: str,
                 run_id: str, invocation: Sequence[str] = (), quiet: bool = False,
                 progress: Callable[[str], None] | None = None) -> None:
        self.options = options
        self.pcfg = pcfg
        self.rootdir = rootdir
        self.worker = worker
        self.run_id = run_id
        self.quiet = quiet
        self._progress = progress
        self.seed = options.seed
        self.mode = options.mode
        self.alpha = float(options.alpha)
        self.n_resamples = options.n_resamples
        self.sequential = options.sequential
        self.floor = check_floor(options.measurement_floor)
        self.paired_test = options.paired_test
        if self.paired_test not in ("bootstrap", "permutation"):
            raise ConfigError(f"`paired_test` must be bootstrap or permutation; got {self.paired_test!r}")
        self.cache_dir = Path(rootdir) / options.cache  # an absolute cache path replaces rootdir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.models: list[str] = list(options.models or ["sim:unbiased"])
        self.baseline = options.baseline
        self.parity = options.parity  # the parity gates' reference deployment
        self.resolved: dict[str, ResolvedModel] = {m: resolve(m, locate=not options.plan)
                                                   for m in dict.fromkeys([*self.models, *options.specs])}
        # an unusable video (empty, not a video, truncated, too short) is logged as a data problem when found
        self.store = FrameStore(disk_dir=self.cache_dir / "frames",
                                on_problem=lambda p: self.observe("data", {"type": "problem", "problem": p.to_dict()}))
        self.cache = GenerationCache(self.cache_dir / "generations.sqlite",
                                     read_only=options.cache_mode == "read-only", run_id=run_id)
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
            "judge": options.judge,
            # credentials inside URLs (--api-base user-info, ?api-key=) never reach the log
            "config": redact_value(options_record(options)),
            "thresholds": {m: self.thresholds(m) for m in self.models},
            "command": ["pytest", *redact_args(invocation)],
            "environment": environment(),
        }
        self.runlog = RunLog(self.run_dir / f"log-{worker}.jsonl", header)
        self._backends: dict[str, Backend] = {}
        self._backend_lock = threading.Lock()
        self._memo: dict[str, Any] = {}
        self._memo_owner: dict[str, str] = {}  # memo key -> the suite test that computed it ("" outside one)
        self._shared_seen: dict[tuple[str, str], int] = {}  # (test, memo family) -> shared requests counted
        self._memo_lock = threading.Lock()
        self._last_progress = 0.0
        plan = options.plan
        self.engine = Engine(self.cache, backend_for=self.backend, runlog=self.runlog,
                             batch_size=options.batch_size, progress=self._on_progress,
                             on_keys=None if plan is None else lambda keys: record_read(
                                 plan, worker=self.worker, test=CURRENT_TEST.get(), keys=keys))
        self.cache.on_unstored = self._unstored

    def _unstored(self, n: int, reason: str) -> None:
        """Count answers the cache could not store (the summary shows them) and say the first reason."""
        with self.engine._lock:
            first = self.engine.stats.unstored == 0
            self.engine.stats.unstored += n
        if first:
            self.note(f"answers are not stored: {reason}; they are counted and the next run makes them again")

    @classmethod
    def create(cls, options: RunOptions, pcfg: PosbiasConfig, *, rootdir: Path, worker: str, run_id: str,
               invocation: Sequence[str] = (), quiet: bool = False,
               progress: Callable[[str], None] | None = None) -> RunContext:
        """A run context for one pytest process (the serial run, an xdist worker) or the CLI."""
        return cls(options, pcfg, rootdir=rootdir, worker=worker, run_id=run_id, invocation=invocation, quiet=quiet,
                   progress=progress)

    # -- backends
    def backend(self, spec: str) -> Backend:
        """The loaded backend for a model spec, loaded once per process (:mod:`.run.backend_factory`);
        its identity goes to the run log's ``model`` record."""
        with self._backend_lock:
            if spec not in self._backends:
                b, extra = load_backend(self.resolved.get(spec) or resolve(spec), options=self.options,
                                        store=self.store, worker=self.worker, run_dir=self.run_dir, notify=self.note)
                self._backends[spec] = b
                self.runlog.write({"kind": "model", "spec": spec, "identity": dict(b.identity()), **extra})
            return self._backends[spec]

    def load_models(self) -> None:
        """Load every model (and an LLM judge, ``--judge openai[:MODEL]``) now so a failure stops the run
        before any probe (not midway): endpoints are checked here (raises ModelLoadError naming the URL
        and the cause)."""
        judge = None
        if self.options.judge.startswith("openai"):
            from ..models.openai_backend import judge_spec

            judge = judge_spec(self.options.judge)
        for spec in dict.fromkeys([*self.resolved, *([judge] if judge else [])]):
            self.backend(spec)

    # -- progress
    def _on_progress(self, done: int, total: int, hits: int, elapsed: float) -> None:
        if self._progress is None or total == 0 or elapsed < PROGRESS_AFTER_S:  # a short batch prints nothing
            return
        live = bool(getattr(self._progress, "live", False))  # one line redrawn in place on a terminal
        now = time.monotonic()
        if done < total and now - self._last_progress < (PROGRESS_LIVE_EVERY_S if live else PROGRESS_EVERY_S):
            return
        self._last_progress = now
        from ..report.summary import progress_text

        if live:  # the plugin's terminal writer (plugin.progress_writer) takes the bar's keywords
            redraw: Any = self._progress
            redraw(progress_text(done, total, hits, elapsed, bar=True), transient=True, final=done >= total)
        else:
            self._progress(progress_text(done, total, hits, elapsed))

    def note(self, message: str) -> None:
        """Print a line through the progress writer (nothing when there is none)."""
        if self._progress is not None:
            self._progress(message)

    # -- thresholds, seeds, memo
    def thresholds(self, model: str) -> dict[str, float]:
        """Every gate's effective threshold for ``model`` (defaults, ``[tool.posbias]`` tables, the
        command line's overrides)."""
        return self.pcfg.thresholds_for(model, self.options.threshold_overrides)

    def threshold(self, gate: str, model: str) -> float:
        """The gate's effective threshold for ``model``."""
        return self.thresholds(model)[gate]

    def probe_settings(self, name: str) -> dict[str, Any]:
        """The probe's settings: its defaults with ``[tool.posbias.probes.<name>]`` applied."""
        return settings_for(name, self.pcfg.probes.get(name))

    def rng(self, *keys: Any) -> np.random.Generator:
        """A generator seeded by the run seed and ``keys`` (never the global one)."""
        return np.random.default_rng(item_seed(self.seed, *keys))

    def memo(self, key: str, fn: Callable[[], T], *, family: str | None = None) -> T:
        """Compute once per process (in memory): probes shared by several tests. Under ``-n`` each
        worker keeps its own; :mod:`.plugin.xdist_scheduler` sends the tests sharing a probe to one worker.
        A result another test computed counts its requests as shared (the decision rests on them too,
        and they are no new calls), once per test and ``family`` (the key without its sample size: a
        sequential design's looks are nested samples of one probe, so the largest look read counts); a
        test reading again what it computed itself counts nothing."""
        test = CURRENT_TEST.get()
        if self.options.plan:  # the plan sizes a probe result's requests by the furthest look its readers reach
            record_read(self.options.plan, worker=self.worker, test=test, family=family or key)
        with self._memo_lock:
            if key in self._memo:
                if not test or self._memo_owner.get(key) != test:
                    behind = _requests_behind(self._memo[key])
                    seen = (test, family or key)
                    self.engine.stats.shared += max(0, behind - self._shared_seen.get(seen, 0))
                    self._shared_seen[seen] = max(behind, self._shared_seen.get(seen, 0))
                return self._memo[key]
        token = CURRENT_FAMILY.set(family or key)  # the requests it makes belong to this result (plan mode)
        try:
            value = fn()
        finally:
            CURRENT_FAMILY.reset(token)
        with self._memo_lock:
            self._memo_owner.setdefault(key, test)
            return self._memo.setdefault(key, value)

    def calls(self) -> dict[str, Any]:
        """This process's engine counters (:class:`~.engine.CallStats`) as a dict."""
        return self.engine.stats.snapshot()

    # -- data, judges, probes (each computed once per process and shared by the tests)
    def manifest(self) -> Manifest:
        """The run's data (``--posbias-data``, else the synthetic set, built on first use), loaded once."""
        return self.memo("manifest", self._load_manifest)

    def _load_manifest(self) -> Manifest:
        data = self.options.data
        path = Path(data) if data else synthetic_manifest(self.rootdir, progress=self.note)
        m = load_manifest(path)
        for problem in m.problems:
            self.note(f"manifest: {problem} (skipped)")
        self.observe("data", {"type": "manifest", "path": str(path), "videos": len(m.videos), "groups": len(m.groups),
                              "mcq": len(m.mcq), "problems": [p.to_dict() for p in m.problems]})
        return m

    def judges(self) -> JudgeSet:
        """The run's judges, built once."""
        return self.memo("judges", self._judge_set)

    def _judge_set(self) -> JudgeSet:
        """The run's judges, their embeddings and coverage values kept in the cache folder's SQLite
        file (:mod:`.scoring.embed_cache`): a re-run loads neither the embedding model nor spaCy."""
        from ..scoring.embed_cache import EmbeddingCache, embed_judge_identity, fragment_judge_identity

        ro = self.options.cache_mode == "read-only"
        store = EmbeddingCache(self.cache.path, judge=embed_judge_identity(), read_only=ro)
        frag_id = fragment_judge_identity()
        scores = EmbeddingCache(self.cache.path, judge=frag_id, read_only=ro, dim=1, dtype="float64",
                                table="judge_scores")
        self._judge_stores = (store, scores)
        return JudgeSet(self.options.judge, engine=self.engine,
                        embedder=Embedder(store=store, notify=self.note),
                        fragment=FragmentJudge(store=scores, tokenizer=frag_id.split("|")[1].split("==")[0]))

    def phase_spec(self) -> PhaseSpec:
        """The phase probe's spec from the run's settings."""
        return PhaseSpec.from_settings(self.probe_settings("phase"))

    def phase(self, model: str, gate: str, budget: int | None = None, n: int | None = None) -> PhaseResult:
        """The phase/order probe with exactly the conditions a gate needs (shared requests are cached):
        order: phase 0 in every ordering; phase: every phase in every ordering plus the re-run of
        phase 0; parity: phase 0 in every ordering plus its re-run (the reference's floor); flip: every sampler at a
        budget; fusion: the S phases, their origin-shifted grids and the union passes, identity ordering only;
        equivalence: the S phases and one left-sampler pass at 4b frames, identity ordering only."""
        spec = self.phase_spec()
        S = spec.phases
        b = budget or spec.budget
        conds: list[str] = []
        ident: list[str] = []
        if gate in ("order", "parity"):
            conds = [C.phase(0)]
        elif gate == "phase":
            conds = C.phases(S)
        elif gate == "flip":
            conds = [C.sampler_at(s, b, spec.budget) for s in spec.samplers]
        elif gate == "fusion":
            ident = C.fusion_conditions(S)
        elif gate == "equivalence":
            ident = C.equivalence_conditions(S, b)
            # a confirmatory TOST needs far more items than a flip rate
            spec = dataclasses.replace(spec, items=int(self.probe_settings("phase")["equivalence_items"]))
        else:
            raise ConfigError(f"`gate` must be order, parity, phase, flip, fusion or equivalence; got {gate!r}")
        rerun = gate in ("parity", "phase")  # the re-run of phase 0: the run-to-run floor
        n = min(n or spec.items, spec.items)
        family = f"phase|{model}|{spec.key()}|{gate}|{b}"
        return self.memo(f"{family}|{n}", lambda: run_phase(self, model, spec, self.manifest(), conditions=conds,
                                                            identity=ident, rerun=rerun, n_items=n), family=family)

    def stressor_spec(self, frames: int) -> StressorSpec:
        """The stressor probe's spec at ``frames`` frames from the run's settings."""
        return StressorSpec.from_settings(self.probe_settings("stressor"), frames)

    def stressor(self, model: str, frames: int, n: int | None = None, part: str | None = None) -> StressorResult:
        """The stressor probe at ``frames`` on the first ``n`` videos, in parts (:data:`.probes.stressor.PARTS`):
        ``part`` "clean" (the clean outputs), "controls", or a stressor's name (its variants); None:
        every part, joined. The clean part is computed first, once, and every other part reads it,
        so the parts share no other request and may run on different workers
        (:func:`.suite_params.probe_group`)."""
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
                n_videos=n, clean=clean, part=p), family=f"{base}|{p}")

        return one(part) if part is not None else merge_parts([one(p) for p in STRESSOR_PARTS])

    def stressor_clean(self, model: str, frames: int) -> StressorResult:
        """The stressor probe's clean part (:meth:`stressor`): what the parity repetition gate compares."""
        return self.stressor(model, frames, part="clean")

    def positional(self, model: str, spec: PositionalSpec, n: int | None = None) -> PositionalResult:
        """The positional probe on ``model`` at ``spec`` (its first ``n`` groups), run once per key."""
        n = min(n or spec.groups, spec.groups)
        return self.memo(f"positional|{model}|{spec.key()}|{n}",
                         lambda: run_positional(self, model, spec, self.manifest(), self.judges(), n_groups=n),
                         family=f"positional|{model}|{spec.key()}")

    # -- verdicts
    def mean_gate(self, gate: str, model: str, values: ArrayLike, clusters: ArrayLike, *, name: str, unit: str,
                  method: str | None = None, extra: Mapping[str, Any] | None = None,
                  lattice_step: float | None = None) -> Verdict:
        """:func:`.gates.verdict_builders.mean_gate` on this run."""
        return verdict_builders.mean_gate(self, gate, model, values, clusters, name=name, unit=unit, method=method,
                                          extra=extra, lattice_step=lattice_step)

    def rate_gate(self, gate: str, model: str, k: int, n: int, *, name: str, unit: str,
                  extra: Mapping[str, Any] | None = None) -> Verdict:
        """:func:`.gates.verdict_builders.rate_gate` on this run."""
        return verdict_builders.rate_gate(self, gate, model, k, n, name=name, unit=unit, extra=extra)

    def baseline_gate(self, gate: str, model: str, cand: ArrayLike, base: ArrayLike, clusters: ArrayLike, *, name: str,
                      unit: str, worse: str, extra: Mapping[str, Any] | None = None) -> Verdict:
        """:func:`.gates.verdict_builders.baseline_gate` on this run (paired non-inferiority against
        ``--baseline`` within the gate's margin)."""
        return verdict_builders.baseline_gate(self, gate, model, cand, base, clusters, name=name, unit=unit,
                                              worse=worse, extra=extra)

    def observe(self, probe: str, data: Mapping[str, Any]) -> None:
        """Append a probe observation (per-instance values, figures' data) to the run log."""
        self.runlog.write({"kind": "observation", "probe": probe, "worker": self.worker, **data})

    def close(self) -> None:
        """Close the backends, the run log, the judges' stores and the cache."""
        for b in self._backends.values():
            with contextlib.suppress(Exception):
                b.close()
        self.runlog.close()
        for store in getattr(self, "_judge_stores", ()):
            store.close()
        self.cache.close()


def synthetic_manifest(rootdir: Path, *, progress: Callable[[str], None] | None = None) -> Path:
    """The default synthetic set, built on first use (a file lock serialises xdist workers)."""
    from ..video.synthetic import build_set, default_set_dir

    out = default_set_dir(rootdir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / "manifest.jsonl"
    with (out / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if progress:
                progress(f"checking the synthetic set in {out} (built once, then reused)")
            build_set(out, progress=progress)
        finally:  # explicitly: a process forked meanwhile shares the open file, and closing ours would not unlock
            fcntl.flock(lock, fcntl.LOCK_UN)
    return manifest


if TYPE_CHECKING:
    from ..gate_context import GateContext, ProbeContext, SearchContext

    def _implements(run: RunContext) -> tuple[GateContext, ProbeContext, SearchContext]:
        """mypy checks here that the run context implements the three protocols."""
        return run, run, run


__all__ = ["RunContext", "environment", "synthetic_manifest"]
