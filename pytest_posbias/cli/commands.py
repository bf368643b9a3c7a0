"""Subcommands of the ``posbias`` CLI (registered by :func:`register`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import check_alpha
from ..errors import ConfigError

Register = Callable[[Any, str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def read_text_file(path: str, what: str) -> str:
    """The text of a UTF-8 file the user named (a leading BOM is dropped); ConfigError naming the
    file and what is wrong when it is missing, a folder, binary or not UTF-8."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such file")
    if not p.is_file():
        raise ConfigError(f"{p}: not a regular file (expected {what})")
    data = p.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ConfigError(f"{p}: a binary file (NUL byte at byte offset {nul}), not {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text (byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
                          f"expected {what}") from None


def _count(value: str) -> int:
    """A count of at least 1 (``--groups``, ``--sample``): 0 would import a manifest a suite cannot use."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1; got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {n}")
    return n


def register(sub: Any, register: Register) -> None:
    """Add every subcommand to the parser."""
    register(sub, "gates", _gates, "list the gates, their default thresholds and compliance regions")

    p = register(sub, "models", _models, "list the model registry, or build a tiny offline checkpoint")
    p.add_argument("action", nargs="?", choices=["list", "tiny"], default="list")
    p.add_argument("family", nargs="?", help="with 'tiny': the family to build")
    p.add_argument("out", nargs="?", help="with 'tiny': the output directory")

    p = register(sub, "data", _data, "import a dataset's annotations into a manifest (or validate a manifest)")
    p.add_argument("action", choices=["import", "validate"])
    p.add_argument("format", nargs="?", help="with import: activitynet, news, mvbench, videomme, egoschema, nextqa")
    p.add_argument("--videos", help="directory of the dataset's videos (or frame folders)")
    p.add_argument("--annotations", help="the dataset's annotation file (news: the folder of vid.<id>.info.json)")
    p.add_argument("--out", help="manifest to write (JSONL); with validate: the manifest to check")
    p.add_argument("--classes", help="activitynet: activity_net.v1-3.min.json, to map activities to domains")
    p.add_argument("--answers", help="egoschema: subset_answers.json (default: beside questions.json)")
    p.add_argument("--groups", type=_count, default=27,
                   help="summarization groups per domain x duration and scale (default 27)")
    p.add_argument("--sample", type=_count, default=None,
                   help="multiple choice: keep a random.Random(seed).sample of N items")
    p.add_argument("--seed", type=int, default=42, help="seed for --sample and group sampling (default 42)")

    p = register(sub, "report", _report, "render the HTML report from one or more run logs (no model needed)")
    p.add_argument("run_logs", nargs="*", help="run.jsonl files; two (RUN_LOG_A RUN_LOG_B): candidate A vs baseline B "
                                               "with paired differences; more: one comparative report")
    p.add_argument("--history", metavar="DIR", default=None,
                   help="trends across releases: every run log under DIR, per gate the estimate and CI by release")
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")

    p = register(sub, "text-audit", _text_audit,
                 "repetition metrics (RR, RI, IE, length-matched RR) of a caption corpus")
    p.add_argument("file", help="JSONL (field text/caption/output) or plain text, one caption per line")
    p.add_argument("--words", type=int, nargs="+", default=[150, 300], help="length-matched RR at these word counts")
    p.add_argument("--n", type=int, default=5, help="n-gram size for RR (default 5)")
    p.add_argument("--tau", type=int, default=1, help="RR threshold tau (default 1)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")

    p = register(sub, "judge-agreement", _judge_agreement, "agreement of a coverage judge with human labels (CSV)")
    p.add_argument("labels", help="CSV with reference, summary and human* columns")
    p.add_argument("--judge", default="embed", help="embed (default), fragment, or openai:MODEL")
    p.add_argument("--api-base", default=None, help="endpoint for an openai judge")
    p.add_argument("--cache", default=".posbias", help="cache directory for judge calls")

    p = register(sub, "calibrate", _calibrate,
                 "measure every gate's error rates, power and sequential savings on the sim models")
    p.add_argument("--quick", action="store_true", help="200 repetitions per cell (minutes on two cores)")
    p.add_argument("--reps", type=int, default=None, help="repetitions per cell (default 1000, 200 with --quick)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation (default 0)")
    p.add_argument("--gates", default=None,
                   help="comma-separated gates (default: dpb,meg,flip,phase,order,repetition,stressor,attack)")
    p.add_argument("--data", default=None, help="manifest to measure sim:unbiased on (default: the synthetic set)")
    p.add_argument("--cache", default=".posbias", help="generation cache directory (default .posbias)")
    p.add_argument("--json", default=None, help="also write the numbers as JSON")
    p.add_argument("--end-to-end", action="store_true",
                   help="run the real gates against sim:dose models at 0, t and 3t over --reps run seeds "
                        "(default 20; --quick: 2 seeds at smaller probe sizes)")

    p = register(sub, "fixtures", _fixtures, "build the synthetic video set (clips, scene specs, manifest)")
    p.add_argument("action", choices=["build"], help="what to do")
    p.add_argument("--out", default="fixtures/synthetic", help="output directory (default fixtures/synthetic)")
    p.add_argument("--count", type=int, default=10, help="clips per domain x bucket configuration (default 10)")
    p.add_argument("--groups", type=_count, default=40,
                   help="groups per configuration and scale (default 40; at most the distinct groups --count clips "
                        "make, else an error)")
    p.add_argument("--scales", type=int, nargs="+", default=[2, 4], choices=[2, 4], help="group sizes P (default 2 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole set (default 0)")
    p.add_argument("--overwrite", action="store_true", help="re-render clips even when unchanged")


def _gates(args: argparse.Namespace) -> int:
    from ..gate_registry import GATE_SPECS

    w = max(14, *(len(g.name) for g in GATE_SPECS))
    print(f"{'gate':<{w}} {'threshold':>9}  {'region':<12} {'baseline margin':>15}  description")
    for g in GATE_SPECS:
        region = {"both": "|x| <= t", "upper": "x <= t", "lower": "x >= t"}[g.side]
        margin = "-" if g.worse is None else f"{g.margin:g}"  # no paired form: the absolute threshold stays
        print(f"{g.name:<{w}} {g.threshold:>9g}  {region:<12} {margin:>15}  {g.description}"
              + (f" (-m {g.marker})" if g.marker != g.name else ""))
    return 0


def _calibrate(args: argparse.Namespace) -> int:
    import os

    from ..safe_text import strict_json

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    allowed: tuple[str, ...]
    if args.end_to_end:
        from ..calibration.e2e import DEFAULT_REPS, E2E_GATES, QUICK_REPS, cells_to_json, run_end_to_end

        allowed, min_reps = E2E_GATES, 1
    else:
        from ..calibration import GATES, run_calibration

        allowed, min_reps = GATES, 10
    # every argument is checked before the measurement (which takes a minute or more)
    gates = args.gates.split(",") if args.gates else list(allowed)
    check_alpha(args.alpha, "--alpha")
    if args.reps is not None and args.reps < min_reps:
        raise ConfigError(f"--reps must be an integer >= {min_reps}; got {args.reps}")
    if unknown := [g for g in gates if g not in allowed]:
        raise ConfigError(f"--gates: unknown gates {unknown}; allowed: {', '.join(allowed)}")
    if args.data and not Path(args.data).is_file():
        raise ConfigError(f"--data: no such manifest file: {args.data}")
    if args.json and not Path(args.json).parent.is_dir():
        raise ConfigError(f"--json: the folder of {args.json} does not exist")
    if args.json and Path(args.json).is_dir():
        raise ConfigError(f"--json {args.json}: is a folder; name a JSON file")
    if args.json and args.data and Path(args.json).exists() and Path(args.json).samefile(args.data):
        raise ConfigError(f"--json {args.json}: is the --data manifest; name another file for the numbers")
    common: dict[str, Any] = {"alpha": args.alpha, "seed": args.seed, "gates": gates, "data": args.data,
                              "cache": args.cache, "rootdir": Path.cwd(), "print_fn": lambda m: print(m, flush=True)}
    result: Any
    if args.end_to_end:
        result = cells_to_json(run_end_to_end(reps=args.reps or (QUICK_REPS if args.quick else DEFAULT_REPS),
                                              quick=args.quick, **common))
    else:
        result = run_calibration(reps=args.reps or (200 if args.quick else 1000), **common)
    if args.json:
        Path(args.json).write_text(strict_json(result, indent=2, default=float))
    return 0


def _fixtures(args: argparse.Namespace) -> int:
    import time

    from ..video.synthetic import build_set

    t0 = time.perf_counter()
    manifest = build_set(args.out, videos_per_config=args.count, groups_per_config=args.groups, seed=args.seed,
                         scales=tuple(args.scales), overwrite=args.overwrite, progress=lambda m: print(m, flush=True))
    n = sum(1 for _ in manifest.open())
    print(f"wrote {manifest} ({n} manifest lines) in {time.perf_counter() - t0:.1f} s")
    return 0


def _models(args: argparse.Namespace) -> int:
    from ..models.registry import REGISTRY

    if args.action == "tiny":
        from ..models.tiny import FAMILIES, build_tiny_checkpoint

        if not args.family or not args.out:
            raise ConfigError(f"usage: posbias models tiny FAMILY OUT_DIR (families: {', '.join(FAMILIES)})")
        if args.family not in FAMILIES:
            raise ConfigError(f"unknown family {args.family!r}; families: {', '.join(FAMILIES)}")
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise ConfigError(f"{args.out}: exists and is not a directory")
        if Path(args.out).is_dir() and any(Path(args.out).iterdir()):  # random weights would replace a checkpoint's
            raise ConfigError(f"{args.out}: folder is not empty; name a new or empty folder for the tiny checkpoint")
        print(build_tiny_checkpoint(args.family, args.out))
        return 0
    print(f"{'alias':<20} {'backend/family':<18} {'checkpoint':<40} notes")
    for e in REGISTRY.values():
        fam = "NOT NATIVE" if e.family == "unsupported" else e.family
        print(f"{e.alias:<20} {fam:<18} {e.hf_id:<40} {e.note}")
    from ..models.sim import PROFILES

    print(f"also: sim:PROFILE ({', '.join(PROFILES)}), openai:NAME with --posbias-api-base URL, or a checkpoint "
          "directory")
    return 0


def _judge_agreement(args: argparse.Namespace) -> int:
    from ..scoring.agreement import agreement
    from ..scoring.judges import EmbedJudge, FragmentJudge, OpenAIJudge

    judge: Any
    if args.judge == "embed":
        judge = EmbedJudge()
    elif args.judge == "fragment":
        judge = FragmentJudge()
    elif args.judge.startswith("openai:"):
        from ..engine import Engine, GenerationCache
        from ..models.openai_backend import OpenAIBackend
        from ..video.frames import FrameStore

        backend = OpenAIBackend(args.judge.split(":", 1)[1], FrameStore(), api_base=args.api_base)
        engine = Engine(GenerationCache(Path(args.cache) / "generations.sqlite"), backend_for=lambda m: backend)
        judge = OpenAIJudge(engine, args.judge)
    else:
        raise ConfigError(f"--judge must be embed, fragment or openai:MODEL; got {args.judge!r}")
    rows = agreement(args.labels, judge)
    print(f"{'pair':<40} {'n':>5} {'Pearson':>9} {'Spearman':>9}")
    for r in rows:
        print(f"{r.pair:<40} {r.n:>5d} {r.pearson:>9.3f} {r.spearman:>9.3f}")
    return 0


def read_captions(path: str) -> list[str]:
    """Captions of a JSONL file (field text, caption or output) or of a plain file, one per line."""
    import json

    p = Path(path)
    out = []
    for n, line in enumerate(read_text_file(path, "UTF-8 text or JSONL captions").splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(f"{p}:{n}: a line that starts with '{{' must be a JSON object") from None
            except RecursionError:
                raise ConfigError(f"{p}:{n}: a line that starts with '{{' must be a JSON object; this one is not "
                                  "valid JSON (nested too deeply)") from None
            text = next((d[k] for k in ("text", "caption", "output") if isinstance(d.get(k), str)), None)
            if text is None:
                raise ConfigError(f"{p}:{n}: JSON line has no text, caption or output string field")
            out.append(text)
        else:
            out.append(line)
    return out


def _text_audit(args: argparse.Namespace) -> int:
    import numpy as np

    from ..metrics import information_entropy, length_matched_repetition_rate, repetition_intensity, repetition_rate
    from ..safe_text import strict_json

    texts = read_captions(args.file)
    if not texts:
        raise ConfigError(f"{args.file}: the file holds no captions")
    result: dict[str, Any] = {
        "n": len(texts),
        "mean_words": float(np.mean([len(t.split()) for t in texts])),
        "rr": repetition_rate(texts, n=args.n, tau=args.tau),
        "ri": float(np.mean([repetition_intensity(t) for t in texts])),
        "ie": float(np.mean([information_entropy(t) for t in texts])),
        "length_matched": {},
    }
    for w in args.words:
        rr, kept = length_matched_repetition_rate(texts, words=w, n=args.n, tau=args.tau)
        result["length_matched"][str(w)] = {"rr": None if rr != rr else rr, "kept": kept}
    if args.json:
        print(strict_json(result, indent=2))
        return 0
    print(f"captions {result['n']}, mean words {result['mean_words']:.1f}")
    print(f"RR (n={args.n}, tau={args.tau}) {result['rr']:.4f}   RI (n=1) {result['ri']:.4f}   IE (n=1) "
          f"{result['ie']:.4f}")
    for w, v in result["length_matched"].items():
        rr_txt = "-" if v["rr"] is None else f"{v['rr']:.4f}"
        print(f"RR at {w} words: {rr_txt} ({v['kept']} captions reach {w} words)")
    return 0


def _report(args: argparse.Namespace) -> int:
    if args.history is not None:
        if args.run_logs:
            raise ConfigError("--history DIR reads every run log under DIR; give no RUN_LOG with it")
        from ..report.history import render_history

        html = render_history(args.history)
    else:
        from ..report.render import render

        if not args.run_logs:
            raise ConfigError("give one or more run logs (run.jsonl), or --history DIR")
        for log in args.run_logs:
            if not Path(log).is_file():
                raise ConfigError(f"{log}: no such run log (expected a run.jsonl under .posbias/runs/)")
            read_text_file(log, "a run log (run.jsonl)")  # binary or not UTF-8: one line naming the file
            if Path(args.output).exists() and Path(args.output).samefile(log):  # the HTML would replace the log
                raise ConfigError(f"-o {args.output}: is the run log {log}; name another file for the HTML report")
        for i, log in enumerate(args.run_logs):  # a run beside itself would be its own baseline: every difference 0
            if (twice := next((o for o in args.run_logs[:i] if Path(o).samefile(log)), None)) is not None:
                raise ConfigError(f"{log}: the run log {twice} given twice; give each run once")
        html = render(args.run_logs)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return 0


def _data(args: argparse.Namespace) -> int:
    from ..data.manifest import load_manifest

    if args.action == "validate":
        if not args.out:
            raise ConfigError("usage: posbias data validate --out MANIFEST")
        m = load_manifest(args.out, open_videos=True)
        print(f"{args.out}: {m.counts()}; {len(m.problems)} bad lines; {len(m.file_problems)} unusable video files")
        for p in [*m.problems, *m.file_problems]:
            print(f"  {p}")
        if not (m.videos or m.groups or m.mcq):
            print(f"{args.out}: no usable item: a run on this manifest stops with a usage error", file=sys.stderr)
        return 1 if m.problems or m.file_problems or not (m.videos or m.groups or m.mcq) else 0
    from ..data.importers import run_import

    if missing := [n for n in ("format", "videos", "annotations", "out") if not getattr(args, n)]:
        raise ConfigError("import needs " + ", ".join(f"--{n}" if n != "format" else "FORMAT" for n in missing))
    for n in ("annotations", "classes", "answers"):  # the manifest would be written over the dataset's own file
        given = getattr(args, n)
        if given and Path(args.out).exists() and Path(given).exists() and Path(args.out).samefile(given):
            raise ConfigError(f"--out {args.out}: is the --{n} file; name another file for the manifest")
    rep = run_import(args.format, videos=args.videos, annotations=args.annotations, out=args.out, classes=args.classes,
                     answers=args.answers, groups=args.groups, sample=args.sample, seed=args.seed)
    for line in rep.lines():
        print(line)
    print(f"wrote {args.out} (summary: {args.out}.import.json)")
    return 0
