"""Scenario instances: one template + one variant number -> fixed names, item and term values.

Everything here depends only on (template slug, variant), never on the corpus seed, so the same
scenario id always carries the same title, description, alignment and numbers in every corpus.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from app.demo.templates import TEMPLATES, Template

VARIANTS_PER_TEMPLATE = 40


@dataclass(frozen=True)
class Scenario:
    """A concrete scenario: the template, its id, names and the key-term values (value space)."""

    tpl: Template
    variant: int
    id: str
    alignment: str
    item: str
    a_name: str
    b_name: str
    c_name: str
    d_name: str
    a_target: float
    a_limit: float
    b_open: float
    b_floor: float
    c_quote: float
    d_quote: float
    ref: str

    @property
    def family(self) -> str:
        return self.tpl.family


def fmt_value(tpl: Template, v: float) -> str:
    """Format a key-term value in the template's unit ("$18,450", "45 days", "$189/night")."""
    unit = tpl.unit
    if unit == "usd":
        return f"${v:,.0f}"
    if unit == "usd_month":
        return f"${v:,.0f}/month"
    if unit == "usd_night":
        return f"${v:,.0f}/night"
    if unit == "days":
        return f"{v:.0f} days"
    if unit == "months":
        return f"{v:.0f} months"
    raise ValueError(f"template {tpl.slug}: unknown unit {unit!r}")


def round_step(tpl: Template, v: float) -> float:
    """Round a value to the template's step (whole units for days/months)."""
    step = tpl.step
    r = round(v / step) * step
    return float(int(r)) if step >= 1 else float(round(r, 2))


def short_name(name: str, kind: str) -> str:
    """First name for a person, the full name for an organization."""
    return name.split()[0] if kind == "person" else name


def _weighted(rng: random.Random, pairs: tuple[tuple[str, int], ...]) -> str:
    total = sum(w for _, w in pairs)
    x = rng.random() * total
    for value, w in pairs:
        x -= w
        if x < 0:
            return value
    return pairs[-1][0]


@cache
def get_scenario(template_index: int, variant: int) -> Scenario:
    """Return the (cached, immutable) scenario for a template index and variant number."""
    if not 0 <= template_index < len(TEMPLATES):
        raise ValueError(f"template_index {template_index} out of range 0..{len(TEMPLATES) - 1}")
    tpl = TEMPLATES[template_index]
    rng = random.Random(f"a2demo-scenario:{tpl.family}/{tpl.slug}/{variant}")
    base = rng.uniform(*tpl.base)
    rt, rl, ro, rf = tpl.ratios
    a_target = round_step(tpl, base * rt)
    a_limit = round_step(tpl, base * rl)
    b_open = round_step(tpl, base * ro)
    b_floor = round_step(tpl, base * rf)
    a_name = rng.choice(tpl.a.names)
    b_name = rng.choice([n for n in tpl.b.names if n != a_name])
    lo, hi = tpl.c_quote_range
    c_quote = round(rng.uniform(lo, hi), 2)
    d_quote = round(rng.uniform(lo, hi), 2)
    if abs(d_quote - c_quote) < (hi - lo) * 0.15:
        d_quote = round(c_quote + (hi - lo) * (0.3 if c_quote < (lo + hi) / 2 else -0.3), 2)
    return Scenario(
        tpl=tpl, variant=variant, id=f"{tpl.family}/{tpl.slug}/{variant:03d}",
        alignment=_weighted(rng, tpl.alignments), item=rng.choice(tpl.items),
        a_name=a_name, b_name=b_name, c_name=rng.choice(tpl.c.names), d_name=rng.choice(tpl.d.names),
        a_target=a_target, a_limit=a_limit, b_open=b_open, b_floor=b_floor,
        c_quote=c_quote, d_quote=d_quote, ref=f"{tpl.ref_prefix}{rng.randint(10000, 99999)}",
    )


def scenario_record(sc: Scenario) -> dict:
    """Return the canonical `scenario` object of a run of this scenario (a fresh dict)."""
    tpl = sc.tpl
    fields = {"item": sc.item, "a_name": sc.a_name, "b_name": sc.b_name}
    return {
        "id": sc.id,
        "family": tpl.family,
        "alignment": sc.alignment,
        "title": tpl.title.format(**fields),
        "description": tpl.description.format(**fields),
        "metadata": {"template": tpl.slug, "variant": sc.variant, "key_term": tpl.term_key,
                     "generator": "a2annotate.demo"},
    }
