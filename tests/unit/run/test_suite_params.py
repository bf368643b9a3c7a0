"""A suite test's probe group and the shared results it reads, from its node id (``run.suite_params``)."""

from __future__ import annotations

from pytest_posbias.run.suite_params import XDIST_GROUP_PREFIX, probe_group


def _group(nodeid: str, *, frames: int | None = 16) -> str | None:
    return probe_group(nodeid, model_ids=["sim:primacy", "sim:unbiased"], search_frames=frames)


def test_gates_of_one_configuration_share_a_group_and_other_probes_do_not():
    pos = "suites/test_positional.py::"
    dpb2 = _group(pos + "test_dpb[sim:primacy-cooking-short-P2]")
    dpb4 = _group(pos + "test_dpb[sim:primacy-cooking-short-P4]")
    meg4 = _group("test_positional.py::test_meg[sim:primacy-cooking-short-P4]")
    other = _group(pos + "test_dpb[sim:primacy-cooking-long-P2]")
    model2 = _group(pos + "test_dpb[sim:unbiased-cooking-short-P2]")
    variant = _group(pos + "test_meg_variant[sim:primacy-cooking-short-P4-8-frames]")
    assert dpb2 == dpb4 == meg4 and dpb2 is not None and dpb2.startswith(XDIST_GROUP_PREFIX)
    assert len({dpb2, other, model2, variant}) == 4
    assert variant == _group(pos + "test_dpb_variant[sim:primacy-cooking-short-P4-8-frames]")
    ph = "suites/test_phase_order.py::"
    phase = {_group(ph + t) for t in ("test_order_flip[sim:primacy]", "test_phase_flip[sim:primacy-phase-0-1]",
                                      "test_sampler_flip[sim:primacy-left-vs-midpoint@8f]")}
    assert len(phase) == 1 and None not in phase
    st = "suites/test_stressors.py::"
    # the stressor probe in parts: the clean outputs (repetition, remedy) and each stressor's variants
    s16 = {_group(st + t) for t in ("test_clean_repetition[sim:primacy-16f]",
                                    "test_requery_remedy_recovers_flagged_outputs[sim:primacy]")}
    add1 = {_group(st + t) for t in ("test_stressor_amplification[sim:primacy-16f-add1]",
                                     "test_attack_success_rate[sim:primacy-16f-add1]")}
    reverse = _group(st + "test_attack_success_rate[sim:primacy-16f-reverse]")
    controls = _group(st + "test_stressor_controls[sim:primacy-16f]")  # a part of their own, not the clean outputs'
    assert len(s16) == len(add1) == 1 and len(s16 | add1 | {reverse, controls}) == 4
    assert None not in s16 | add1 | {reverse, controls} and controls.endswith("|16|controls")
    assert _group(st + "test_clean_repetition[sim:primacy-32f]") not in s16
    assert _group(st + "test_attack_success_rate[sim:primacy-32f-add1]") not in add1
    assert _group(st + "test_repetition_under_decoding_setting[sim:primacy-r1.1]") is None  # a probe of its own
    srch = "suites/test_search.py::"
    assert _group(srch + "test_search_option_order[sim:primacy]") in phase  # the phase probe's items
    assert _group(srch + "test_search_heavy[sim:primacy-order]") in phase
    assert _group(srch + "test_search_stressor_repetition[sim:primacy]") in s16  # its clean outputs, first frame count
    assert _group(srch + "test_search_slot_coverage[sim:primacy]") is None  # groups of every configuration
    assert _group("tests/test_mine.py::test_x[sim:primacy]") is None
    # a renamed copy of a suite groups as the suite: the suite is its test functions', not its file's
    assert _group("checks/test_my_stressors.py::test_clean_repetition[sim:primacy-16f]") in s16
    assert _group("checks/test_release.py::test_meg[sim:primacy-cooking-short-P4]") == dpb2
    assert _group(pos + "test_dpb[sim:primacy-no-groups]") is None  # the skipped "no groups" param
    assert _group(pos + "test_dpb[other-model-cooking-short-P2]") is None  # not a model of this run


def test_two_spellings_of_one_preset_sampler_are_paired_once():
    """``lmms-eval:fps=2`` and ``lmms-eval:fps=2.0`` are one sampler: never a pair (its flips are 0 by construction)."""
    from pytest_posbias.run.suite_params import sampler_pairs

    pairs = sampler_pairs(["left", "lmms-eval:fps=2", "lmms-eval:fps=2.0", "midpoint"], [8])
    assert pairs == [(8, "left", "lmms-eval:fps=2"), (8, "left", "midpoint"), (8, "lmms-eval:fps=2", "midpoint")]


def test_positional_configs_read_the_manifest_as_the_loader_does(tmp_path):
    """A manifest saved with a BOM (its first line a group) keeps that group's configuration, as the manifest loader does."""
    import json

    from pytest_posbias.run.suite_params import positional_configs

    rows = [{"type": "group", "id": "g0", "domain": "leisure", "bucket": "short", "P": 4, "videos": list("abcd")}]
    for v in "abcd":
        (tmp_path / f"{v}.mp4").write_bytes(b"\0" * 64)
        rows.append({"type": "video", "id": v, "path": str(tmp_path / f"{v}.mp4"), "domain": "leisure",
                     "bucket": "short", "references": ["x"]})
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows).encode())
    assert positional_configs(str(manifest), [2, 4]) == [("leisure", "short", 4)]
