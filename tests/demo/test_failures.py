"""Failure planning: guaranteed coverage per block, exclusive groups, implied modes."""
from __future__ import annotations

import random
from collections import Counter

from app.demo.failures import (
    BLOCK,
    CLEAN_PER_BLOCK,
    EXCLUSIVE,
    IMPLIES,
    MODES,
    VARIANTS,
    plan_failures,
    primary_mode,
    responsible_role,
)


def test_twenty_modes():
    assert len(MODES) == 20
    assert MODES[:5] == ("DD1", "DD2", "DD3", "DD4", "DD5") and MODES[-1] == "CF5"
    assert set(VARIANTS) == set(MODES)


def test_every_block_has_each_mode_once_as_primary():
    for seed in (0, 1, 99):
        for block in range(3):
            got = Counter(primary_mode(seed, block * BLOCK + k) for k in range(BLOCK))
            assert got[None] == CLEAN_PER_BLOCK
            assert all(got[m] == 1 for m in MODES)


def test_primary_order_depends_on_seed():
    a = [primary_mode(0, k) for k in range(BLOCK)]
    b = [primary_mode(1, k) for k in range(BLOCK)]
    assert a != b and sorted(map(str, a)) == sorted(map(str, b))


def _group_hits(plan, group):
    return [m for m, v in plan.items() if m in group or f"{m}:{v}" in group]


def test_plans_respect_exclusive_groups_and_implications():
    rng = random.Random(7)
    sizes = Counter()
    for k in range(3000):
        primary = MODES[k % 20]
        plan = plan_failures(rng, primary)
        assert primary in plan
        sizes[len(plan)] += 1
        for m, v in plan.items():
            assert v in VARIANTS[m]
            for im, iv in IMPLIES.get(m, ()):
                assert plan.get(im) == iv
        for group in EXCLUSIVE:
            hits = _group_hits(plan, group)
            implied_pairs = {im for m in hits for im, _ in IMPLIES.get(m, ())}
            assert len([h for h in hits if h not in implied_pairs]) <= 1, (plan, group)
    assert sizes[1] > 0 and sizes[2] > 0 and max(sizes) >= 3


def test_no_primary_means_no_failure():
    assert plan_failures(random.Random(1), None) == {}


def test_responsible_role():
    assert responsible_role("DD1", "a") == "a"
    assert responsible_role("GR3", "date") == "a"
    assert responsible_role("GR1", "b_date") == "b"
    assert responsible_role("DD5", "c_silent") == "c"
