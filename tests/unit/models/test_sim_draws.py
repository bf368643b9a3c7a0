"""The simulated models' draws (models.sim_draws): the set strata that drop round(m x) cells over every
prefix of the set and confuse round(m q) slots, and the unit uniforms that put the dose's share of
the synthetic set below the dose."""

from __future__ import annotations

import numpy as np
import pytest
from support.group_manifest import group_manifest

from pytest_posbias.models import sim_dose as SD
from pytest_posbias.models import sim_draws as SDR


@pytest.mark.parametrize(("dose", "P"), [("dose,meg=-0.02", 4), ("dose,meg=0.05", 4), ("dose,coverage=0.3", 2),
                                         ("dose,coverage=0.25", 4), ("dose,dpb=0.05", 2)])
def test_set_strata_drop_round_m_x_cells_over_every_prefix_of_the_set(tmp_path, dose, P):
    rng = np.random.default_rng(0)
    groups = [tuple(f"syn-leisure-short-{c:02d}" for c in rng.choice(10, P, replace=False)) for _ in range(40)]
    groups = list({tuple(sorted(g)): g for g in reversed(groups)}.values())[::-1]  # distinct sets, as build_set
    paths = group_manifest(tmp_path, groups)
    w = SD.slot_keep(SD.parse_dose(dose), P, 0.85)
    drops = np.zeros(P)
    for k, g in enumerate(paths, start=1):
        for j in range(P):
            order = g[j:] + g[:j]
            assert SDR.set_position(order) == (k - 1, (k - 1) * P + j)
            u = SDR.set_strata(order, w, 0.0)
            drops += [u(s, "keep") >= w[s] for s in range(P)]
        slope = len(set(w)) == P  # a DPB slope: whole drop patterns in their shares (quota method)
        for cls in {round(x, 12) for x in w}:  # the slots of equal w are one systematic sample
            slots = [s for s in range(P) if round(w[s], 12) == cls]
            planned = k * P * len(slots) * (1 - cls)
            assert abs(drops[slots].sum() - planned) <= (0.999 if slope else 0.5 + 1e-9), (k, slots, planned)
    # not a cyclic order of a listed group, or not in the manifest: the per-group strata instead
    assert SDR.set_position([paths[0][0], paths[0][0]]) is None
    assert SDR.set_strata([str(tmp_path / "videos" / "syn-leisure-short-98.mp4"), paths[0][0]], w[:2], 0.0) is None
    assert SDR.set_position(["/elsewhere/a.mp4", "/elsewhere/b.mp4"]) is None


def test_set_strata_confuse_round_m_q_slots(tmp_path):
    paths = group_manifest(tmp_path, [("a", "b", "c", "d"), ("a", "c", "e", "f"), ("b", "d", "e", "f")])
    q = 0.3
    confused = sum(SDR.set_strata(g[j:] + g[:j], [1.0] * 4, q)(s, "confuse") < q
                   for g in paths for j in range(4) for s in range(4))
    assert confused == round(3 * 16 * q)


def test_unit_uniforms_put_the_dose_share_of_the_synthetic_set_below_the_dose():
    from pytest_posbias.video.synthetic import configurations, make_scene, questions

    names = [f"syn-{d}-{b}-{k:02d}" for d, b in configurations() for k in range(10)]
    vids = [SDR.unit_index(f"/x/videos/{n}.mp4") for n in names]
    assert None not in vids and len(set(vids)) == len(names) == 60
    for stream in ("repetition", "susceptible"):
        for share in (0.1, 0.25, 0.5):
            got = np.mean([SDR.unit_uniform(stream, i, "") < share for i in vids])
            assert abs(got - share) <= 3 / 60  # equidistributed, not a binomial draw (sd 0.056 at 60)
    qs = [q.question for q in questions(make_scene("s", "cooking", "short", seed=3))]
    items = [SDR.unit_index(f"/x/{n}.mp4", q) for n in names for q in qs]
    assert len(set(items)) == 360
    for stream in ("flip", "phase", "order"):
        got = np.mean([SDR.unit_uniform(stream, i, "") < 0.3 for i in items])
        assert abs(got - 0.3) <= 3 / 360
    assert SDR.unit_index("/x/my-video.mp4") is None and SDR.unit_index(f"/x/{names[0]}.mp4", "Is it red?") is None
    u = SDR.unit_uniform("flip", None, "abc")
    assert 0 <= u < 1 and u == SDR.unit_uniform("flip", None, "abc") != SDR.unit_uniform("flip", None, "abd")
