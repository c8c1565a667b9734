"""`a2annotate report`: the outcome report (or blind spots, or cross-play) as a table or JSON."""
from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import click

from app.cli.common import checked_engine, one_line_errors, study_scope_of

OUTCOME_BY = ("agent", "principal", "family", "model", "harness", "alignment", "scenario")


def _cell(value: Any, rate: bool) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a" if rate else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if rate and isinstance(value, (int, float)):
        return f"{value:+.0%}" if rate == "signed" else f"{value:.0%}"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, Any]]) -> str:
    """Returns a fixed-width text table: ``columns`` are (key, header, kind) with kind False
    (plain), True (a rate shown as a percentage) or "signed" (a signed percentage); text columns
    are left-aligned, numbers right-aligned."""
    cells = [[_cell(r.get(key), kind) for key, _, kind in columns] for r in rows]
    heads = [h for _, h, _ in columns]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    numeric = [all(_is_num(r.get(key)) for r in rows) and bool(rows) for key, _, _ in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(heads), line(["-" * w for w in widths])]
    out += [line(c) for c in cells]
    return "\n".join(out)


def _is_num(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def outcomes_text(payload: dict[str, Any], show_modes: bool = False) -> str:
    """Returns the readable outcome report: the label-source sentence, then one row per group."""
    cols = payload["columns"]
    key_cols = cols[: cols.index("runs")]
    spec: list[tuple[str, str, Any]] = [(k, k, False) for k in key_cols]
    spec += [("runs", "runs", False), ("n", payload["unit"] + "s", False),
             ("aggregate_success_rate", "aggregate success", True),
             ("principal_success_rate", "principal success", True),
             ("success_gap", "gap", "signed"), ("principal_unknown", "unknown", False),
             ("labelled_n", "labelled", False)]
    spec += [(c, c.removeprefix("cat:"), True) for c in cols if c.startswith("cat:")]
    if show_modes:
        spec += [(c, c.removeprefix("mode:"), True) for c in cols if c.startswith("mode:")]
    head = [f"Labels: {payload['label_source']}"
            + (f"; {payload['labels_without_agent']} label(s) name no responsible agent (trace-level)"
               if payload.get("labels_without_agent") else "") + ".",
            f"Outcome report by {payload['by']} (unit: {payload['unit']}; success threshold {payload['threshold']:g}; "
            f"taxonomy {payload['taxonomy']}" + (f"; family {payload['family']}" if payload.get("family") else "") + ")."]
    if not payload["rows"]:
        return "\n".join(head + ["No runs."])
    note = ("gap = aggregate success - principal success; category columns: share of labelled "
            f"{payload['unit']}s with a label of that category.")
    return "\n".join(head + ["", format_table(payload["rows"], spec), "", note])


def blind_spots_text(payload: dict[str, Any]) -> str:
    """Returns the readable blind-spot report: the label-source sentence, the runs with their
    reasons, then the rates per family, model and alignment."""
    out = [f"Labels: {payload['label_source']}.",
           (f"Blind spots: {len(payload['runs'])} run(s) counted as an aggregate success although a principal "
           f"failed or a failure was labelled (success threshold {payload['threshold']:g})."), ""]
    if payload["runs"]:
        rows = [{**r, "reasons": "; ".join(r["reasons"])} for r in payload["runs"]]
        out.append(format_table(rows, [("run_id", "run", False), ("family", "family", False),
                                       ("aggregate_score", "aggregate", False), ("reasons", "reasons", False)]))
        out.append("")
    for by, table in payload["rates"].items():
        out.append(f"Blind-spot rate by {by}:")
        out.append(format_table(table["rows"], [(by, by, False), ("runs", "runs", False),
                                                ("aggregate_success_runs", "aggregate successes", False),
                                                ("blind_spot_runs", "blind spots", False),
                                                ("blind_spot_rate", "rate", True)]))
        out.append("")
    return "\n".join(out).rstrip()


def crossplay_text(payload: dict[str, Any]) -> str:
    """Returns the readable cross-play report: one row per ordered pairing."""
    by = payload["by"]
    out = [(f"Cross-play by {by}: runs of mixed or competitive alignment between different principals "
           f"(success threshold {payload['threshold']:g})."), ""]
    if not payload["cells"]:
        return "\n".join(out + ["No pairings."])
    out.append(format_table(payload["cells"], [
        ("a", f"{by} a", False), ("b", f"{by} b", False), ("runs", "runs", False), ("n", "n", False),
        ("a_mean_score", "a mean score", False), ("b_mean_score", "b mean score", False),
        ("a_success_rate", "a success", True), ("b_success_rate", "b success", True)]))
    return "\n".join(out)


@click.command("report")
@click.option("--by", type=click.Choice(OUTCOME_BY), default="agent", show_default=True,
              help="Grouping of the outcome report.")
@click.option("--source", default="auto", show_default=True,
              help="Which labels count: auto, gold, majority or annotator:NAME.")
@click.option("--taxonomy", default=None, help="Taxonomy version (key or key@version); default latest a2-failures.")
@click.option("--family", default=None, help="Only runs of this scenario family.")
@click.option("--study", default=None, help="Only the runs of this study (name or id).")
@click.option("--blind-spots", "blind", is_flag=True,
              help="Report the blind-spot runs (aggregate success although a principal failed or a failure was labelled).")
@click.option("--crossplay", type=click.Choice(("model", "harness")), default=None,
              help="Report cross-play by model or harness instead.")
@click.option("--modes", "show_modes", is_flag=True, help="Also show one column per failure mode (text output).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (the REST API's shape).")
@one_line_errors
def report(by: str, source: str, taxonomy: str | None, family: str | None, study: str | None, blind: bool,
           crossplay: str | None, show_modes: bool, as_json: bool) -> None:
    """Outcome report: per group, the aggregate success beside each principal's own success and
    the labelled failure categories; the first line says which labels were used."""
    from sqlmodel import Session

    from app.core.config import get_settings
    from app.reports import service

    if blind and crossplay:
        raise click.UsageError("use --blind-spots or --crossplay, not both")
    engine = checked_engine()
    threshold = get_settings().success_threshold
    with Session(engine) as session:
        _, scope = study_scope_of(session, study)
        data = service.load_report_data(session, threshold=threshold, taxonomy=taxonomy, family=family,
                                        with_labels=crossplay is None, scope=scope)
    if crossplay:
        payload = service.crossplay_payload(data, crossplay)
        text = crossplay_text if not as_json else None
    elif blind:
        payload = service.blind_spots_payload(data, source)
        text = blind_spots_text if not as_json else None
    else:
        payload = service.outcomes_payload(data, by, source)
        text = (lambda p: outcomes_text(p, show_modes)) if not as_json else None
    click.echo(json.dumps(payload, indent=2, allow_nan=False) if as_json else text(payload))
