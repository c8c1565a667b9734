"""`a2annotate agreement`: the agreement report on the stored labels, as a table or JSON."""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from app.cli.common import checked_engine, one_line_errors

#: (key in a report row, column header)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("percent", "percent"),
    ("cohen_kappa", "kappa (Cohen)"),
    ("fleiss_kappa", "kappa (Fleiss)"),
    ("krippendorff_alpha", "alpha"),
    ("gwet_ac1", "AC1"),
)


def coefficient_cell(c: dict[str, Any] | None) -> str:
    """Returns ``0.712 [0.60, 0.81]``, ``0.712`` without an interval, or ``n/a`` when undefined."""
    if not c or c.get("value") is None:
        return "n/a"
    text = f"{c['value']:.3f}"
    if c.get("ci"):
        text += f" [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]"
    return text


def _table(rows: Sequence[Sequence[str]], heads: Sequence[str], numeric: Sequence[bool]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(heads)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return "\n".join([line(heads), line(["-" * w for w in widths])] + [line(r) for r in rows])


def report_text(report: dict[str, Any], gold: dict[str, Any] | None = None) -> str:
    """Returns the readable agreement report: a header, one row per mode, category and the
    pooled overall row (mode, category, n, prevalence, percent, kappas, alpha, AC1 with
    intervals, flag), the notes (kappa paradox, undefined cells), blame agreement and evidence
    overlap, and each annotator against gold when ``gold`` is given."""
    s = report["settings"]
    kinds = report.get("annotator_kinds", {})
    who = ", ".join(f"{a}{' (judge)' if kinds.get(a) == 'judge' else ''}" for a in report["annotators"]) or "none"
    out = [
        f"Agreement under {report['taxonomy']}" + (f", family {report['family']}" if report.get("family") else "")
        + f"; level {report['level']}: {report['n_units']} units from {report['n_runs']} submitted runs "
        "(a coefficient counts only units rated by at least two annotators).",
        f"Annotators: {who}.",
        f"Intervals: {s['confidence']:.0%} bootstrap percentile over {s['n_boot']} resamples of runs (seed {s['seed']}).",
        "",
    ]
    heads = ["mode", "category", "n", "prevalence"] + [h for _, h in COLUMNS] + ["flag"]
    rows = []

    def row(name: str, cat: str, r: dict[str, Any]) -> list[str]:
        prev = "n/a" if r.get("prevalence") is None else f"{r['prevalence']:.1%}"
        return ([name, cat, str(r["n_units"]), prev] + [coefficient_cell(r.get(k)) for k, _ in COLUMNS]
                + ["PARADOX" if r.get("kappa_paradox") else ""])

    for r in report["modes"]:
        rows.append(row(r["mode"], r["category"], r))
    for r in report["categories"]:
        rows.append(row(f"[{r['category']}]", "category", r))
    rows.append(row("ALL", "overall", report["overall"]))
    out.append(_table(rows, heads, [False, False, True, True] + [False] * len(COLUMNS) + [False]))
    out.append("")
    if any(r[-1] for r in rows):
        out.append("PARADOX: prevalence is extreme, raw agreement is high and kappa is low (the kappa paradox): "
                   "read Gwet's AC1 beside kappa and alpha.")
    out.append("n/a: the coefficient is undefined for these data (e.g. nobody marked the mode: no variation).")
    b, e = report["blame_agreement"], report["evidence_overlap"]
    blame = "n/a" if b["proportion"] is None else f"{b['proportion']:.1%}"
    ev = "n/a" if e["mean_jaccard"] is None else f"{e['mean_jaccard']:.3f}"
    out.append(f"Blame agreement: {blame} of {b['n_pairs']} annotator pairs who marked the same mode on a run "
               f"named the same responsible agent(s).")
    out.append(f"Evidence overlap: mean Jaccard {ev} over {e['n_pairs']} such pairs.")
    out.append(f"Labels without a responsible agent (trace-level; in mode agreement, not in blame agreement): "
               f"{report.get('labels_without_agent', 0)}; attribution-only labels (no mode): "
               f"{report.get('labels_without_mode', 0)}.")
    att = report.get("attribution_agreement")
    if att and att["n_runs"]:
        out.append(attribution_text(att))
    if gold is not None:
        out.append("")
        if not gold["n_reference_runs"]:
            out.append("Agreement with gold: no run is adjudicated yet.")
        else:
            out.append(f"Agreement with gold ({gold['n_reference_runs']} adjudicated runs):")
            grows = []
            for a in gold["annotators"]:
                mi = a["micro"]
                grows.append([a["annotator"], a["kind"], str(a["n_runs"]), coefficient_cell(a["cohen_kappa"]),
                              coefficient_cell(a["percent"])]
                             + ["n/a" if mi[k] is None else f"{mi[k]:.3f}" for k in ("precision", "recall", "f1")])
            out.append(_table(grows, ["annotator", "kind", "runs", "kappa", "percent", "precision", "recall", "F1"],
                              [False, False, True, False, False, True, True, True]))
    return "\n".join(out)


def _share(row: dict[str, Any]) -> str:
    return "n/a" if row["proportion"] is None else f"{row['proportion']:.1%} ({row['n_agree']}/{row['n_pairs']})"


def attribution_text(att: dict[str, Any]) -> str:
    """Returns the attribution agreement (who and when) in one line per measure."""
    return "\n".join([
        f"Attribution agreement over {att['n_runs']} run(s) with two or more attributions "
        f"({att['n_attributions']} attribution labels):",
        f"  same agent: {_share(att['agent'])}",
        f"  same step: {_share(att['step_exact'])}",
        f"  step within +-{att['k']}: {_share(att['step_within_k'])}",
        f"  same agent and step: {_share(att['agent_and_step'])}",
    ])


@click.command()
@click.option("--level", type=click.Choice(["run", "agent"]), default="run", show_default=True,
              help="Unit: a run, or a (run, responsible agent) pair.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (the API's shape).")
@click.option("--taxonomy", default=None, help="Taxonomy version: key, key@version or id (default: latest a2-failures).")
@click.option("--family", default=None, help="Only runs of this scenario family.")
@click.option("--annotators", default=None, help="Comma-separated user names (default: every human annotator and dataset source, e.g. mad:annotator_1).")
@click.option("--include-judges", is_flag=True, help="Count judge:* annotators (run audits, imported judges) too.")
@click.option("--n-boot", type=click.IntRange(0, 10_000), default=None,
              help="Bootstrap resamples for the intervals (default: the bootstrap_resamples setting; 0: none).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--gold/--no-gold", default=True, show_default=True, help="Also report each annotator against gold.")
@click.option("--k", "k", type=click.IntRange(min=0), default=1, show_default=True,
              help="Attribution agreement: steps at most k apart count as agreeing (step within +-k).")
@one_line_errors
def agreement(level: str, as_json: bool, taxonomy: str | None, family: str | None, annotators: str | None,
              include_judges: bool, n_boot: int | None, seed: int, gold: bool, k: int) -> None:
    """Inter-annotator agreement on the submitted labels of one taxonomy version.

    Per mode, per category and overall: units, prevalence, percent agreement, Cohen's kappa
    (mean pairwise), Fleiss' kappa, Krippendorff's alpha and Gwet's AC1, each with a bootstrap
    interval, and the kappa-paradox flag; then blame agreement, evidence overlap, how many
    labels name no agent (trace-level) or no mode (attribution-only), the attribution agreement
    (same agent, same step, step within +-k) of attribution-only labels, and (with --gold) each
    annotator against the adjudicated gold labels.
    """
    from sqlmodel import Session

    from app.agreement import service
    from app.core.config import get_settings

    nb = get_settings().bootstrap_resamples if n_boot is None else n_boot
    engine = checked_engine()
    with Session(engine) as session:
        data = service.load_agreement_data(session, taxonomy=taxonomy, family=family, annotators=annotators,
                                           include_judges=include_judges)
    report = service.agreement_payload(data, level=level, n_boot=nb, seed=seed)
    report["attribution_agreement"] = service.attribution_payload(data, k=k)
    for key in ("taxonomy", "family", "include_judges", "annotators_filter", "annotator_kinds", "n_labels",
                "n_submissions", "labels_without_agent", "labels_without_mode"):
        report["attribution_agreement"].pop(key, None)
    gold_report = service.gold_payload(data, n_boot=nb, seed=seed) if gold else None
    if as_json:
        if gold_report is not None:
            report["gold"] = {"n_reference_runs": gold_report["n_reference_runs"],
                              "gold_origins": gold_report["gold_origins"],
                              "annotators": gold_report["annotators"]}
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(report_text(report, gold_report))
