"""What the ready-made suites are parametrized over (no pytest here: the suites' conftest calls it)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..gate_registry import suite_of_test
from ..probes.positional import positional_spec as positional_spec  # public here too (docs/custom-gates.md)
from .xdist_support import XDIST_GROUP_PREFIX

# Robustness variants of the multi-video paper (§4.2–5.3, appendix C.6), run on the P = 4
# short configurations and marked slow.
POSITIONAL_VARIANTS: dict[str, dict[str, Any]] = {
    "text-boundary": {"boundary": "text"},
    "video-first": {"placement": "video-first"},
    "budget-short": {"budget": "short"},
    "budget-long": {"budget": "long"},
    "equal-attention": {"equal_attention": True},
    "single-target-zero": {"single_target": True, "label_base": 0},
    "single-target-one": {"single_target": True, "label_base": 1},
    "8-frames": {"frames": 8},
    "24-frames": {"frames": 24},
    "full-permutations": {"orders": "full"},
}


def positional_configs(data: str | None, scales: list[int]) -> list[tuple[str, str, int]]:
    """(domain, bucket, P) to test: the synthetic set's, or the groups of ``--posbias-data`` as the
    manifest loader reads them (a leading BOM, a line that is not UTF-8), as the suites do."""
    if data:
        from ..data.manifest import load_manifest
        from ..errors import PosbiasError

        try:
            return [c for c in load_manifest(Path(data)).configurations() if c[2] in scales]
        except (OSError, PosbiasError):  # a manifest with no usable item: refused where its run starts
            return []
    from ..video.synthetic import configurations

    return [(d, b, P) for P in scales for d, b in configurations()]


def sampler_pairs(samplers: list[str], budgets: list[int]) -> list[tuple[int, str, str]]:
    """(budget, sampler a, sampler b) for every pair of the configured samplers; a sampler listed twice,
    or under two spellings (``fps=2``, ``fps=2.0``), counts once, as first written (with itself it has
    no flip to find, and the flip gate refuses that pair)."""
    from ..video.samplers import sampler_key

    unique: dict[tuple[str, str], str] = {}
    for s in samplers:
        unique.setdefault(sampler_key(s), s)
    return [(b, x, y) for b in budgets for x, y in itertools.combinations(unique.values(), 2)]


def phase_pairs(S: int) -> list[str]:
    """"s-t" for every pair of the S phases, then "any" (the consensus changes under some phase)."""
    return [f"{a}-{b}" for a, b in itertools.combinations(range(S), 2)] + ["any"]


def with_thresholds(run: Any, **thresholds: float) -> Any:
    """The run context ``run`` (the ``posbias_run`` fixture) with some gates' thresholds replaced,
    for a custom gate that is stricter (or looser) than the suites: e.g.
    ``positional_verdict(with_thresholds(posbias_run, meg=0.01), "meg", model, spec)``.

    The copy shares everything else with ``run`` (engine, generation cache, probe results
    memoized in this process), so the probe behind the stricter gate is not run again. The given
    thresholds take precedence over ``[tool.posbias.thresholds]``, the per-model tables and
    ``--posbias-threshold`` (config.PosbiasConfig.thresholds_for). Unknown gates or values out of
    range are a ConfigError naming them.
    """
    from ..config import validate_thresholds

    checked = validate_thresholds("with_thresholds()", thresholds)
    out = copy.copy(run)
    out.options = dataclasses.replace(run.options, threshold_overrides={**run.options.threshold_overrides, **checked})
    return out


# --------------------------------------------------------------------------- xdist groups


def model_id(spec: str) -> str:
    """A ``--model`` value as the suites' test ids show it (``suites/conftest.py``: the model's
    label with every run of other characters than ``[A-Za-z0-9_.:-]`` made one ``-``)."""
    from ..models.registry import model_label

    return re.sub(r"[^A-Za-z0-9_.:-]+", "-", model_label(spec))


def probe_group(nodeid: str, *, model_ids: Sequence[str], search_frames: int | None = None) -> str | None:
    """The probe group of a suite test, from its node id: under ``-n`` the tests that share a probe
    (or its videos) run on one worker (:mod:`.plugin.xdist_scheduler`), which computes it once.

    * positional: ``(model, domain, bucket)`` (P = 2 and 4 show the same videos); a layout variant
      is a group of its own;
    * phase / order / flip / fusion, parity answers, the option-order and sampling-phase searches:
      ``(model, "phase")``;
    * stressor suite: ``(model, frames, part)``, one group per part of the probe
      (:data:`.probes.stressor.PARTS`; :meth:`.run.context.RunContext.stressor`), the controls
      beside the clean repetition rate (``test_stressor_controls``) the ``controls`` part; a test
      without a frame count (the remedy, the stressor search) is at the first frame count
      ``search_frames``;
    * parity coverage: its positional group; parity repetition: the clean group at its frame count;
    * anything else (the slot-coverage search, the decoding sweep, users' own tests): None.

    The node id is read as ``suites/conftest.py`` builds it, ``<file>::<test>[<model id>-<parameter
    ids>]``, with ``model_ids`` the run's models as they appear there; the suite is the one whose
    test function ``<test>`` is (:func:`.gate_registry.suite_of_test`), whatever the file's name.
    """
    _, _, name = nodeid.partition("::")
    function, _, params = name.partition("[")
    params = params.removesuffix("]")
    spec = suite_of_test(function)
    if spec is None:
        return None
    suite = spec.module
    model = max((m for m in model_ids if params == m or params.startswith(m + "-")), key=len, default=None)
    if model is None:
        return None
    rest = params[len(model) + 1:]
    group = f"{XDIST_GROUP_PREFIX}{{}}|{model}"
    if suite == "test_positional":
        m = re.match(r"(.+?)-P\d+(?:-(.+))?$", rest)
        if m is None:
            return None
        if function.endswith("_variant") and m.group(2):
            return group.format("positional") + f"|{m.group(1)}|{m.group(2)}"
        return group.format("positional") + f"|{m.group(1)}"
    if suite == "test_phase_order":
        return group.format("phase")
    if suite == "test_parity":  # the candidate's side of a parity gate is its suite's probe
        if function == "test_parity_answers":
            return group.format("phase")  # the order gate's requests
        if function == "test_parity_coverage":
            m = re.match(r"(.+?)-P\d+$", rest)
            return group.format("positional") + f"|{m.group(1)}" if m else None
        m = re.match(r"(\d+)f$", rest)
        return group.format("stressor") + f"|{m.group(1)}|clean" if m else None  # the clean outputs
    first = search_frames if search_frames is not None else "first"
    if suite == "test_stressors":
        if function == "test_repetition_under_decoding_setting":  # a decoding sweep setting is a probe of its own
            return None
        m = re.match(r"(\d+)f(?:-(.+))?$", rest)
        part = m.group(2) if m and m.group(2) else "controls" if function == "test_stressor_controls" else "clean"
        return group.format("stressor") + f"|{m.group(1) if m else first}|{part}"
    if suite == "test_search":
        prop = {"test_search_option_order": "order", "test_search_sampling_phase": "phase",
                "test_search_stressor_repetition": "stressor"}.get(function, rest)
        if prop in ("order", "phase"):
            return group.format("phase")
        if prop == "stressor":
            return group.format("stressor") + f"|{first}|clean"
    return None


def shared_probes(nodeid: str, *, model_ids: Sequence[str], baseline_id: str | None = None,
                  parity_id: str | None = None, search_frames: int | None = None) -> frozenset[str]:
    """The probe results a suite test computes or reads that a test of another probe group may need
    too, named ``<kind>|<model id>|<what>`` (the scheduler holds a group back until the one
    computing such a result has finished):

    * a stressor group: the clean outputs ``stressor|<model>|<frames>|clean``, which every part reads;
    * other groups: ``positional|<model>|<domain-bucket>[|<variant>]`` or ``phase|<model>``;
    * ``baseline_id`` (for the positional, phase and stressor suites) and ``parity_id`` (for the
      parity gates): the same names for that model, shared by every tested model; a stressor-suite
      test also reads the baseline's part (its variants, its controls).

    Empty for a test of no probe group. The ids are as :func:`model_id` writes them."""
    group = probe_group(nodeid, model_ids=model_ids, search_frames=search_frames)
    if group is None:
        return frozenset()
    kind, model, *what = group.removeprefix(XDIST_GROUP_PREFIX).split("|")
    spec = suite_of_test(nodeid.partition("::")[2].partition("[")[0])
    suite = spec.module if spec is not None else ""
    others: list[str] = []
    if baseline_id and suite in ("test_positional", "test_phase_order", "test_stressors"):
        others.append(baseline_id)
    if parity_id and suite == "test_parity":
        others.append(parity_id)
    if kind == "stressor":
        frames, part = what
        out = {f"stressor|{m}|{frames}|clean" for m in (model, *others)}
        if baseline_id in others and suite == "test_stressors":
            out.add(f"stressor|{baseline_id}|{frames}|{part}")
        return frozenset(out)
    return frozenset("|".join([kind, m, *what]) for m in (model, *others))


# requests per video of the stressor probe's controls part: 8 count and pixel controls, 4
# visual-input controls, up to 7 genuine-frame counts
_STRESSOR_CONTROLS = 19


def group_weight(group: str, settings: Mapping[str, Mapping[str, Any]]) -> int:
    """The model calls a probe group makes at most (maximum sample sizes, every condition), from its
    name (:func:`probe_group`) and the probe settings; the scheduler hands out the heaviest first:

    * positional: ``groups × (P = 2 and P = 4 orders)`` of a configuration, ``groups × 4`` for a
      layout variant;
    * phase: ``items × (orderings × (samplers + phases + 1 re-run) + 2 phases + 2)`` (the flip,
      phase and order conditions in every ordering, the fusion conditions in one);
    * stressor part: ``videos ×`` its variants per video (Delete 1: one per frame, Reverse: 1,
      the others ``trials``; the clean group: the clean output; the controls group: the controls).

    A group of another kind, or a name this does not read, weighs 1 (one test)."""
    kind, *parts = group.removeprefix(XDIST_GROUP_PREFIX).split("|")
    try:
        if kind == "positional":
            st = settings["positional"]
            per = 4 if len(parts) > 2 else sum(int(P) for P in st["scales"])
            return int(st["groups"]) * per
        if kind == "phase":
            ph = settings["phase"]
            return int(ph["items"]) * (int(ph["orderings"]) * (len(ph["samplers"]) + int(ph["phases"]) + 1)
                                       + 2 * int(ph["phases"]) + 2)
        if kind == "stressor":
            st = settings["stressor"]
            frames, part = int(parts[1]), parts[2]
            per = {"clean": 1, "controls": _STRESSOR_CONTROLS, "delete1": frames,
                   "reverse": 1}.get(part, int(st["trials"]))
            return int(st["videos"]) * per
    except (KeyError, IndexError, TypeError, ValueError):
        return 1
    return 1
