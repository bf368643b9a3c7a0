"""The report's first screen: which configuration a verdict's row names."""

from __future__ import annotations

from pytest_posbias.report.front import configuration


def test_a_row_names_the_positional_spec_the_searched_property_or_the_frame_count():
    assert configuration({"extra": {"spec": "cooking-short-P4", "gate": "meg"}}) == "cooking-short-P4"
    # the search gates: one row each, by the property searched and its budget (the heavy variant
    # searches the same property with a larger budget), not "search" for every row
    rows = [configuration({"name": f"{p} search success rate (budget {b} queries)",
                           "extra": {"gate": "search", "property": p, "budget": b}})
            for p, b in (("order", 32), ("phase", 32), ("order", 256))]
    assert rows == ["order, budget 32", "phase, budget 32", "order, budget 256"]
    assert configuration({"name": "flip rate at 16 frames", "extra": {"gate": "phase"}}) == "16 frames"
    assert configuration({"name": "attack success rate", "extra": {"gate": "attack"}}) == "attack"
