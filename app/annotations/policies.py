"""Sampling policies for assignment batches: which runs a batch takes and with what probability.

Pure functions on plain data (run ids, strata, scores); `app.annotations.assignments` reads the
data from the database and stores what these return. Every function returns `Pick`s in queue
order (a seeded random order) with the run's inclusion probability in this draw:

- `random`: a simple random sample of n of the N runs of the frame; pi = n / N for every run.
- `stratified`: the frame split by a key; n allocated `proportional` (n_h ~ n N_h / N, largest
  remainders) or `equal` (n / H each, capped at N_h, the rest spread); a simple random sample in
  each stratum; pi = n_h / N_h.
- `disagreement` / `uncertainty`: the n runs with the highest score (ties broken by the seed);
  a deterministic choice: pi = 1 for a run taken (and 0 for the others).
- `flagged`: every flagged run, pi = 1; `all`: every run, pi = 1.
- `bernoulli` (queue rules on arriving runs): each run taken independently with probability p,
  decided by a seeded hash of its id (so re-applying a rule takes the same runs); pi = p.
"""
from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core.errors import FieldError

POLICIES = ("random", "stratified", "disagreement", "uncertainty", "flagged", "all")
#: policies whose batches are probability samples of their frame (every run has a known pi > 0)
PROBABILITY_POLICIES = ("random", "stratified", "all")
ALLOCATIONS = ("proportional", "equal")


class PolicyError(FieldError):
    """Bad policy input; `field` names the parameter."""


@dataclass(frozen=True)
class Pick:
    run_id: str
    inclusion_prob: float
    stratum: str | None = None
    score: float | None = None


def _check_n(n: int | None) -> None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise PolicyError("sample_size", f"must be at least 1 (or empty for all runs), got {n!r}")


def simple_random(run_ids: Sequence[str], n: int | None, rng: random.Random) -> list[Pick]:
    """A simple random sample without replacement of `n` runs (all when None or n >= N)."""
    _check_n(n)
    runs = sorted(run_ids)
    if not runs:
        return []
    if n is not None and n < len(runs):
        chosen = rng.sample(runs, n)
        p = n / len(runs)
    else:
        chosen = list(runs)
        rng.shuffle(chosen)
        p = 1.0
    return [Pick(r, p) for r in chosen]


def allocate(sizes: Mapping[str, int], n: int, allocation: str) -> dict[str, int]:
    """n_h per stratum (sum min(n, N)); `proportional` by largest remainders, `equal` capped at N_h
    with what a small stratum cannot take spread over the others. Ties go to the stratum first
    in sorted order."""
    if allocation not in ALLOCATIONS:
        raise PolicyError("allocation", f"must be one of {', '.join(ALLOCATIONS)}, got {allocation!r}")
    keys = sorted(sizes)
    total = sum(sizes.values())
    n = min(n, total)
    out = {h: 0 for h in keys}
    if n <= 0 or total == 0:
        return out
    if allocation == "proportional":
        quotas = {h: n * sizes[h] / total for h in keys}
        out = {h: int(quotas[h]) for h in keys}
        rest = n - sum(out.values())
        for h in sorted(keys, key=lambda h: (-(quotas[h] - out[h]), keys.index(h)))[:rest]:
            out[h] += 1
        return out
    left = n
    open_ = [h for h in keys if sizes[h] > 0]
    while left > 0 and open_:
        share, extra = divmod(left, len(open_))
        given = 0
        for i, h in enumerate(open_):
            want = share + (1 if i < extra else 0)
            take = min(want, sizes[h] - out[h])
            out[h] += take
            given += take
        left -= given
        open_ = [h for h in open_ if out[h] < sizes[h]]
        if given == 0:
            break
    return out


def stratified(strata: Mapping[str, str], n: int | None, allocation: str,
               rng: random.Random) -> tuple[list[Pick], dict[str, dict[str, float]]]:
    """Stratified simple random sample. `strata` maps run id -> stratum. Returns (picks in a
    random order, {stratum: {frame, sampled, inclusion_prob}})."""
    _check_n(n)
    groups: dict[str, list[str]] = {}
    for rid in sorted(strata):
        groups.setdefault(strata[rid], []).append(rid)
    sizes = {h: len(v) for h, v in groups.items()}
    alloc = allocate(sizes, n if n is not None else sum(sizes.values()), allocation)
    picks: list[Pick] = []
    info: dict[str, dict[str, float]] = {}
    for h in sorted(groups):
        nh, big_n = alloc[h], sizes[h]
        chosen = rng.sample(groups[h], nh) if nh < big_n else list(groups[h])
        p = nh / big_n if big_n else 0.0
        info[h] = {"frame": big_n, "sampled": nh, "inclusion_prob": p}
        picks.extend(Pick(r, p, h) for r in chosen)
    rng.shuffle(picks)
    return picks, info


def top_scored(scores: Mapping[str, float], n: int | None, rng: random.Random) -> list[Pick]:
    """The `n` runs with the highest positive score (all with a positive score when None), ties
    broken by a seeded random key; queue order: highest score first. pi = 1."""
    _check_n(n)
    tiebreak = {r: rng.random() for r in sorted(scores)}
    ranked = sorted((r for r in scores if scores[r] > 0), key=lambda r: (-scores[r], tiebreak[r]))
    if n is not None:
        ranked = ranked[:n]
    return [Pick(r, 1.0, None, float(scores[r])) for r in ranked]


def every(run_ids: Sequence[str], rng: random.Random) -> list[Pick]:
    """Every run (pi = 1), in a seeded random order."""
    runs = sorted(run_ids)
    rng.shuffle(runs)
    return [Pick(r, 1.0) for r in runs]


def bernoulli_draw(run_id: str, seed: int, rate: float) -> bool:
    """Whether a Bernoulli(rate) draw keyed by (seed, run id) takes the run: the same answer every
    time it is asked, whatever else is in the database."""
    digest = hashlib.sha256(f"{seed}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < rate


def bernoulli(run_ids: Sequence[str], seed: int, rate: float) -> list[Pick]:
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise PolicyError("rate", f"must be a probability in (0, 1], got {rate!r}")
    return [Pick(r, float(rate)) for r in sorted(run_ids) if bernoulli_draw(r, seed, rate)]


# --------------------------------------------------------------------------- scores


def split_score(votes: Sequence[frozenset[str]]) -> float:
    """How much annotators' label sets disagree on one run: the mean over the modes anyone marked
    of 4 p (1 - p), p the share of annotators marking the mode (0: all agree, 1: an even split);
    0 with fewer than two annotators."""
    if len(votes) < 2:
        return 0.0
    modes = set().union(*votes)
    if not modes:
        return 0.0
    m = len(votes)
    return sum(4 * (p := sum(mode in v for v in votes) / m) * (1 - p) for mode in modes) / len(modes)


def versus_score(humans: Sequence[frozenset[str]], machine: frozenset[str]) -> float:
    """How far the humans' label sets are from a judge's / detector's: the mean over humans of
    1 - Jaccard(human, machine) (two empty sets agree); 0 without humans."""
    if not humans:
        return 0.0
    total = 0.0
    for h in humans:
        union = h | machine
        total += 0.0 if not union else 1 - len(h & machine) / len(union)
    return total / len(humans)


def confidence_split(confidences: Sequence[float | None]) -> float:
    """How split a judge's k samples are on one run, from its labels' confidences (the share of
    samples that gave the label): max over labels of 1 - |2c - 1| (1 at an even split, 0 when
    all samples agree); labels without a confidence count as unanimous."""
    vals = [1 - abs(2 * float(c) - 1) for c in confidences if c is not None]
    return max(vals, default=0.0)
