"""Checks at the start of a run, before any model call: the models resolve, the data is usable,
the output paths are writable, the cache is sound and the endpoints answer. Each failure is a
usage error (exit 4) with one line naming the option or ``[tool.posbias]`` key as the user gave it."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config import SHORT_ALIASES, PosbiasConfig, check_output_path
from ..errors import ConfigError, ModelLoadError, PosbiasError
from .options import PATH_OPTIONS, options
from .state import GATE_FIXTURE, WORKERINPUT_GATES_ASKED, plugin_of, posbias_config

if TYPE_CHECKING:
    from ..models.registry import ResolvedModel

NO_MODEL = ("no model to test: give one with --posbias-model MODEL (--model where the suites' conftest.py "
            "registers the short options; e.g. --posbias-model qwen3vl8b, --posbias-model openai:NAME, "
            "--posbias-model sim:unbiased for a simulated run) or set `model = \"...\"` in the [tool.posbias] table "
            "of pyproject.toml")


def model_missing(config: pytest.Config, items: Sequence[pytest.Item]) -> bool:
    """Whether the collection holds gate tests (they use ``posbias_model`` or ``posbias_run``) with no
    model given on the command line or in ``[tool.posbias]``: a usage error (exit 4), no simulator
    stands in. A collection without them (another project's tests) needs no model, nor does
    ``--collect-only`` (it calls none: an editor's test discovery lists the suites' tests)."""
    if config.getoption("--posbias-model") or config.getoption("--collect-only", False):
        return False
    return not posbias_config(config).get("model") and any(map(uses_model, items))


def uses_model(item: pytest.Item) -> bool:
    """Whether the test ``item`` calls a model: it uses ``posbias_model`` or ``posbias_run`` (a gate test)."""
    return any(f in getattr(item, "fixturenames", ()) for f in ("posbias_model", "posbias_run"))


def check_threshold_overrides(config: pytest.Config) -> None:
    """A gate given two different values by ``--posbias-threshold`` is a usage error: the later one would
    win silently (a looser threshold given by a CI template's default after the engineer's)."""
    pairs = config.getoption("--posbias-threshold") or []
    if twice := sorted({n for n, v in pairs if any(m == n and w != v for m, w in pairs)}):
        values = ", ".join(f"{n}={v:g}" for n, v in pairs if n in twice)
        raise pytest.UsageError(f"--posbias-threshold gives {', '.join(twice)} more than once with different "
                                f"values ({values}); give each gate once")


def gates_asked(config: pytest.Config) -> bool:
    """Whether the command line asks for gate tests: test paths given, a ``-m`` or ``-k`` selection, or a
    posbias option (its own ``--posbias-*`` or a short alias). Without any of these, a run is the project's
    own (its testpaths, its ini options): gate tests it collects with no model named are left out rather than
    stopping it. An xdist worker reads the controller's answer (its own arguments are rebuilt)."""
    if (given := getattr(config, "workerinput", None)) is not None:
        return bool(given.get(WORKERINPUT_GATES_ASKED, True))
    args = [str(a) for a in config.invocation_params.args]
    return config.args_source == pytest.Config.ArgsSource.ARGS or any(
        a.startswith(("--posbias-", "-m", "-k")) or a.partition("=")[0] in SHORT_ALIASES for a in args)


def check_models(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """Resolve every --model/--baseline/--posbias-parity (and the table's baseline and parity) now: a
    model that cannot be loaded fails at start. A model named on the command line is also looked up
    in the local cache; one from the table is not (a project's other tests run on machines without
    its weights, as with the table's ``model``). A baseline or parity reference that is the tested
    model, from the command line or the table, is refused."""
    models = list(config.getoption("--posbias-model") or [])
    cli_baseline, cli_parity = config.getoption("--posbias-baseline"), config.getoption("--posbias-parity")
    baseline = cli_baseline or pcfg.get("baseline")
    parity = cli_parity or pcfg.get("parity")
    resolved: dict[str, ResolvedModel] = {}
    if models or baseline or parity:  # the registry is imported only when a model was named
        from ..models.registry import resolve

        plan = bool(config.getoption("--posbias-plan", None))  # posbias plan loads no weights: no cache lookup
        typed = {*models, cli_baseline, cli_parity}
        for spec in [*models, *[s for s in (baseline, parity) if s]]:
            try:
                resolved[spec] = resolve(spec, locate=not plan and spec in typed)
            except ModelLoadError as exc:
                raise pytest.UsageError(as_typed(config, str(exc))) from None
    table_models = pcfg.get("model")
    tested = models or ([table_models] if isinstance(table_models, str) else list(table_models or []))

    def same_as_tested(other: str) -> str | None:
        return next((m for m in tested if _same_model(m, other, resolved)), None)

    # a model tested twice runs every gate twice and doubles the run-level Holm family, which
    # weakens the adjustment of every gate in the run
    for i, m in enumerate(tested):
        if (first := next((t for t in tested[:i] if _same_model(t, m, resolved)), None)) is not None:
            given = _typed_spelling(config, m)
            twice = f"{first} and {m} name one model" if first != m else f"{m} is given twice"
            raise pytest.UsageError(f"{given} {m}: {twice}; test each model once")
    # the gates look a per-model table up by the spec as given: one keyed by another spelling of a
    # tested model (its alias, its Hub id) would leave that model on the looser thresholds unseen
    for name in pcfg.model_thresholds:
        if name not in tested and (same := same_as_tested(name)) and same not in pcfg.model_thresholds:
            raise pytest.UsageError(f"{pcfg.source}.models.{name!r}: the tested model {same} under another name; its "
                                    f"thresholds apply only to a model given as {name}: name the table \"{same}\"")

    # a model compared with itself shares its cache entries: every paired difference would be 0 and
    # the comparison would certify or pass on nothing
    for key, spec, cli, role, instead in (
            ("baseline", baseline, cli_baseline, "baseline", "the release it is compared with"),
            ("parity", parity, cli_parity, "parity reference",
             "another deployment (a served build, another precision)")):
        if spec and (same := same_as_tested(spec)):
            given = f"--posbias-{key}" if cli else f"{pcfg.source} `{key}` ="
            raise pytest.UsageError(f"{given} {spec}: the {role} is the tested model {same} itself; name {instead}")
    _check_data(config, pcfg)
    # pytest fixes its rootdir before plugins add their options, so in `--model /ckpt` or
    # `--posbias-data /data/manifest.jsonl` (with a space) it takes the path for a test path and
    # may root the run elsewhere, missing the project's configuration (thresholds, probe
    # settings, testpaths, markers). Say so rather than run the wrong setup.
    got = Path(str(config.inipath)).resolve() if config.inipath else None
    args = list(config.invocation_params.args)
    if not config.getoption("inifilename", None):  # with -c the file is the one asked for
        taken = [value for a, value in pairwise(args)
                 if a in PATH_OPTIONS and _exists(value) and _posbias_value(config, a, value)]
        if taken:
            # the file pytest would have found from its other positional arguments (its own search)
            rest = [x for x in args if not x.startswith("-") and x not in taken]
            here = Path(str(config.invocation_params.dir)).resolve()
            starts = [(here / x).resolve() for x in rest] or [here]
            expected = next(filter(None, (_expected_inifile(d, fallback=False) for d in starts)),
                            None) or next(filter(None, map(_expected_inifile, starts)), None)
            if got != expected:
                a = next(a for a, value in pairwise(args) if value == taken[0])
                raise pytest.UsageError(f"pytest took {taken[0]} (the value of {a}) for a test path, so it did not use "
                                        f"{expected or 'the project configuration'}; write {a}={taken[0]} (with '=')")
    if models or cli_baseline or cli_parity:
        _check_nearer_table(config)


def _check_nearer_table(config: pytest.Config) -> None:
    """A posbias run started inside a project whose own pyproject.toml holds a ``[tool.posbias]`` table, below
    the folder pytest rooted the run at (a repository whose pytest settings sit higher up): that table would
    not be read (the run's settings come from the rootdir's), so its data, sizes and thresholds would be
    silently dropped. A usage error naming the table and the ``-c`` that reads it."""
    root = Path(str(config.rootpath)).resolve()
    here = Path(str(config.invocation_params.dir)).resolve()
    if root == here or root not in here.parents:
        return
    for d in (here, *here.parents):
        if d == root:
            return
        if _toml_tables(d / "pyproject.toml").get("posbias") is not None:
            f = d / "pyproject.toml"
            raise pytest.UsageError(f"{f} holds a [tool.posbias] table, but pytest rooted the run at {root} (the "
                                    f"nearest pytest configuration), whose settings the run reads instead; run "
                                    f"pytest with -c {f} to use the project's table")


def _posbias_value(config: pytest.Config, option: str, value: str) -> bool:
    """Whether ``value`` after ``option`` on the command line is the plugin's: a ``--posbias-*``
    option, or a short alias (``--model``) that set its long option; another project's own
    ``--model`` is left to it."""
    long = SHORT_ALIASES.get(option)
    if long is None:
        return True
    got = config.getoption(long)
    return value.strip() in got if isinstance(got, list) else got == value.strip()


def _same_model(a: str, b: str, resolved: dict[str, ResolvedModel]) -> bool:
    """Whether two model specs name one model: the same backend, target and revision once located in
    the local cache (both resolved at start), or before any lookup (a table's tested model is resolved
    when its run starts, so an alias and its Hub id compare by id)."""
    from ..models.registry import resolve

    def key(r: ResolvedModel) -> tuple[str, str, str]:
        return (r.backend, r.target, r.revision)

    if a in resolved and b in resolved and key(resolved[a]) == key(resolved[b]):
        return True
    try:
        return key(resolve(a, locate=False)) == key(resolve(b, locate=False))
    except ModelLoadError:  # an unresolvable spec is refused where it is resolved, naming its option
        return False


def _typed_spelling(config: pytest.Config, spec: str) -> str:
    """How the user gave the model ``spec``: the option as typed on the command line (``--model``,
    ``--posbias-model``, ``--baseline``, ``--posbias-baseline``, the last one carrying it), else the
    ``[tool.posbias]`` key that set it (``model``, ``baseline``); ``--posbias-model`` when neither says."""
    args = [str(a) for a in config.invocation_params.args]
    pairs = zip((a.partition("=") for a in args), [*args[1:], ""], strict=False)  # each argument and the next
    typed = [name for (name, eq, value), following in pairs
             if SHORT_ALIASES.get(name, name) in ("--posbias-model", "--posbias-baseline")
             and (value if eq else following).strip() == spec]
    if typed:
        return typed[-1]
    pcfg = posbias_config(config)
    cli_models, cli_baseline = config.getoption("--posbias-model") or [], config.getoption("--posbias-baseline")
    if spec == pcfg.get("baseline") and spec != cli_baseline:
        return f"{pcfg.source} `baseline` ="
    models = pcfg.get("model")
    if not cli_models and spec in ([models] if isinstance(models, str) else models or []):
        return f"{pcfg.source} `model` ="
    if spec in cli_models:
        return "--posbias-model"
    if spec == cli_baseline:
        return "--posbias-baseline"
    if spec == config.getoption("--posbias-parity"):
        return "--posbias-parity"
    return f"{pcfg.source} `parity` =" if spec == pcfg.get("parity") else "--posbias-model"


def as_typed(config: pytest.Config, message: str) -> str:
    """A model error's message (it names ``--posbias-model SPEC``, an option every project accepts)
    with the option, or the ``[tool.posbias]`` key, by which the user gave each of the run's models."""
    for spec in sorted(options(config).specs, key=len, reverse=True):  # a longer spec first: one may contain another
        typed = _typed_spelling(config, str(spec))
        if typed != "--posbias-model":
            message = message.replace(f"--posbias-model {spec}", f"{typed} {spec}")
    return message


def _check_data(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """A manifest (--posbias-data or [tool.posbias] data) with no usable item at all is a usage error
    naming the file; one that lacks only some kinds of item runs, and the suites without data skip."""
    data = options(config).data  # a relative [tool.posbias] data is the project root's (options.options)
    if not data:
        return
    from ..data.manifest import require_usable

    source = "--posbias-data" if config.getoption("--posbias-data") else f"{pcfg.source} data"
    try:
        plugin_of(config).file_problems = require_usable(str(data)).file_problems
    except PosbiasError as exc:
        raise pytest.UsageError(f"{source}: {exc}") from None


def check_output_paths(config: pytest.Config, pcfg: PosbiasConfig) -> None:
    """Every path the run writes that the user set (cache folder, HTML report or report folder, JSON
    and Markdown summaries) can be written, before any model call (config.check_output_path): a
    usage error naming the option or key otherwise. The defaults under the project root are left to
    the run itself, so an unrelated pytest run never touches them. Checked on the controller only."""
    if getattr(config, "workerinput", None) is not None or config.getoption("--posbias-plan", None):
        return
    root, here = Path(str(config.rootpath)), Path(str(config.invocation_params.dir))
    src = pcfg.source
    cache, report = config.getoption("--posbias-cache"), config.getoption("--posbias-report")
    checks = [("--posbias-cache", cache, True, root),  # a table key the option overrides is not checked
              (f"{src} `cache`", not cache and pcfg.get("cache"), True, root),
              ("--posbias-report", report, False, root),
              (f"{src} `report`", not report and pcfg.get("report"), False, root),
              ("--posbias-json", config.getoption("--posbias-json"), False, here),
              ("--posbias-markdown", config.getoption("--posbias-markdown"), False, here),
              (f"{src} `report_dir`", not (report or pcfg.get("report")) and pcfg.get("report_dir"), True, root)]
    for where, value, folder, base in checks:
        if not value:
            continue
        try:
            check_output_path(where, str(value), folder=folder, base=base)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None


# the rate gates decided by the exact binomial rule on a probe's units: (probe, its size key, gates)
RATE_GATE_SIZES = (("phase", "items", ("flip", "phase", "order")), ("stressor", "videos", ("repetition", "attack")))


def sample_size_problem(config: pytest.Config, pcfg: PosbiasConfig, gates: set[str]) -> str | None:
    """The usage error for a selected rate gate (among ``gates``) whose probe size lies below the
    fewest units at which its exact binomial rule can show a violation
    (:func:`~pytest_posbias.stats.rate_min_sample`, at the gate's threshold for each tested model
    and the run's α): such a gate passes every model. None when every selected rate gate can fail.
    Detect mode without a baseline only: in certify mode such a gate never passes, and under a
    baseline the gates are paired comparisons. Another project's run (not :func:`posbias_asked`)
    is left alone: it imports no statistics."""
    if not gates or not posbias_asked(config):
        return None
    opts = options(config)
    if opts.mode != "detect" or opts.baseline:
        return None
    from ..probes.settings import settings_for
    from ..stats import rate_min_sample

    for probe, key, probe_gates in RATE_GATE_SIZES:
        size = settings_for(probe, pcfg.probes.get(probe))[key]
        given = key in pcfg.probes.get(probe, {})
        for model in opts.models or (None,):
            thresholds = pcfg.thresholds_for(model, opts.threshold_overrides)
            for gate in (g for g in probe_gates if g in gates):
                need = rate_min_sample(threshold=thresholds[gate], mode="detect", alpha=opts.alpha)
                if size < need:
                    where = f"{pcfg.source}.probes.{probe}.{key}" if given else f"the default {probe} {key}"
                    return (f"{where} = {size} is too small for the {gate} gate to fail any model: its exact binomial "
                            f"test at threshold {gate} = {thresholds[gate]:g} and alpha {opts.alpha:g} shows a "
                            f"violation from {need} {key} on; give {key} >= {need} or a lower {gate} threshold")
    return None


def collection_problem(config: pytest.Config, pcfg: PosbiasConfig, items: Sequence[pytest.Item]) -> str | None:
    """The usage error the selected tests show before any model call, or None: gate tests with no
    model (:data:`NO_MODEL`, :func:`model_missing`), or a selected rate gate too small to fail any
    model (:func:`sample_size_problem`; ``--collect-only`` calls no model and is not checked). Only
    the gates whose tests survived ``-m``/``-k`` and the paths given are checked: a smoke run of
    one suite is not stopped by another suite's sizes."""
    if model_missing(config, items):
        return NO_MODEL
    if config.getoption("--collect-only", False):
        return None
    from ..gate_registry import gate_of_test

    specs = (gate_of_test(getattr(i, "originalname", i.name)) for i in items
             if GATE_FIXTURE in getattr(i, "fixturenames", ()))
    return sample_size_problem(config, pcfg, {g.name for g in specs if g is not None})


def warn_unusable_videos(config: pytest.Config) -> None:
    """At the start of the run, before any model call: one line per manifest item whose video file
    cannot be used (missing, a link loop, a path too long, permission denied, 0 bytes). The run goes
    on; those items stay planned and their units count as lost, with this reason."""
    problems = plugin_of(config).file_problems
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if not problems or tr is None or getattr(config, "workerinput", None) is not None:
        return
    tr.write_line(f"[posbias] warning: {len(problems)} video files of the manifest cannot be used (the run goes on):",
                  yellow=True)
    for p in problems:
        tr.write_line(f"[posbias]   {p}", yellow=True)


def _exists(path: str) -> bool:
    """Whether ``path`` names something that exists; False for a path the file system cannot look up
    (too long, a symbolic link loop): that path is checked, and named, by its option."""
    try:
        return Path(path).expanduser().exists()
    except (OSError, RuntimeError):
        return False


def _expected_inifile(start: Path, *, fallback: bool = True) -> Path | None:
    """The configuration file pytest would find from ``start`` (pytest's own search order): the first file
    holding pytest settings, else the first ``pyproject.toml`` (pytest takes it without a ``[tool.pytest]``
    table, as in a project ``posbias init`` made, whose ``[tool.posbias]`` table it then holds)."""
    first_pyproject = None
    for d in (start, *start.parents):
        for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):
            if (d / name).is_file():
                return (d / name).resolve()
        if _toml_tables(d / "pyproject.toml").get("pytest") is not None:
            return (d / "pyproject.toml").resolve()
        for name, marker in (("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]")):
            f = d / name
            try:
                if f.is_file() and marker in f.read_text(errors="replace"):
                    return f.resolve()
            except OSError:
                continue
        if fallback and first_pyproject is None and (d / "pyproject.toml").is_file():
            first_pyproject = (d / "pyproject.toml").resolve()
    return first_pyproject


def _toml_tables(path: Path) -> dict[str, Any]:
    """The ``[tool]`` tables of a pyproject.toml (empty when it is missing or not TOML)."""
    try:
        tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return tool if isinstance(tool, dict) else {}


def posbias_asked(config: pytest.Config) -> bool:
    """Whether this is a posbias run: the project has a ``[tool.posbias]`` table, or a model, a
    baseline or a parity reference is given on the command line. A run of another project's tests
    has none of these, and the plugin leaves it as it found it: xdist's own scheduler, no endpoint
    check, no worker thread caps, nothing of the package's core imported."""
    return bool("[tool.posbias]" in posbias_config(config).source or config.getoption("--posbias-model")
                or config.getoption("--posbias-baseline") or config.getoption("--posbias-parity"))


def check_cache_before_calls(config: pytest.Config) -> None:
    """Serial run or xdist controller (once, before any worker starts): check the cache folder and
    its database (:func:`pytest_posbias.run.cache_check.check_cache`); a damaged or unwritable cache is a usage error
    with one line naming the file and the choices. Skipped for a project that uses no cache (no
    ``[tool.posbias]``, no posbias option, no cache folder yet) and where no model is called."""
    if (getattr(config, "workerinput", None) is not None or config.getoption("--collect-only", False)
            or config.getoption("--posbias-plan", None)):
        return
    opts = options(config)
    folder = Path(str(config.rootpath)) / opts.cache  # an absolute cache path replaces the project root
    asked = (posbias_asked(config) or config.getoption("--posbias-cache") or config.getoption("--posbias-cache-mode")
             or config.getoption("--posbias-cache-repair"))
    if not asked and not folder.exists():
        return
    from ..run.cache_check import check_cache

    try:
        found = check_cache(folder, mode=opts.cache_mode, repair=opts.cache_repair)
    except ConfigError as exc:
        raise pytest.UsageError(f"posbias: {exc}") from None
    tr = config.pluginmanager.get_plugin("terminalreporter")
    for line in found.lines():
        if tr is not None:
            tr.write_line(f"[posbias] {line}", yellow=True)


def check_endpoints_before_workers(config: pytest.Config) -> None:
    """xdist controller of a posbias run (:func:`posbias_asked`): check openai endpoints before any
    worker starts (a worker's failure would be lost as a crash); serial runs check them in the
    ``posbias_run`` fixture."""
    if (getattr(config, "workerinput", None) is not None or getattr(config.option, "dist", "no") == "no"
            or config.getoption("--collect-only", False) or config.getoption("--posbias-plan", None)
            or not posbias_asked(config)):
        return
    from ..models.openai_backend import check_endpoints

    try:
        check_endpoints(options(config))
    except ModelLoadError as exc:
        raise pytest.UsageError(f"posbias: {as_typed(config, str(exc))}") from None
