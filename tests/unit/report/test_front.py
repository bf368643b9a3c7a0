"""The report's first screen: which configuration a verdict's row names."""

from __future__ import annotations

from pytest_posbias.report.front import configuration


def test_a_row_names_the_positional_spec_the_searched_property_or_the_frame_count():
    assert configuration({"extra": {"spec": "cooking-short-P4", "gate": "meg"}}) == "cooking-short-P4"
    # two search gates: one row each, by the property searched (not "search" twice)
    rows = [configuration({"name": f"{p} search success rate (budget 32 queries)",
                           "extra": {"gate": "search", "property": p}}) for p in ("option_order", "sampling_phase")]
    assert rows == ["option_order", "sampling_phase"]
    assert configuration({"name": "flip rate at 16 frames", "extra": {"gate": "phase"}}) == "16 frames"
    assert configuration({"name": "attack success rate", "extra": {"gate": "attack"}}) == "attack"
