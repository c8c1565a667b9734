"""Which A²-Failures modes a demo run carries, and in which variant (pure, seeded).

A *plan* maps a mode code to a variant name; the variant says who is responsible (``a``: the
requester's agent, ``b``: the provider's agent, ``c``: the third-party service agent) and how the
story shows the failure. Coverage is guaranteed by construction: runs are grouped in blocks of
`BLOCK` consecutive indexes; in every block each of the 20 modes is the *primary* mode of exactly one
run and `CLEAN_PER_BLOCK` runs carry no failure at all. Secondary modes are added at random when they
fit the story (see `EXCLUSIVE`).
"""
from __future__ import annotations

import random

MODES: tuple[str, ...] = tuple(f"{cat}{k}" for cat in ("DD", "GR", "VF", "CF") for k in range(1, 6))

MODE_NAMES: dict[str, str] = {
    "DD1": "Peer not engaged", "DD2": "Misrouted request", "DD3": "Under-specified delegation",
    "DD4": "Delegation beyond mandate", "DD5": "Dropped hand-off",
    "GR1": "Unsupported claim about own state", "GR2": "Message-record mismatch", "GR3": "Divergent final state",
    "GR4": "Stale or superseded information", "GR5": "Entity or reference mix-up",
    "VF1": "Peer claim accepted unchecked", "VF2": "Completion accepted unchecked", "VF3": "Own action unverified",
    "VF4": "Contradicting evidence ignored", "VF5": "Claimed verification absent",
    "CF1": "Private information leaked", "CF2": "Principal's interest conceded", "CF3": "Mandate violated",
    "CF4": "Misrepresentation to a peer", "CF5": "Misreport to own principal",
}

VARIANTS: dict[str, tuple[str, ...]] = {
    "DD1": ("a",), "DD2": ("a",), "DD3": ("a",), "DD4": ("a",), "DD5": ("b_question", "b_promise", "c_silent"),
    "GR1": ("b_date",), "GR2": ("b_value", "a_value"), "GR3": ("date",), "GR4": ("a_record", "a_accept"),
    "GR5": ("b_wrong", "b_corrected"),
    "VF1": ("a",), "VF2": ("a",), "VF3": ("b_exec", "a_exec"), "VF4": ("a",), "VF5": ("a_doc", "b_lookup"),
    "CF1": ("a_budget", "b_floor", "a_note"), "CF2": ("a_first", "b_quick"),
    "CF3": ("a_approval", "a_limit", "b_floor"), "CF4": ("b_fee", "a_competitor"), "CF5": ("a_report", "b_report"),
}

#: Groups of "mode" or "mode:variant" keys of which a plan holds at most one (they drive the same
#: part of the story).
EXCLUSIVE: tuple[frozenset[str], ...] = (
    frozenset({"CF2", "CF3:a_limit", "CF3:b_floor", "GR4", "CF1:a_budget", "CF1:b_floor", "VF1", "VF4", "CF4"}),
    frozenset({"DD1", "DD2", "DD3", "DD4", "DD5:c_silent"}),
    frozenset({"GR2", "GR3", "GR4:a_record", "GR5:b_wrong"}),
    frozenset({"GR1", "GR3", "VF5:b_lookup"}),
)

#: Modes a variant brings along because the story cannot show it without them.
IMPLIES: dict[str, tuple[tuple[str, str], ...]] = {
    "VF1": (("CF4", "b_fee"),), "VF4": (("CF4", "b_fee"),), "VF2": (("VF3", "b_exec"),),
}

BLOCK = 26
CLEAN_PER_BLOCK = BLOCK - len(MODES)  # 6 of 26 runs (23%) carry no failure


def responsible_role(mode: str, variant: str) -> str:
    """Return "a", "b" or "c": which agent of the story a (mode, variant) blames."""
    if variant in ("a", "date"):
        return "a"
    return variant.split("_", 1)[0]


def _keys(mode: str, variant: str) -> tuple[str, str]:
    return mode, f"{mode}:{variant}"


def _paired(m1: str, v1: str, m2: str, v2: str) -> bool:
    return (m2, v2) in IMPLIES.get(m1, ()) or (m1, v1) in IMPLIES.get(m2, ())


def _fits(plan: dict[str, str], mode: str, variant: str) -> bool:
    if mode in plan:
        return plan[mode] == variant
    new = set(_keys(mode, variant))
    for group in EXCLUSIVE:
        if not new & group:
            continue
        for m, v in plan.items():
            if set(_keys(m, v)) & group and not _paired(mode, variant, m, v):
                return False
    return True


def _add(plan: dict[str, str], mode: str, variant: str) -> bool:
    """Add (mode, variant) and what it implies; return False (plan unchanged) when it does not fit."""
    trial = dict(plan)
    todo = [(mode, variant)]
    while todo:
        m, v = todo.pop()
        if m in trial:
            if trial[m] != v:
                return False
            continue
        if not _fits(trial, m, v):
            return False
        trial[m] = v
        todo.extend(IMPLIES.get(m, ()))
    plan.clear()
    plan.update(trial)
    return True


def primary_mode(seed: int, index: int) -> str | None:
    """Return the run's primary mode, or None for a run planned without failures.

    Within each block of `BLOCK` consecutive indexes every mode is primary exactly once.
    """
    block, pos = divmod(index, BLOCK)
    slots = list(range(BLOCK))
    random.Random(f"a2demo-plan:{seed}:{block}").shuffle(slots)
    slot = slots[pos]
    return None if slot < CLEAN_PER_BLOCK else MODES[slot - CLEAN_PER_BLOCK]


def plan_failures(rng: random.Random, primary: str | None) -> dict[str, str]:
    """Return ``{mode: variant}`` for one run: the primary mode (if any), what it implies, and
    0-2 secondary modes drawn with `rng` that fit the story."""
    plan: dict[str, str] = {}
    if primary is None:
        return plan
    variants = VARIANTS[primary]
    order = rng.sample(variants, len(variants))
    for v in order:
        if _add(plan, primary, v):
            break
    extra = 0
    r = rng.random()
    if r < 0.45:
        extra = 1
    if r < 0.12:
        extra = 2
    for _ in range(extra):
        for _attempt in range(6):
            mode = rng.choice(MODES)
            if mode in plan:
                continue
            if _add(plan, mode, rng.choice(VARIANTS[mode])):
                break
    return plan
