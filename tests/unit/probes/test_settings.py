"""One source of probe defaults: the probe settings (``probes/settings.py`` ``DEFAULTS``). A spec
built with no arguments, a spec built from the default settings and the settings table agree."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_posbias.probes.phase import PhaseSpec
from pytest_posbias.probes.positional import PositionalSpec, with_overrides
from pytest_posbias.probes.settings import DEFAULTS, settings_for
from pytest_posbias.probes.stressor import StressorSpec


def _shared_fields(spec: object, probe: str) -> dict[str, tuple[object, object]]:
    """Field name -> (spec default, settings default) for the keys both have."""
    out = {}
    for f in dataclasses.fields(spec):  # type: ignore[arg-type]
        if f.name in DEFAULTS[probe] and f.default is not dataclasses.MISSING:
            out[f.name] = (f.default, DEFAULTS[probe][f.name])
    return out


@pytest.mark.parametrize(("spec", "probe", "at_least"), [
    (PositionalSpec, "positional", {"groups", "resolution", "temperature", "top_p", "max_new_tokens", "orders"}),
    (PhaseSpec, "phase", {"items", "budget", "phases", "orderings", "samplers", "resolution", "max_new_tokens"}),
    (StressorSpec, "stressor", {"videos", "trials", "attack_cap", "max_new_tokens", "resolution"}),
])
def test_spec_defaults_are_the_settings_defaults(spec, probe, at_least):
    shared = _shared_fields(spec, probe)
    assert at_least <= set(shared)
    for name, (spec_default, setting) in shared.items():
        if isinstance(setting, list) and not isinstance(spec_default, tuple):
            setting = setting[0]  # the settings list label bases or frame counts; a spec runs one, the first
        assert spec_default == (tuple(setting) if isinstance(setting, list) else setting), name


def test_default_specs_equal_specs_built_from_the_default_settings():
    assert PhaseSpec.from_settings(settings_for("phase")) == PhaseSpec()
    frames = DEFAULTS["stressor"]["frames"][0]
    assert StressorSpec.from_settings(settings_for("stressor"), frames) == StressorSpec()
    assert StressorSpec().frames == frames
    for bucket, key in (("short", "frames_short"), ("long", "frames_long")):
        spec = PositionalSpec("news", bucket, 4)
        assert with_overrides(spec, settings_for("positional")) == spec
        assert spec.n_frames == DEFAULTS["positional"][key]
        assert spec.variant() == "main"  # the defaults are the paper's main setting
    assert PositionalSpec("news", "short", 4).label_base == DEFAULTS["positional"]["label_base"]


def test_settings_reach_the_specs():
    ph = PhaseSpec.from_settings(settings_for("phase", {"items": 7, "samplers": ["left", "fps"], "orderings": 3}))
    assert (ph.items, ph.samplers, ph.orderings, ph.phases) == (7, ("left", "fps"), 3, DEFAULTS["phase"]["phases"])
    st = StressorSpec.from_settings(settings_for("stressor", {"videos": 5, "trials": 4}), 32)
    assert (st.videos, st.trials, st.frames, st.attack_cap) == (5, 4, 32, DEFAULTS["stressor"]["attack_cap"])
    pos = with_overrides(PositionalSpec("news", "long", 2), settings_for("positional", {"groups": 3, "frames_long": 8}))
    assert (pos.groups, pos.n_frames, pos.variant()) == (3, 8, "8f")
    assert PhaseSpec.from_settings({}) == PhaseSpec()  # a key the settings lack keeps its default


def test_every_positional_setting_that_the_table_accepts_reaches_the_spec():
    """A ``[tool.posbias.probes.positional]`` key that validates also changes the spec: none is accepted and ignored."""
    spec = PositionalSpec(P=2, bucket="short", domain="domestic")
    changed = with_overrides(spec, settings_for("positional", {"label_base": 1, "boundary": "text", "placement": "video-first"}))
    assert (changed.label_base, changed.boundary, changed.placement) == (1, "text", "video-first")


@pytest.mark.parametrize("samplers", [["qwen-vl-utils:fps=2", "qwen-vl-utils:fps=2.0"],
                                      ["qwen-vl-utils:fps=2,min_frames=4", "qwen-vl-utils:min_frames=4,fps=2"]])
def test_two_spellings_of_one_sampler_are_not_two_samplers(samplers):
    """Sampler specs that parse to the same preset and knobs count as one: fewer than 2 samplers is a ConfigError."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.probes.settings import validate_probe_settings
    from pytest_posbias.video.samplers import parse_spec

    (p1, k1), (p2, k2) = (parse_spec(s) for s in samplers)
    assert p1 is p2 and k1 == k2  # the same sampler
    with pytest.raises(ConfigError, match="at least 2 distinct samplers"):
        validate_probe_settings("phase", {"samplers": samplers}, where="[tool.posbias.probes.phase]")


def test_one_sampler_listed_twice_is_refused():
    """The same sampler string twice is a ConfigError: the flip gate needs two samplers to compare."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.probes.settings import validate_probe_settings

    with pytest.raises(ConfigError, match="at least 2 distinct samplers"):
        validate_probe_settings("phase", {"samplers": ["left", "left"]}, where="[tool.posbias.probes.phase]")


def test_a_phase_search_space_of_phase_0_only_is_refused():
    """max_denominator = 1 leaves phase 0 alone (the reference): a ConfigError before any model call,
    not a phase search with nothing to perturb."""
    from pytest_posbias.errors import ConfigError
    from pytest_posbias.probes.settings import validate_probe_settings

    with pytest.raises(ConfigError, match="max_denominator must be an integer >= 2"):
        validate_probe_settings("search", {"max_denominator": 1}, where="[tool.posbias.probes.search]")
