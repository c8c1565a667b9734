"""`a2annotate estimate`: failure rates with intervals, from humans, a judge, and both (PPI++)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from sqlmodel import Session

from app.cli.common import checked_engine, one_line_errors
from app.cli.report import format_table

BY = ("agent", "principal", "family", "model", "harness")


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def estimates_text(payload: dict[str, Any]) -> str:
    """Returns the readable estimates: a header, one row per (group, method), the notes, and
    the planner's rows when there are any."""
    head = (f"Rate of {payload['kind']} {payload['target']}"
            + (f" by {payload['by']}" if payload["by"] else "")
            + f", {payload['confidence']:.0%} intervals, {payload['n_units']} units"
            + (f"; judge {payload['judge']}" if payload["judge"] else "; no judge (--judge NAME adds judge and PPI rows)")
            + ".")
    rows = [{**r, "rate": _pct(r["rate"]),
             "interval": "n/a" if r["ci_low"] is None else f"[{r['ci_low']:.1%}, {r['ci_high']:.1%}]",
             "lam": "" if r["lam"] is None else f"{r['lam']:.2f}",
             "n_eff": "" if r["n_effective"] is None else f"{r['n_effective']:.0f}",
             "note": r["note"] or ""} for r in payload["rows"]]
    cols = [("group", "group", False), ("method", "method", False), ("rate", "rate", False),
            ("interval", "interval", False), ("n_human", "human labels", False), ("n_judge", "judge labels", False),
            ("lam", "lambda", False), ("n_eff", "worth (labels)", False), ("note", "note", False)]
    out = [head, "", format_table(rows, cols), ""]
    out += [f"Note: {n}" for n in payload["notes"]]
    if payload.get("plan"):
        out += ["", "Planner (more randomly sampled human labels for the target half-width):"]
        prow = [{"group": p["group"], "method": p["method"], "n": p["n_human"],
                 "now": "n/a" if p["half_width_now"] is None else f"±{p['half_width_now']:.1%}",
                 "target": f"±{p['target_half_width']:.1%}",
                 "more": "unreachable" if p["more_needed"] is None else str(p["more_needed"]),
                 "policy": p["policy"]} for p in payload["plan"]]
        out.append(format_table(prow, [("group", "group", False), ("method", "method", False),
                                       ("n", "labels now", False), ("now", "half-width now", False),
                                       ("target", "target", False), ("more", "more labels", False),
                                       ("policy", "policy", False)]))
    return "\n".join(out)


@click.command("estimate")
@click.option("--mode", default=None, help="A failure mode code (e.g. CF1).")
@click.option("--category", default=None, help="A failure category (instead of --mode).")
@click.option("--by", type=click.Choice(BY), default=None,
              help="Rows per group: agent / model / harness count agent-runs, principal principal-runs, family runs.")
@click.option("--judge", default=None, help="The judge (NAME, judge:NAME or detector:NAME): adds the judge-only and "
                                            "PPI rows.")
@click.option("--taxonomy", default=None, help="Taxonomy version (key or key@version); default latest a2-failures.")
@click.option("--confidence", type=float, default=0.95, show_default=True, help="Interval confidence.")
@click.option("--target-half-width", type=float, default=None,
              help="Plan: how many more randomly sampled human labels bring each interval to this half-width.")
@click.option("--json", "as_json", is_flag=True, help="Print the estimates as JSON (the REST API's shape).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the rows to this file: .csv or .parquet.")
@one_line_errors
def estimate(mode: str | None, category: str | None, by: str | None, judge: str | None, taxonomy: str | None,
             confidence: float, target_half_width: float | None, as_json: bool, out: Path | None) -> None:
    """Failure rates with intervals: from human labels (gold where adjudicated, else the human
    majority), from a judge alone (biased by its errors), and from both by prediction-powered
    inference (PPI++). Human-only and PPI intervals are valid when the humanly labelled runs
    are a random sample (batches made with policy random; see docs/studies.md)."""
    from app.estimates.service import estimates_payload
    from app.estimates.tables import table_bytes

    if (mode is None) == (category is None):
        raise click.UsageError("give one of --mode or --category")
    fmt = None
    if out is not None:
        fmt = out.suffix.lstrip(".").lower()
        if fmt not in ("csv", "parquet"):
            raise click.UsageError("--out: the file must end in .csv or .parquet")
    engine = checked_engine()
    with Session(engine) as session:
        payload = estimates_payload(session, mode=mode, category=category, by=by, judge=judge, taxonomy=taxonomy,
                                    confidence=confidence, target_half_width=target_half_width)
    if out is not None:
        body, _ = table_bytes(payload["rows"], fmt)
        out.write_bytes(body)
    click.echo(json.dumps(payload, indent=2, allow_nan=False) if as_json else estimates_text(payload))
