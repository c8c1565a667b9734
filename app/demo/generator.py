"""Generate realistic synthetic A2A runs (normalized canonical runs) with seeded failure truth.

Public API::

    generate_runs(n, seed=0) -> Iterator[DemoRun]       # lazy; run i depends only on (seed, i)
    generate_corpus(n, seed=0) -> list[DemoRun]
    generate_run(index, seed=0) -> DemoRun
    generate_long_run(n_events=2000, seed=0) -> DemoRun  # one very long run for UI performance tests

Each `DemoRun` holds the run (the exact normalized canonical shape of
`app.ingest.canonical.normalize_run`) and its truth: a list of
``{"mode", "agent", "evidence": [seq...], "principals": [principal id...]}``, also stored in
``run["metadata"]["demo_truth"]``. Pure computation: no I/O, no database.
"""
from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.demo.audits import l1_checks, l2_judge
from app.demo.failures import MODES, plan_failures, primary_mode
from app.demo.scenarios import VARIANTS_PER_TEMPLATE, get_scenario, scenario_record
from app.demo.story import Story
from app.demo.templates import TEMPLATES

GENERATOR_VERSION = 1
MAX_RUNS = 1_000_000

#: (mode, variant) pairs whose evidence is complete before the third-party hand-off, i.e. that survive
#: a run timing out while waiting for the service agent.
EARLY = {("GR5", "b_wrong"), ("GR5", "b_corrected"), ("GR1", "b_date"), ("VF5", "b_lookup"), ("CF1", "a_note"),
         ("CF4", "b_fee"), ("DD5", "c_silent")}

#: Share of runs that ship each kind of machine audit.
P_L1 = 0.6
P_L2 = 0.5


@dataclass
class DemoRun:
    """One generated run and the failures seeded into it."""

    run: dict[str, Any]
    truth: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        return self.run["run_id"]


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _n_agents(rng: random.Random, plan: dict[str, str]) -> int:
    if "DD2" in plan:
        return 4
    n = rng.choices((2, 3, 4), weights=(0.35, 0.4, 0.25))[0]
    needs_c = any(m in plan for m in ("DD1", "DD3", "DD4")) or plan.get("DD5") == "c_silent"
    return max(n, 3) if needs_c else n


def _build(rng: random.Random, seed: int, index: int | None, plan: dict[str, str], *, primary: str | None = None,
           run_id: str | None = None,
           long_cycles: int = 0, template_index: int | None = None, n_agents: int | None = None,
           audit_rng: random.Random | None = None) -> DemoRun:
    ti = rng.randrange(len(TEMPLATES)) if template_index is None else template_index
    variant = rng.randrange(VARIANTS_PER_TEMPLATE)
    sc = get_scenario(ti, variant)
    status_mode = "normal"
    r = rng.random()
    if long_cycles:
        pass  # a requested long run always plays out in full
    elif not plan:
        if r < 0.015:
            status_mode = "error"
        elif r < 0.085:
            status_mode = "no_deal"
    elif primary == "DD5" and plan.get("DD5") == "c_silent" and r < 0.7:
        status_mode = "timeout"  # the run stops while waiting for the silent service agent
        plan = {m: v for m, v in plan.items() if (m, v) in EARLY}
    if long_cycles == 0 and status_mode == "normal" and rng.random() < 0.012:
        long_cycles = rng.randint(70, 110)
    n = n_agents if n_agents is not None else _n_agents(rng, plan)
    if run_id is None:
        run_id = f"demo-{seed}-{index:05d}-{sc.tpl.slug}-{variant:03d}"
    meta = {"generator": "a2annotate.demo", "generator_version": GENERATOR_VERSION, "seed": seed,
            "index": index, "template": f"{sc.tpl.family}/{sc.tpl.slug}"}
    story = Story(rng, sc, plan, run_id, n_agents=n, long_cycles=long_cycles, status_mode=status_mode,
                  metadata=meta)
    story.play()
    run = story.run_dict(scenario_record(sc))
    arng = audit_rng or random.Random(f"a2demo-audit:{seed}:{index}")
    audits: list[dict[str, Any]] = []
    audited_by: list[str] = []
    if arng.random() < P_L1:
        audits.extend(l1_checks(run))
        audited_by.append("l1-checks")
    if arng.random() < P_L2:
        audits.extend(l2_judge(run, story.truth, arng))
        audited_by.append("judge-l2")
    run["audits"] = audits
    # Which judges looked at this run, so a judge that flagged nothing counts as "no failure found".
    run["metadata"]["audited_by"] = audited_by
    return DemoRun(run=run, truth=copy.deepcopy(story.truth))


def generate_run(index: int, seed: int = 0) -> DemoRun:
    """Return run number `index` of the corpus with this seed (deterministic in (seed, index))."""
    _check_int("index", index, 0, MAX_RUNS)
    _check_int("seed", seed, -(2**63), 2**63)
    rng = random.Random(f"a2demo-run:{seed}:{index}")
    primary = primary_mode(seed, index)
    plan = plan_failures(rng, primary)
    return _build(rng, seed, index, plan, primary=primary)


def generate_runs(n: int, seed: int = 0) -> Iterator[DemoRun]:
    """Yield `n` demo runs lazily; the same (n, seed) always yields identical runs.

    Runs are independent: run i depends only on (seed, i), so any prefix of a larger corpus is the
    smaller corpus. Every failure mode is the primary mode of one run in every block of 26.
    """
    _check_int("n", n, 0, MAX_RUNS)
    _check_int("seed", seed, -(2**63), 2**63)
    return (generate_run(i, seed) for i in range(n))


def generate_corpus(n: int, seed: int = 0) -> list[DemoRun]:
    """Return `generate_runs(n, seed)` as a list."""
    return list(generate_runs(n, seed))


def generate_long_run(n_events: int = 2000, seed: int = 0) -> DemoRun:
    """Return one run with at least `n_events` events (4 agents, a long detail-checking phase)."""
    _check_int("n_events", n_events, 1, 200_000)
    _check_int("seed", seed, -(2**63), 2**63)
    primary = MODES[seed % len(MODES)]
    cycles = max(0, (n_events - 40) // 4 + 1)
    for _attempt in range(5):
        rng = random.Random(f"a2demo-long:{seed}:{n_events}")
        plan = plan_failures(rng, primary)
        demo = _build(rng, seed, None, plan, run_id=f"demo-{seed}-long-{n_events}", long_cycles=cycles,
                      n_agents=4, audit_rng=random.Random(f"a2demo-long-audit:{seed}:{n_events}"))
        missing = n_events - len(demo.run["events"])
        if missing <= 0:
            return demo
        cycles += missing // 4 + 1
    raise RuntimeError(f"could not reach {n_events} events")  # pragma: no cover
