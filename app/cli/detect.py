"""`a2annotate detect`: run the detectors on stored runs, or score them (`--score`)."""
from __future__ import annotations

import json
from typing import Any

import click

from app.cli.common import checked_engine, echo_err, is_tty, one_line_errors, study_scope_of


def _cell(value: float | None, ci: list[float] | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def score_text(rep: dict[str, Any]) -> str:
    """The score report as a table: one row per (source, mode) plus each source's overall row."""
    from app.cli.agreement import _table

    head = (f"Detectors against the {'seeded demo truth' if rep['reference'] == 'truth' else 'adjudicated gold labels'}"
            f" under {rep['taxonomy']}, level {rep['level']}: {rep['n_reference_runs']} runs with a reference. "
            f"Intervals: Wilson {rep['confidence']:.0%} for precision and recall, bootstrap over "
            f"{rep['n_boot']} resamples of runs for F1.")
    rows = []
    for s in rep["sources"]:
        for r in s["modes"] + [s["overall"]]:
            if r["mode"] == "ALL" and len(s["modes"]) <= 1:
                continue
            rows.append([s["source"], r["mode"], str(r["n_units"]), str(r["tp"]), str(r["fp"]), str(r["fn"]),
                         _cell(r["precision"], r["precision_ci"]), _cell(r["recall"], r["recall_ci"]),
                         _cell(r["f1"], r["f1_ci"])])
    from app.cli.agreement import coefficient_cell

    tail = ["", "Agreement among the human annotators, with detector hints on vs off (all modes pooled):"]
    for name, side in (rep.get("human_agreement") or {}).items():
        if side["overall"] is None:
            tail.append(f"  {name}: no submitted annotations")
            continue
        o = side["overall"]
        tail.append(f"  {name}: {side['n_submissions']} submissions, {side['n_units']} units; percent "
                    f"{coefficient_cell(o['percent'])}, kappa (Fleiss) {coefficient_cell(o['fleiss_kappa'])}, "
                    f"alpha {coefficient_cell(o['krippendorff_alpha'])}")
    if not rows:
        return head + "\nNo detector labels on runs with a reference yet (run `a2annotate detect`)." + "\n".join(tail)
    return head + "\n\n" + _table(rows, ["source", "mode", "runs", "tp", "fp", "fn", "precision", "recall", "F1"],
                                  [False, False, True, True, True, True, False, False, False]) + "\n" + "\n".join(tail)


@click.command()
@click.option("--only", "only", multiple=True, metavar="NAME",
              help="Run only this detector (repeatable; comma-separated also works).")
@click.option("--run", "run_ids", multiple=True, metavar="RUN_ID", help="Only this run (repeatable).")
@click.option("--list", "list_only", is_flag=True, help="List the registered detectors and exit.")
@click.option("--score", is_flag=True, help="Do not run anything: score the stored detector labels.")
@click.option("--reference", type=click.Choice(["truth", "gold"]), default="truth", show_default=True,
              help="With --score: the demo's seeded truth, or the adjudicated gold labels.")
@click.option("--level", type=click.Choice(["run", "agent"]), default="run", show_default=True,
              help="With --score: count (run, mode) cells, or (run, mode, responsible agent).")
@click.option("--n-boot", type=click.IntRange(0, 10_000), default=1000, show_default=True,
              help="With --score: bootstrap resamples for the F1 interval.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary or scores as JSON.")
@click.option("--study", default=None, help="Only the runs of this study (name or id).")
@one_line_errors
def detect(only: tuple[str, ...], run_ids: tuple[str, ...], list_only: bool, score: bool, reference: str,
           level: str, n_boot: int, as_json: bool, study: str | None) -> None:
    """Run the detectors; their labels are stored as annotator `detector:<name>`.

    Each detector's labels on a run replace its previous ones there (idempotent); other
    annotations are never touched. A detector that fails on a run is reported and the others go
    on (exit status 1 and one `Error:` line if any failed; `--json` lists every failure). Detectors: the built-ins, the `a2annotate.detectors` entry
    points and the DETECTORS setting (see docs/detectors.md).
    """
    from sqlmodel import Session

    from app.detectors import service

    names = [n for o in only for n in o.split(",") if n.strip()]
    if list_only:
        reg = service.registry()
        for d in reg.detectors:
            click.echo(f"{d.name}\t{d.version}\t{d.key}\t{d.origin}\t{d.description}")
        for p in reg.problems:
            echo_err(f"warning: {p}")
        return
    engine = checked_engine()
    with Session(engine) as session:
        if score:
            rep = service.score_report(session, reference=reference, level=level, n_boot=n_boot)
            click.echo(json.dumps(rep, indent=2) if as_json else score_text(rep))
            return
        tty = is_tty()

        def progress(sm: service.DetectSummary) -> None:
            if sm.runs % 50 == 0:
                click.echo(f"\r{sm.runs} runs ...", err=True, nl=False)

        _, scope = study_scope_of(session, study)
        summary = service.detect_all(session, only=names or None, run_ids=list(run_ids) or None,
                                     progress=progress if tty else None, scope=scope)
        if tty:
            click.echo("\r", err=True, nl=False)
    for p in summary.problems:
        echo_err(f"warning: {p}")
    click.echo(json.dumps(summary.to_dict(), indent=2) if as_json else summary.line())
    if summary.errors:
        first = summary.errors[0]
        names = sorted({e["detector"] for e in summary.errors})
        raise click.ClickException(
            f"{len(summary.errors)} detector failure(s) ({', '.join(names)}); first: run {first['run_id']}: "
            f"detector {first['detector']}: {first['error']}" + ("" if as_json else " (--json lists them all)"))
