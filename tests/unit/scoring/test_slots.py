"""The slot diagnostics (scoring.slots): the allocation budget, contamination, the target check and the
leakage miner on the paper's example."""

from __future__ import annotations

import numpy as np

from pytest_posbias.scoring.slots import allocation, leakage_candidates, slot_similarity, target_check


def test_allocation_and_exact_budget():
    a = allocation("One sentence here. Two sentences here. Three!", requested=2)
    assert (a.words, a.sentences, a.over, a.exact) == (7, 3, True, False)


def test_contamination_flags_a_slot_closer_to_another_reference():
    refs = ["red circle rolls across a kitchen table", "blue square bounces on a trampoline outside"]
    own = slot_similarity("a red circle rolls on the kitchen table", refs, 0)
    leak = slot_similarity("a blue square bounces on the trampoline", refs, 0)
    assert not own.contaminated and leak.contaminated and leak.best_other_slot == 1


def test_target_check_hit_and_margin_confusion():
    refs = ["red circle kitchen table", "blue square trampoline garden", "green triangle street car"]
    hit = target_check("the red circle on the kitchen table", refs, 0)
    miss = target_check("the green triangle near a street car", refs, 0)
    assert hit.hit and not hit.margin_confusion
    assert not miss.hit and miss.margin_confusion and miss.best_slot == 2


def test_leakage_candidate_miner_paper_example():
    # the paper's figure 10: a reindeer drinking coffee, summarised with the other video's ice cream
    target = "A big green garbage can is pushed against a brick wall and a reindeer jumps out drinking from a coffee cup."
    source = "A little boy is filling an ice cream cone with ice cream. He licks the ice cream cone."
    summary = "An animated deer climbs out of a green dumpster. The deer tries to enjoy its ice cream cone."
    cands = leakage_candidates(summary, [target, source], 0)
    assert len(cands) == 1 and cands[0].source_slot == 1
    assert set(cands[0].anchors) >= {"cream", "cone", "ice"}
    assert np.isclose(cands[0].support_target, 0.0)


def test_an_answer_similar_to_no_reference_hits_no_target():
    """An answer sharing no content word with any reference is not a target hit, also for target slot 0."""
    refs = ["red circle rolls across a kitchen table", "blue square bounces on a trampoline",
            "green triangle spins near a window"]
    assert not any(target_check("I am unable to view videos.", refs, t).hit for t in range(3))

