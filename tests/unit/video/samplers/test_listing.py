"""``posbias samplers`` (``video.samplers.listing``): every preset and knob listed, each listed default
accepted back in the spec syntax the listing documents, the JSON form the same listing, and the
conventions the ones the phase settings accept."""

from __future__ import annotations

import json
import subprocess
import sys

from pytest_posbias.probes.settings import SAMPLERS
from pytest_posbias.video.samplers import PRESETS, parse_spec
from pytest_posbias.video.samplers.listing import describe


def test_every_preset_and_knob_is_listed_with_its_upstream():
    d = describe()
    assert list(d["presets"]) == list(PRESETS)
    for name, listed in d["presets"].items():
        assert listed["upstream"] == PRESETS[name].upstream and listed["upstream"]
        assert list(listed["knobs"]) == list(PRESETS[name].knobs)


def test_each_listed_default_is_accepted_back_as_a_knob_value():
    checked = 0
    for name, listed in describe()["presets"].items():
        for knob, v in listed["knobs"].items():
            if v["default"] is None:
                continue
            _, knobs = parse_spec(f"{name}:{knob}={v['default']}")
            assert knobs[knob] == v["default"], (name, knob)
            assert "choices" not in v or str(v["default"]) in v["choices"]
            checked += 1
    assert checked  # the loop checked some default


def test_the_conventions_are_the_non_preset_samplers_the_settings_accept():
    assert list(describe()["conventions"]) == list(SAMPLERS)


def test_the_command_prints_the_listing_as_text_and_as_json():
    run = [sys.executable, "-m", "pytest_posbias.cli", "samplers"]
    as_json = subprocess.run([*run, "--json"], capture_output=True, text=True, check=True).stdout
    assert json.loads(as_json) == json.loads(json.dumps(describe()))
    text = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    for name, listed in describe()["presets"].items():
        assert f"{name}\n  upstream: {listed['upstream']}" in text
        for knob in listed["knobs"]:
            assert f"  {knob} (" in text
