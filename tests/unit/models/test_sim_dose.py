"""Dose-controlled simulated models (``sim:dose,GATE=VALUE``): parsing, the formulas behind the
doses, and the achieved metric through the real probes."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from support.group_manifest import group_manifest

from pytest_posbias.errors import ConfigError, ModelLoadError
from pytest_posbias.models import sim_dose as SD
from pytest_posbias.models import sim_draws as SDR
from pytest_posbias.models.registry import resolve
from pytest_posbias.models.sim import SimBackend, check_profile
from pytest_posbias.run_options import RunOptions
from pytest_posbias.video import stressors as ST
from pytest_posbias.video.frames import FrameSpec, FrameStore, Source
from pytest_posbias.video.sampling import frame_indices, polyphase_grids


def test_parse_orders_the_gates_and_gives_a_canonical_string():
    d = SD.parse_dose("dose,order=0.3, meg = -0.05,flip=-0")
    assert d.targets == (("meg", -0.05), ("flip", 0.0), ("order", 0.3))
    assert d.canonical() == "dose,meg=-0.05,flip=0.0,order=0.3"
    assert d.get("dpb") is None and d.get("meg") == -0.05
    assert SD.parse_dose(d.canonical()) == d


@pytest.mark.parametrize(("profile", "needle"), [
    ("dose,foo=0.1", "unknown gate 'foo'; allowed gates: dpb, meg"),
    ("dose,meg=abc", "meg='abc' is not a number"),
    ("dose,meg=-0.5", "meg=-0.5 is outside [-0.4, 0.4]"),
    ("dose,flip=1.5", "flip=1.5 is outside [0, 1]"),
    ("dose,coverage=0.9", "coverage=0.9 is outside [0, 0.47]"),
    ("dose,phase=nan", "phase=nan is outside"),
    ("dose,meg", "'meg' is not GATE=VALUE"),
    ("dose,meg=0.1,meg=0.2", "gate 'meg' is given twice"),
    ("dose,stressor=0.5,attack=0.2", "stressor=0.5 and attack=0.2 cannot hold together"),
    ("dose,attack=0.995", "needs the stressor gate too"),
])
def test_bad_doses_name_the_gate_and_what_is_allowed(profile, needle):
    with pytest.raises(ConfigError) as exc:
        SD.parse_dose(profile)
    assert needle in str(exc.value)
    with pytest.raises(ConfigError):
        SimBackend(profile, FrameStore())
    with pytest.raises(ModelLoadError) as exc2:  # --posbias-model resolution stops the run at start
        resolve(f"sim:{profile}")
    assert needle in str(exc2.value) and f"--posbias-model sim:{profile}" in str(exc2.value)


def test_profiles_and_doses_resolve_and_the_placeholder_entry_does_not():
    assert resolve("sim:dose,meg=-0.05").target == "dose,meg=-0.05"
    assert resolve("sim:middle-weak").target == "middle-weak"
    for bad in ("dose,GATE=VALUE[,...]", "nonsense", "dosex"):
        with pytest.raises(ConfigError):
            check_profile(bad)


def test_the_revision_carries_the_dose_so_the_cache_never_mixes_doses():
    store = FrameStore()
    a = SimBackend("dose,meg=-0.05", store).identity()
    b = SimBackend("dose,meg=-0.1", store).identity()
    a2 = SimBackend("dose,meg=-0.05", store).identity()
    u = SimBackend("unbiased", store).identity()
    assert a == a2
    assert a["revision"] != b["revision"] and a["revision"].endswith("-dose,meg=-0.05")
    assert a["model_id"] == "sim:dose,meg=-0.05" and u["revision"] != a["revision"]


def test_expected_dpb_matches_a_direct_enumeration_and_the_p2_closed_form():
    # P = 2: E[DPB] = w2(1 − w1) − w1(1 − w2) + (1 − w1)(1 − w2)·(+1: slot 2, the larger w, is rescued)
    assert SD.expected_dpb([0.7, 0.9]) == pytest.approx(0.2 + 0.03)
    assert SD.kept_share([0.7, 0.9]) == pytest.approx([0.7, 0.93])
    # P = 4 against a Monte Carlo draw of the Bernoulli slots with the rescue of the largest-w slots
    for w in ([0.5, 0.7, 0.8, 1.0], [0.3, 0.3, 0.6, 0.6]):
        rng = np.random.default_rng(1)
        B = rng.random((200_000, 4)) < np.array(w)
        none = ~B.any(axis=1)
        best = np.flatnonzero(np.array(w) == max(w))
        B[np.flatnonzero(none), rng.choice(best, size=int(none.sum()))] = True
        alpha = np.array([-1, -1 / 3, 1 / 3, 1])
        mc = ((B * alpha).sum(axis=1) / B.sum(axis=1)).mean()
        assert SD.expected_dpb(w) == pytest.approx(mc, abs=0.004)
        assert SD.kept_share(w) == pytest.approx(B.mean(axis=0), abs=0.004)


@pytest.mark.parametrize("target", [-0.3, -0.05, 0.08, 0.15, 0.5])
@pytest.mark.parametrize("P", [2, 4])
def test_dpb_keep_probabilities_solve_the_target_and_leave_meg_at_zero(target, P):
    w = SD.slot_keep(SD.parse_dose(f"dose,dpb={target}"), P, 0.8)
    assert SD.expected_dpb(w) == pytest.approx(target, abs=1e-9)
    assert max(w) == pytest.approx(1.0) and min(w) >= 0.0
    if P == 2:
        assert w == pytest.approx([1 - target, 1.0] if target > 0 else [1.0, 1 + target])
    else:  # a linear slope: (w2 + w3)/2 − (w1 + w4)/2 = 0
        assert (w[1] + w[2]) / 2 - (w[0] + w[3]) / 2 == pytest.approx(0.0, abs=1e-12)


def test_meg_and_coverage_keep_probabilities():
    mu = 0.8
    assert SD.slot_keep(SD.parse_dose("dose,meg=-0.2"), 4, mu) == pytest.approx([1, 0.75, 0.75, 1])
    assert SD.slot_keep(SD.parse_dose("dose,meg=0.2"), 4, mu) == pytest.approx([0.75, 1, 1, 0.75])
    assert SD.slot_keep(SD.parse_dose("dose,meg=-0.2"), 2, mu) == [1.0, 1.0]  # MEG is P = 4 only
    # coverage alone: no rescue, w = c/μ
    assert not SD.uses_rescue(SD.parse_dose("dose,coverage=0.4"))
    assert SD.slot_keep(SD.parse_dose("dose,coverage=0.4"), 2, mu) == pytest.approx([0.5, 0.5])
    assert SD.slot_keep(SD.parse_dose("dose,coverage=0.3"), 4, mu) == pytest.approx([0.375] * 4)
    assert SD.uses_rescue(SD.parse_dose("dose,meg=-0.1"), 4)
    assert not SD.uses_rescue(SD.parse_dose("dose,meg=-0.1"), 2)  # MEG is P = 4 only


@pytest.mark.parametrize(("profile", "first", "second", "why"), [
    ("dose,coverage=0.25,meg=-0.02", "meg", "coverage", "rescue MEG needs"),
    ("dose,dpb=0.1,meg=-0.05", "dpb", "meg", "DPB slope is solved on top of the MEG shares"),
    ("dose,coverage=0.3,dpb=0.1", "dpb", "coverage", "rescue DPB needs"),
    ("dose,contamination=0.2,meg=0.05", "meg", "contamination", "scales the slot coverages"),
    ("dose,contamination=0.2,dpb=0.05", "dpb", "contamination", "changes the slot coverages"),
    ("dose,contamination=0.2,coverage=0.3", "coverage", "contamination", "lowers the coverage"),
])
def test_two_positional_doses_are_refused_naming_both_gates_and_why(profile, first, second, why):
    with pytest.raises(ConfigError) as exc:
        SD.parse_dose(profile)
    msg = str(exc.value)
    assert f"{first} and {second} cannot be dosed together" in msg and why in msg
    assert "dose one of dpb, meg, coverage, contamination per model" in msg
    with pytest.raises(ModelLoadError) as exc2:  # the run stops at --model resolution, before any model call
        resolve(f"sim:{profile}")
    assert "cannot be dosed together" in str(exc2.value)


@pytest.mark.parametrize("profile", ["dose,meg=-0.02,flip=0.3,order=0.2,repetition=0.1,stressor=0.2",
                                     "dose,dpb=0.1,phase=0.3", "dose,coverage=0.2,attack=0.5",
                                     "dose,contamination=0.2,flip=0.1,phase=0.2"])
def test_one_positional_dose_combines_with_the_other_probes(profile):
    d = SD.parse_dose(profile)
    assert SD.parse_dose(d.canonical()) == d


@pytest.mark.parametrize("target", [0.05, -0.1])
def test_dpb_slope_takes_every_drop_pattern_in_its_independent_share(tmp_path, target):
    # DPB is not linear in the drops: the formula averages over independent slots, two slots
    # dropped together included; per-slot systematic samples never dropped two together and
    # realised 0.047 for 0.05 on every P = 4 configuration
    P = 4
    rng = np.random.default_rng(1)
    groups = [tuple(f"syn-leisure-short-{c:02d}" for c in rng.choice(12, P, replace=False)) for _ in range(60)]
    groups = list({tuple(sorted(g)): g for g in reversed(groups)}.values())[::-1][:40]
    paths = group_manifest(tmp_path, groups)
    w = SD.slot_keep(SD.parse_dose(f"dose,dpb={target}"), P, 0.85)
    probs = dict(SDR.drop_patterns(w))
    seen: dict[tuple[bool, ...], int] = {}
    dpb = []
    a = np.array(SD.alphas(P))
    for k, g in enumerate(paths, start=1):
        for j in range(P):
            u = SDR.set_strata(g[j:] + g[:j], w, 0.0)
            pat = tuple(u(s, "keep") >= w[s] for s in range(P))
            seen[pat] = seen.get(pat, 0) + 1
            kept = ~np.array(pat)
            dpb.append(a[kept].sum() / kept.sum() if kept.any() else np.mean([a[r] for r in SD.rescued(w)]))
        m = k * P
        for pat, pr in probs.items():
            assert abs(seen.get(pat, 0) - m * pr) < 1.0, (m, pat)
    assert sum(c for pat, c in seen.items() if sum(pat) >= 2) >= 2
    # equal slot coverage: the set's mean DPB is the formula's up to the pattern counts' rounding
    assert abs(np.mean(dpb) - SD.expected_dpb(w)) <= 0.1 * abs(target)


@pytest.mark.parametrize("dose", ["dose,stressor=0.25,attack=0.5", "dose,stressor=0.1,attack=0.9,repetition=0.2",
                                  "dose,attack=0.5", "dose,stressor=0.3", "dose,repetition=0.4"])
def test_stressor_parameters_satisfy_both_equations(dose):
    d = SD.parse_dose(dose)
    p = SD.stressor_params(d)
    r = d.get("repetition") or 0.0
    assert p.r == pytest.approx(r)
    amp = (1 - r) * p.sigma * p.rho
    asr = p.sigma * (1 - (1 - p.rho) ** SD.ATTACK_CAP)
    if d.get("stressor") is not None:
        assert amp == pytest.approx(d.get("stressor"), abs=1e-9)
    if d.get("attack") is not None:
        assert asr == pytest.approx(d.get("attack"), abs=1e-9)
    if d.get("stressor") is None and d.get("attack") is None:
        assert p.sigma == 0.0
    assert 0 <= p.sigma <= 1 and 0 <= p.rho <= 1


@pytest.mark.parametrize("profile", ["dose,stressor=0.3,attack=0", "dose,stressor=0,attack=0.3",
                                     "dose,stressor=0.2,attack=0.0,repetition=0.5"])
def test_a_zero_stressor_or_attack_target_beside_a_nonzero_other_is_refused_not_ignored(profile):
    """A named target of 0 is a target: no (r, sigma, rho) gives amplification 0 with ASR > 0, or the reverse."""
    with pytest.raises(ConfigError, match="cannot hold together"):
        SD.parse_dose(profile)


def _spec(T: int, idx, sources=1) -> FrameSpec:
    src = tuple(Source("video", f"h{k}", f"/x/v{k}.mp4") for k in range(sources))
    return FrameSpec(src, tuple((0, int(i)) for i in idx), fps=6.0, frame_count=T)


@pytest.mark.parametrize("T", [150, 331, 600])
def test_grid_class_names_phase_grids_and_samplers(T):
    for s, g in enumerate(polyphase_grids(T, 8, 3)):
        assert SD.grid_class(g, T, 6.0, 1) == (s, 0)
    for k, conv in enumerate(SD.SAMPLER_SHIFT):
        idx = frame_indices(T, 8, convention=conv, fps=6.0)
        assert SD.grid_class(idx, T, 6.0, 1) == ((0, 0) if conv == "left" else (0, k))
    assert SD.grid_class(polyphase_grids(T, 8, 3, origin="1/6")[0], T, 6.0, 1) == (0, 0)  # fusion's shifted grid


def test_every_stressor_variant_is_irregular_and_clean_or_resampled_frames_are_not():
    T = 240
    clean = _spec(T, frame_indices(T, 16, convention="videostf"))
    assert not SD.temporally_irregular(clean.indices, T, 1)
    rng = np.random.default_rng(0)
    foreign = FrameSpec((Source("video", "f", "/x/f.mp4"),), tuple((0, i) for i in range(16)), fps=6.0, frame_count=100)
    for name in ST.STRESSORS:
        for v in ST.variants(clean, name, rng=rng, count=30):
            f = v.frames
            assert SD.temporally_irregular(f.indices, T, len(f.sources)), (name, f.indices)
    fv = ST.replace_foreign(clean, foreign, 2, rng=rng).frames
    assert SD.temporally_irregular(fv.indices, T, len(fv.sources))
    for count in (14, 18, 8):
        r = ST.resample(clean, count).frames
        assert not SD.temporally_irregular(r.indices, T, 1)


def test_order_hit_is_the_chance_that_ten_orderings_put_the_answer_in_the_last_two_letters_once():
    # independent: every way the believed option's letter can fall in 10 orderings of 5 letters
    hits = sum(1 for pos in itertools.product(range(5), repeat=4) if any(p >= 3 for p in pos))
    assert 1 - (1 - hits / 5**4) ** 2.5 == pytest.approx(SD.ORDER_HIT)  # 10 orderings = 2.5 blocks of 4
    assert math.isclose(SD.dosed_share(SD.parse_dose("dose,order=0.5"), "order"), 0.5 / SD.ORDER_HIT)
    f0 = SD.NULL_RATE["phase"]
    assert SD.dosed_share(SD.parse_dose("dose,phase=0.3"), "phase") == pytest.approx((0.3 - f0) / (1 - f0))
    assert SD.dosed_share(SD.parse_dose("dose,meg=0.1"), "phase") == 0.0


@pytest.fixture(scope="module")
def ctx_factory(tmp_path_factory, small_set):
    from pytest_posbias.config import PosbiasConfig
    from pytest_posbias.run.context import RunContext

    made = []

    def make(models, **probes):
        tmp = tmp_path_factory.mktemp("dose")
        opts = RunOptions(models=models, data=str(small_set), cache=str(tmp / "c"), seed=0, judge="auto",
                          sequential=False)
        ctx = RunContext.create(opts, PosbiasConfig(probes=probes), rootdir=tmp, worker="main", run_id="t")
        made.append(ctx)
        return ctx

    yield make
    for c in made:
        c.close()


# every gate at its no-effect value 0 (coverage has none: coverage=0 asks for zero coverage); one
# positional gate per dose, so the other two positional zeros are doses of their own
ZERO = "sim:dose," + ",".join(f"{g}=0" for g in SD.DOSE_GATES if g not in ("coverage", "dpb", "contamination"))


ZERO_POSITIONAL = ("sim:dose,dpb=0", "sim:dose,contamination=0")


@pytest.mark.slow  # through the real probes
def test_dose_zero_writes_exactly_what_unbiased_writes(ctx_factory):
    from pytest_posbias.probes.positional import PositionalSpec

    ctx = ctx_factory(["sim:unbiased", ZERO, *ZERO_POSITIONAL], phase={"items": 8}, stressor={"videos": 2})
    spec = PositionalSpec("leisure", "long", 4, groups=2)
    pu = ctx.positional("sim:unbiased", spec)
    for zero in (ZERO, *ZERO_POSITIONAL):
        pz = ctx.positional(zero, spec)
        assert [i["text"] for i in pu.instances] == [i["text"] for i in pz.instances], zero
        assert np.array_equal(pu.coverage, pz.coverage)
    for gate in ("order", "phase", "flip"):
        a, b = ctx.phase("sim:unbiased", gate, 8), ctx.phase(ZERO, gate, 8)
        assert a.condition_answers.keys() == b.condition_answers.keys()
        for c in a.condition_answers:
            assert np.array_equal(a.condition_answers[c], b.condition_answers[c])
            assert np.allclose(a.condition_probs[c], b.condition_probs[c], equal_nan=True)
    su, sz = ctx.stressor("sim:unbiased", 16), ctx.stressor(ZERO, 16)
    assert su.clean.texts == sz.clean.texts
    assert all(x.texts == y.texts for n in su.variants for x, y in zip(su.variants[n], sz.variants[n], strict=True))


def _check(small_set, tmp_path, model, **kw):
    from pytest_posbias.cli.sim_check import run_check

    got = run_check(model, data=str(small_set), cache=str(tmp_path / "c"), rootdir=tmp_path, **kw)
    return {a.gate: a for a in got.achieved}


def test_small_meg_doses_thin_slots_by_their_first_sentence_with_the_calibrated_loss():
    """|m| <= FIRST_LOSS: a dosed slot loses its first written sentence with probability |m|/L (the
    middle pair for m < 0, the edge pair for m > 0); beyond, whole summaries with |m|/μ."""
    key = ("domestic", "long", 4)
    loss, mu = SD.FIRST_LOSS[key], SD.MU[key]
    small = SD.parse_dose("dose,meg=-0.02")
    assert SD.sentence_drops(small, 4, loss) and not SD.sentence_drops(small, 2, loss)
    assert SD.slot_keep(small, 4, loss) == pytest.approx([1.0, 1 - 0.02 / loss, 1 - 0.02 / loss, 1.0])
    up = SD.parse_dose("dose,meg=0.04")
    assert SD.slot_keep(up, 4, loss) == pytest.approx([1 - 0.04 / loss, 1.0, 1.0, 1 - 0.04 / loss])
    big = SD.parse_dose("dose,meg=-0.3")
    assert not SD.sentence_drops(big, 4, loss)
    assert SD.slot_keep(big, 4, mu)[1] == pytest.approx(1 - 0.3 / mu)
    assert not SD.sentence_drops(SD.parse_dose("dose,dpb=0.05"), 4, loss)
    assert min(SD.FIRST_LOSS.values()) > 0 and max(SD.FIRST_LOSS.values()) < min(SD.MU.values())


def test_thinning_doses_thin_every_clip_in_its_share_of_its_appearances(tmp_path):
    rng = np.random.default_rng(5)
    P = 4
    groups = [tuple(f"syn-leisure-short-{c:02d}" for c in rng.choice(10, P, replace=False)) for _ in range(80)]
    groups = list({tuple(sorted(g)): g for g in reversed(groups)}.values())[::-1][:40]
    paths = group_manifest(tmp_path, groups)
    w = SD.slot_keep(SD.parse_dose("dose,meg=-0.02"), P, 0.2)
    x = 1 - w[1]
    seen: dict[str, int] = {}
    hit: dict[str, int] = {}
    for g in paths:
        for j in range(P):
            order = g[j:] + g[:j]
            u = SDR.set_strata(order, w, 0.0, by_clip=True)
            for s in range(P):
                clip = Path(order[s]).stem
                dropped = u(s, "keep") >= w[s]
                assert not (dropped and s in (0, 3))  # the edge slots keep everything
                if s in (1, 2):
                    seen[clip] = seen.get(clip, 0) + 1
                    hit[clip] = hit.get(clip, 0) + dropped
    assert len(seen) == 10
    for clip, m in seen.items():
        assert abs(hit.get(clip, 0) - m * x) < 1.0, (clip, m, hit.get(clip, 0))
    # one systematic sample over the cells listed clip by clip: the set's count is round(M·x)
    assert abs(sum(hit.values()) - sum(seen.values()) * x) <= 0.5 + 1e-9


def test_small_p2_dpb_doses_thin_one_slot_by_its_first_sentence_with_the_calibrated_effect():
    """|d| <= FIRST_DPB/2 at P = 2: the first slot (d > 0; the second for d < 0) loses its first
    written sentence with probability |d|/D, the other slot is always kept; P = 4 and larger |d|
    keep the whole drop patterns."""
    D = SD.FIRST_DPB[("leisure", "short", 2)]
    small = SD.parse_dose("dose,dpb=0.05")
    assert SD.thin_scale(small, 2, "leisure", "short") == D
    assert SD.sentence_drops(small, 2, D)
    assert SD.slot_keep(small, 2, D, thin=True) == pytest.approx([1 - 0.05 / D, 1.0])
    assert SD.slot_keep(SD.parse_dose("dose,dpb=-0.05"), 2, D, thin=True) == pytest.approx([1.0, 1 - 0.05 / D])
    assert SD.slot_keep(SD.parse_dose("dose,dpb=0"), 2, D, thin=True) == [1.0, 1.0]
    # a whole dropped first slot moves an instance's DPB by about 1, a thinned one by D: many more units
    assert SD.slot_keep(small, 2, SD.MU[("leisure", "short", 2)])[0] > 1 - 0.06
    assert set(SD.FIRST_DPB) == {k for k in SD.MU if k[2] == 2}
    assert min(SD.FIRST_DPB.values()) > 0.1 and max(SD.FIRST_DPB.values()) < 0.25
    # P = 4 (lands with whole drop patterns) and the dose gates' dpb=0.3 keep the whole drops
    assert SD.thin_scale(small, 4, "leisure", "short") == 0.0 and not SD.sentence_drops(small, 4, D)
    # on every P = 2 configuration 0.05 thins (at most half the instances) and 0.1 and 0.3 (the dose
    # gates' dose) drop whole slots
    for domain, bucket, _ in SD.FIRST_DPB:
        for d, thins in ((0.05, True), (-0.05, True), (0.1, False), (0.3, False)):
            dose = SD.parse_dose(f"dose,dpb={d}")
            assert SD.sentence_drops(dose, 2, SD.thin_scale(dose, 2, domain, bucket)) == thins, (domain, bucket, d)
    # the MEG scale is still FIRST_LOSS, and a P = 2 MEG or coverage dose never thins
    meg = SD.parse_dose("dose,meg=-0.02")
    assert SD.thin_scale(meg, 4, "domestic", "long") == SD.FIRST_LOSS[("domestic", "long", 4)]
    assert SD.thin_scale(meg, 2, "domestic", "long") == 0.0 and not SD.sentence_drops(meg, 2, 0.0)
    assert not SD.sentence_drops(SD.parse_dose("dose,coverage=0.3"), 2, D)


def test_calibration_thins_every_dosed_slot_and_restores_the_constants():
    """``posbias sim calibrate`` measures FIRST_LOSS with meg=-1 and FIRST_DPB with dpb=1: inside
    ``_thin_always`` both thin every dosed slot (share 1), outside they are refused or not thinned."""
    from pytest_posbias.cli.sim_check import _thin_always

    saved = (dict(SD.FIRST_DPB), SD.FIRST_DPB_DEFAULT, SD.DPB_THIN_SHARE, dict(SD.FIRST_LOSS), dict(SD.DOSE_RANGE))
    with _thin_always():
        for profile, P, thinned in (("dose,dpb=1", 2, [0.0, 1.0]), ("dose,meg=-1", 4, [1.0, 0.0, 0.0, 1.0])):
            dose = SD.parse_dose(profile)
            scale = SD.thin_scale(dose, P, "leisure", "short")
            assert SD.sentence_drops(dose, P, scale), profile
            assert SD.slot_keep(dose, P, scale, thin=True) == pytest.approx(thinned), profile
    assert (dict(SD.FIRST_DPB), SD.FIRST_DPB_DEFAULT, SD.DPB_THIN_SHARE, dict(SD.FIRST_LOSS),
            dict(SD.DOSE_RANGE)) == saved
    with pytest.raises(ConfigError, match="dpb=1 is outside"):
        SD.parse_dose("dose,dpb=1")


def test_thinning_dpb_doses_thin_every_clip_in_its_share_of_its_first_slot_appearances(tmp_path):
    rng = np.random.default_rng(3)
    P = 2
    pairs = list(itertools.combinations(range(10), P))  # 45 distinct groups of 10 clips
    groups = [tuple(f"syn-leisure-short-{c:02d}" for c in rng.permutation(pairs[k])) for k in rng.permutation(45)[:40]]
    paths = group_manifest(tmp_path, groups)
    w = SD.slot_keep(SD.parse_dose("dose,dpb=0.05"), P, 0.15, thin=True)
    x = 1 - w[0]
    seen: dict[str, int] = {}
    hit: dict[str, int] = {}
    for g in paths:
        for j in range(P):
            order = g[j:] + g[:j]
            u = SDR.set_strata(order, w, 0.0, by_clip=True)
            assert u(1, "keep") < w[1]  # the second slot keeps everything
            clip = Path(order[0]).stem
            seen[clip] = seen.get(clip, 0) + 1
            hit[clip] = hit.get(clip, 0) + (u(0, "keep") >= w[0])
    assert len(seen) == 10
    for clip, m in seen.items():  # every clip thinned in its share of its first-slot appearances
        assert abs(hit.get(clip, 0) - m * x) < 1.0, (clip, m, hit.get(clip, 0))
    assert abs(sum(hit.values()) - 2 * len(groups) * x) <= 0.5 + 1e-9


@pytest.mark.slow  # through the real probes
@pytest.mark.parametrize("dose", ["flip=0.5,order=0.3", "phase=0.4"])
def test_answer_stability_doses_reach_the_target_through_the_phase_probe(small_set, tmp_path, dose):
    got = _check(small_set, tmp_path, f"sim:dose,{dose}", items=120)
    for gate, a in got.items():
        assert a.target is not None and a.n == 120
        assert a.ci_low <= a.target <= a.ci_high, a
        if gate in ("flip", "phase"):  # every sampler / phase pair disagrees on a dosed item
            assert all(abs(v - a.estimate) <= 0.12 for v in a.parts.values()), a.parts


@pytest.mark.slow  # through the real probes
def test_description_doses_reach_their_targets_through_the_stressor_probe(small_set, tmp_path):
    got = _check(small_set, tmp_path, "sim:dose,repetition=0.25,stressor=0.3,attack=0.6", videos=24)
    rep, amp, att = got["repetition"], got["stressor"], got["attack"]
    assert abs(rep.estimate - 0.25) <= 2 / 24 + 0.05  # per-video shares of a low-discrepancy sequence
    assert amp.ci_low <= 0.3 <= amp.ci_high, amp
    assert att.ci_low <= 0.6 <= att.ci_high, att
    # the stressor target holds for every stressor (Reverse has one variant per video: noisier)
    assert all(abs(v - 0.3) <= 0.15 for k, v in amp.parts.items() if k != "reverse"), amp.parts


def test_same_request_same_output(small_set):
    from pytest_posbias.data.manifest import load_manifest
    from pytest_posbias.engine import Decoding, Request
    from pytest_posbias.probes.phase import mcq_prompt
    from pytest_posbias.video.compose import TextPart, VideoPart

    m = load_manifest(small_set)
    item = m.mcq[0]
    store = FrameStore()
    info = store.info(item.path)
    spec = FrameSpec.from_video(item.path, frame_indices(info.frame_count, 8, convention="midpoint"), size=160, info=info)
    dose = "dose,flip=1,order=0.9,repetition=0.5,stressor=0.2,attack=0.7"
    r_mcq = Request(f"sim:{dose}", (VideoPart(spec), TextPart(mcq_prompt(item, [4, 3, 2, 1, 0]))), Decoding(4), want="both",
                    letters=tuple("ABCDE"))
    clean = FrameSpec.from_video(item.path, frame_indices(info.frame_count, 16, convention="videostf"), size=160, info=info)
    stressed = ST.shuffle(clean, rng=np.random.default_rng(3)).frames
    r_desc = [Request(f"sim:{dose}", (VideoPart(f), TextPart("Please describe this video in detail.")), Decoding(500))
              for f in (clean, stressed)]
    a = SimBackend(dose, FrameStore()).generate([r_mcq, *r_desc])
    b = SimBackend(dose, store).generate([r_mcq, *r_desc])
    assert [(g.text, g.finish_reason, g.letter_logprobs) for g in a] == [(g.text, g.finish_reason, g.letter_logprobs) for g in b]
    u = SimBackend("unbiased", store).generate([r_mcq])
    assert u[0].letter_logprobs != a[0].letter_logprobs  # flip=1: the midpoint grid moves every item's answer
