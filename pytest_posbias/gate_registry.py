"""The gate registry: what each gate is, one :class:`GateSpec` record per gate, in one place.

A gate is a decision on one statistic of one probe, described in full by its record (the fields of
:class:`GateSpec`). Everything else derives from these records: the ``[tool.posbias]`` validation
(:mod:`.config`), the markers the suites register, the terminal summary's suite titles, the ``-n``
scheduler's probe groups (:mod:`.run.suite_params`), ``posbias plan``, the reference pages and ``posbias gates``.

Adding a gate is one record in :data:`GATE_SPECS`, one probe hook (a function from the run
context to a :class:`~.stats.Verdict`, as :func:`.gates.positional_verdict`) and one suite test
marked with the record's marker (CONTRIBUTING.md, "Adding a gate"); ``tests/unit/test_gate_registry.py``
checks that every record has its suite test and that every marker is registered.

Default thresholds come from the papers' tables (docs/concepts/gates.md). Two are this package's
own: ``search = 0.15``, the phase paper's flip bound (an item the search breaks is one some option
order, phase or stressor flips), stricter than the attack gate's 25%; and the parity gates' 0.05, the
drift the baseline margins allow between two releases (docs/design.md section 5, "Parity").
:attr:`GateSpec.threshold_range` keeps a gate able to pass some models and fail others (a rate
ceiling of 0 cannot be certified from a finite sample).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from .errors import ConfigError

Side = Literal["both", "upper", "lower"]
"""Which values pass: ``both`` |x| <= t, ``upper`` x <= t, ``lower`` x >= t."""
Worse = Literal["abs", "higher", "lower", "binary", "amplification"]
"""How a paired comparison against the baseline orients "worse" (:meth:`.run.context.RunContext.baseline_gate`)."""
Bootstrap = Literal["percentile", "bca"]
Interval = tuple[float, float, bool, bool]
"""(low, high, low closed, high closed)."""


@dataclass(frozen=True)
class SuiteSpec:
    """One ready-made suite: its test module in ``pytest_posbias/suites/``, its title in the
    terminal summary and the report, and the kind of manifest item its tests need (``positional``
    groups, ``phase`` multiple-choice items, ``stressor`` videos; None when each test checks its
    own, as the property search does)."""

    module: str
    title: str
    data: str | None
    tests_data: tuple[tuple[str, str], ...] = ()
    """(test function, kind of manifest item) for a suite whose tests read different suites' data."""
    other_tests: tuple[str, ...] = ()
    """The suite's test functions that give no gate's verdict (the gates' records name theirs)."""

    def data_for(self, test: str) -> str | None:
        """The kind of manifest item the suite's test function ``test`` needs."""
        return dict(self.tests_data).get(test, self.data)

    @property
    def filename(self) -> str:
        """``test_positional.py``: the file name its node ids start with."""
        return f"{self.module}.py"


@dataclass(frozen=True)
class GateSpec:
    """One gate (module docstring). ``statistic`` is the name of the gated value as verdicts and
    error messages show it; ``value_range`` the interval it lies in (a rate or a mean coverage in
    [0, 1]; DPB and MEG, weighted means of per-slot coverages with weights in [-1, 1], and the
    differences of two rates in [-1, 1]); ``threshold_range`` the thresholds under which the gate
    still passes some models and fails others; ``worse`` the paired comparison against the baseline
    (None: the gate has no baseline form); ``bootstrap`` the cluster-bootstrap interval of a mean
    gate (:func:`.stats.cluster_bootstrap`); ``tests`` the suite test functions whose verdicts are
    the gate's; ``probe`` the probe whose units it draws (``posbias plan`` sizes it); ``fixed``: a
    fixed-sample design (the gate cannot stop early, nor can the other gates of its probe, whose
    units it needs in full)."""

    name: str
    suite: str
    marker: str
    description: str
    side: Side
    threshold: float
    margin: float
    statistic: str
    value_range: tuple[float, float]
    threshold_range: Interval
    worse: Worse | None
    bootstrap: Bootstrap = "percentile"
    tests: tuple[str, ...] = field(kw_only=True)
    probe: str = field(kw_only=True)
    fixed: bool = field(default=False, kw_only=True)


SUITE_SPECS: tuple[SuiteSpec, ...] = (
    SuiteSpec("test_positional", "positional bias (DPB, MEG, coverage)", "positional"),
    SuiteSpec("test_phase_order", "frame phase and option order", "phase"),
    SuiteSpec("test_stressors", "temporal stressors and repetition", "stressor",
              other_tests=("test_stressor_controls",)),
    SuiteSpec("test_search", "property search (minimal counterexamples)", None),
    # the parity suite's tests read the other suites' data: each test the kind of data of its probe
    SuiteSpec("test_parity", "parity against a reference deployment", None,
              (("test_parity_answers", "phase"), ("test_parity_coverage", "positional"),
               ("test_parity_repetition", "stressor"))),
)

_OPEN: Interval = (0.0, 1.0, False, False)
_PARITY = ("parity suite (--posbias-parity REFERENCE): answers, coverage and repetition of the tested deployment "
           "against a reference")
_RATE = (0.0, 1.0)
_SIGNED = (-1.0, 1.0)

GATE_SPECS: tuple[GateSpec, ...] = (
    GateSpec("dpb", "test_positional", "dpb", "positional suite: Directional Positional Bias gate (|DPB| <= threshold)",
             "both", 0.05, 0.02, "DPB", _SIGNED, _OPEN, "abs",
             tests=("test_dpb", "test_dpb_variant"), probe="positional"),
    GateSpec("meg", "test_positional", "meg", "positional suite: Middle-Edge Gap gate, P = 4 (|MEG| <= threshold)",
             "both", 0.02, 0.01, "MEG", _SIGNED, _OPEN, "abs",
             tests=("test_meg", "test_meg_variant"), probe="positional"),
    GateSpec("coverage", "test_positional", "coverage", "positional suite: mean per-video coverage floor",
             "lower", 0.25, 0.05, "mean coverage", _RATE, (0.0, 1.0, False, True), "lower",
             tests=("test_coverage",), probe="positional"),
    GateSpec("contamination", "test_positional", "contamination",
             "positional suite: slot contamination rate (TF-IDF proxy)",
             "upper", 0.10, 0.05, "contaminated-slot rate", _RATE, _OPEN, "higher",
             tests=("test_contamination",), probe="positional"),
    GateSpec("flip", "test_phase_order", "flip", "phase/order suite: answer flips between deployed frame samplers",
             "upper", 0.15, 0.05, "flip rate", _RATE, _OPEN, "binary",
             tests=("test_sampler_flip",), probe="phase"),
    GateSpec("phase", "test_phase_order", "phase",
             "phase/order suite: answer flips between sampling phases of one grid",
             "upper", 0.15, 0.05, "flip rate", _RATE, _OPEN, "binary",
             tests=("test_phase_flip",), probe="phase"),
    # ``order`` is pytest-order's marker, so the option-order gate is selected with ``-m option_order``
    GateSpec("order", "test_phase_order", "option_order",
             "phase/order suite: answer flips across option orderings (gate order)",
             "upper", 0.15, 0.05, "flip rate", _RATE, _OPEN, "binary",
             tests=("test_order_flip",), probe="phase"),
    GateSpec("fusion", "test_phase_order", "fusion",
             "phase/order suite: PhaseFusion vs single pass under an origin shift",
             "upper", 0.0, 0.05, "change-rate difference", _SIGNED, (-1.0, 1.0, False, False), "binary",
             tests=("test_phasefusion_under_origin_shift",), probe="phase-fusion", fixed=True),
    GateSpec("equivalence", "test_phase_order", "equivalence",
             "phase/order suite: PhaseFusion (S x b) accuracy equivalent to one pass at 4b frames (TOST, certify-type)",
             "both", 0.025, 0.025, "accuracy difference", _SIGNED, _OPEN, None,
             tests=("test_phasefusion_accuracy_equivalent_to_one_pass_at_4b",), probe="phase-fusion", fixed=True),
    GateSpec("repetition", "test_stressors", "repetition", "stressor suite: output repetition rate on clean videos",
             "upper", 0.15, 0.05, "repetition rate", _RATE, _OPEN, "binary",
             tests=("test_clean_repetition", "test_repetition_under_decoding_setting",
                    "test_requery_remedy_recovers_flagged_outputs"), probe="stressor"),
    # BCa: the per-video amplification (a share minus a rare 0/1 clean indicator) is skewed enough
    # to make the percentile interval anti-conservative (measured by benchmarks/calibration.py)
    GateSpec("stressor", "test_stressors", "stressor",
             "stressor suite: repetition amplification under temporal stressors",
             "upper", 0.10, 0.05, "repetition-rate increase", _SIGNED, (0.0, 1.0, True, False), "amplification",
             bootstrap="bca",
             tests=("test_stressor_amplification",), probe="stressor", fixed=True),
    GateSpec("attack", "test_stressors", "attack", "stressor suite: black-box repetition attack success rate",
             "upper", 0.25, 0.10, "attack success rate", _RATE, _OPEN, None,
             tests=("test_attack_success_rate",), probe="stressor"),
    GateSpec("search", "test_search", "search",
             "search suite: share of items a hypothesis property search breaks within its query budget "
             "(minimal counterexamples)",
             "upper", 0.15, 0.10, "share of items broken", _RATE, _OPEN, "binary",
             tests=("test_search_option_order", "test_search_stressor_repetition", "test_search_sampling_phase",
                    "test_search_slot_coverage", "test_search_heavy"), probe="search", fixed=True),
    # the parity gates are paired comparisons with the reference already (their margins are
    # validated but unused: with --posbias-baseline they keep their own thresholds); differences of
    # paired shares, so 0 ("no more change than the floor / no drop") is a valid threshold
    GateSpec("parity", "test_parity", "parity", _PARITY, "upper", 0.05, 0.05,
             "changed-answer share minus the reference's re-run floor", _SIGNED, (0.0, 1.0, True, False), None,
             tests=("test_parity_answers",), probe="phase", fixed=True),
    GateSpec("parity_coverage", "test_parity", "parity", _PARITY, "upper", 0.05, 0.05,
             "coverage drop against the reference", _SIGNED, (0.0, 1.0, True, False), None,
             tests=("test_parity_coverage",), probe="positional", fixed=True),
    GateSpec("parity_repetition", "test_parity", "parity", _PARITY, "upper", 0.05, 0.05,
             "repetition-rate increase against the reference", _SIGNED, (0.0, 1.0, True, False), None,
             tests=("test_parity_repetition",), probe="stressor", fixed=True),
)

GATES: Mapping[str, GateSpec] = MappingProxyType({g.name: g for g in GATE_SPECS})
"""Gate name -> record, in the suites' order (iterating gives the gate names)."""
SUITES: Mapping[str, SuiteSpec] = MappingProxyType({s.module: s for s in SUITE_SPECS})
"""Suite module name (``test_positional``) -> record, positional first."""

# Markers of the suites that select no gate.
OTHER_MARKERS: Mapping[str, str] = MappingProxyType(
    {"slow": "long end-to-end check; runs in CI, deselect with -m 'not slow'"})


def markers() -> dict[str, str]:
    """Every marker the suites register (``-m NAME``) with its help line: the gates' markers in
    :data:`GATE_SPECS` order, then :data:`OTHER_MARKERS`."""
    return {**{g.marker: g.description for g in GATE_SPECS}, **OTHER_MARKERS}


def paired_direction(gate: str) -> Worse:
    """The gate's paired comparison against the baseline (:attr:`GateSpec.worse`); ConfigError
    for an unknown gate or one that has none."""
    if gate not in GATES:
        raise ConfigError(f"unknown gate {gate!r}; known gates: {', '.join(GATES)}")
    worse = GATES[gate].worse
    if worse is None:
        raise ConfigError(f"the {gate} gate has no paired comparison against a baseline")
    return worse


def suite_of_test(function: str) -> SuiteSpec | None:
    """The ready-made suite whose test function is named ``function`` (a gate's test or one of
    :attr:`SuiteSpec.other_tests`), whatever file collects it; None for any other test."""
    if (gate := gate_of_test(function)) is not None:
        return SUITES[gate.suite]
    return next((s for s in SUITE_SPECS if function in s.other_tests), None)


def gate_of_test(function: str) -> GateSpec | None:
    """The gate whose verdicts the suite test function ``function`` gives; None for a suite test
    that gives none (the stressor controls) and for any other test."""
    return next((g for g in GATE_SPECS if function in g.tests), None)


def suite_of_module(module: str) -> SuiteSpec | None:
    """The suite defined by a module or file stem (``test_positional``, also a scaffolded
    folder's re-exporting ``test_positional.py``); None for any other test module."""
    return SUITES.get(module)


__all__ = ["GATES", "GATE_SPECS", "OTHER_MARKERS", "SUITES", "SUITE_SPECS", "Bootstrap", "GateSpec", "Interval", "Side",
           "SuiteSpec", "Worse", "gate_of_test", "markers", "paired_direction", "suite_of_module", "suite_of_test"]
