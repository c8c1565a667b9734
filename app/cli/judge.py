"""`a2annotate judge validate|run|list|score`: LLM judges over stored runs (see docs/judges.md)."""
from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import click

from app.cli.common import checked_engine, echo_err, is_tty, one_line_errors


@click.group()
def judge() -> None:
    """LLM judges: check a judge file, run it over runs, list judges, calibrate against humans.

    A judge file (YAML) names an OpenAI-compatible endpoint, a model, a taxonomy and a strategy;
    its content hash is its version. Judge labels are stored as annotator `judge:<name>`.
    """


def _read(path: str) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise click.ClickException(f"{path}: not UTF-8 text") from None


@judge.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@one_line_errors
def validate(file: str) -> None:
    """Check a judge file: schema (the bad key is named), templates, and, when the database is
    reachable, its taxonomy and modes. Prints the name and version."""
    from sqlmodel import Session

    from app.judges import service

    text = _read(file)
    jd = service.check_text(None, text, file)
    try:
        engine = checked_engine()
    except Exception:  # noqa: BLE001 - the file itself is fine; say what could not be checked
        click.echo(f"{file}: ok: {jd.name}@{jd.version} (strategy {jd.strategy}; taxonomy not checked: "
                   "no database)")
        return
    with Session(engine) as session:
        jd = service.check_text(session, text, file)
    click.echo(f"{file}: ok: {jd.name}@{jd.version} (strategy {jd.strategy}, taxonomy {jd.definition['taxonomy']})")


class _Bar:
    WIDTH = 30

    def __init__(self, enabled: bool):
        self.enabled, self.last, self.started = enabled, 0.0, time.monotonic()

    def __call__(self, p) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.1 and p.state == "running"):
            return
        self.last = now
        n = p.done + p.error
        frac = n / p.total if p.total else 1.0
        bar = "#" * int(frac * self.WIDTH)
        click.echo(f"\r[{bar:<{self.WIDTH}}] {frac:4.0%} {n}/{p.total} runs, errors {p.error}, running "
                   f"{p.running}, delayed {p.delayed}, tokens {p.tokens_in + p.tokens_out}, cost {p.cost:.4f}",
                   nl=False, err=True)

    def close(self) -> None:
        if self.enabled:
            click.echo("", err=True)


@judge.command("run")
@click.argument("ref", metavar="FILE|NAME")
@click.option("--runs", "run_ids", multiple=True, metavar="ID",
              help="Judge only these runs (repeatable; comma-separated also works).")
@click.option("--batch", default=None, metavar="B", help="Judge the runs of this assignment batch.")
@click.option("--study", default=None, metavar="S", help="Only the runs of this study (name or id).")
@click.option("--limit", type=click.IntRange(1), default=None, metavar="N",
              help="Judge at most N runs not yet judged by this version.")
@click.option("--dry-run", is_flag=True,
              help="Estimate calls, tokens and cost for the selection; refuse (exit 1) above the cost cap.")
@click.option("--processes", type=click.IntRange(1, 64), default=None, metavar="N",
              help="Judge the runs in N processes, each with its share of the limits (default: the judge file's "
                   "limits.processes, else 2 on a machine of 2 or more CPUs for 2000 runs or more, else 1).")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate or the judge run's summary as JSON.")
@one_line_errors
def run(ref: str, run_ids: tuple[str, ...], batch: str | None, study: str | None, limit: int | None,
        dry_run: bool, processes: int | None, as_json: bool) -> None:
    """Run a judge (a judge FILE, registered first, or a registered NAME or NAME@VERSION) over the
    stored runs, or a selection. Runs this version already judged at their current content are
    skipped, so an interrupted run is resumed by running it again. Ctrl-C cancels: finished runs
    are kept, the rest stay queued."""
    from sqlmodel import Session

    from app.judges import service

    ids = [i.strip() for r in run_ids for i in r.split(",") if i.strip()]
    engine = checked_engine()
    with Session(engine) as session:
        if Path(ref).is_file():
            jv, created = service.register(session, _read(ref), ref)
            session.commit()
            if not as_json:
                echo_err(f"{'registered' if created else 'known'} judge {jv.name}@{jv.version}")
        else:
            jv = service.resolve_judge(session, ref)
        scope = None
        if study is not None:
            from app.studies.service import get_study, study_run_ids

            scope = study_run_ids(session, get_study(session, study))
        pending, skipped = service.select_pending(session, jv, run_ids=ids or None, batch=batch, limit=limit,
                                                  scope=scope)
        if not dry_run:
            from app.judges import runner

            if runner.processes_for(jv.definition, len(pending), processes, engine) > 1:
                runner.warm_up()  # the fork server imports the runner while this process plans
        if dry_run:
            est = service.estimate(session, jv, [pk for pk, _, _ in pending])
            est.update(judge=jv.name, version=jv.version, skipped=skipped)
            if as_json:
                click.echo(json.dumps(est, indent=2))
            else:
                cap = est["cost_cap"]
                click.echo(f"{jv.name}@{jv.version}: {est['runs']} runs to judge ({skipped} already judged), "
                           f"{est['calls']} calls, about {est['tokens_in']} input and {est['tokens_out']} output "
                           f"tokens, cost about {est['cost']:.4f} (at most {est['cost_max']:.4f}); cost cap "
                           f"{'none' if cap is None else cap}")
            if est["over_cap"]:
                raise click.ClickException(f"the estimated cost {est['cost']:.4f} exceeds the cost cap {est['cost_cap']}")
            return
        jr = service.plan(session, jv, run_ids=ids or None, batch=batch, limit=limit, scope=scope)
        session.commit()
        jr_id = jr.id
    bar = _Bar(is_tty())
    cancel = threading.Event()
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None

    def on_sigint(signum, frame) -> None:  # first Ctrl-C: stop cleanly; a second one: the default
        cancel.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if previous is not None:
        signal.signal(signal.SIGINT, on_sigint)
    try:
        service.execute(engine, jr_id, progress=bar, cancel_event=cancel, processes=processes)
    finally:
        bar.close()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    with Session(engine) as session:
        status = service.judge_run_status(session, session.get(service.JudgeRun, jr_id))
    if as_json:
        click.echo(json.dumps(status, indent=2))
    else:
        click.echo(f"judge run {status['id']} {status['state']}: {jv_ref(status)}: judged {status['judged']}, "
                   f"errors {status['errors']}, skipped {status['skipped']}; {status['calls']} calls, "
                   f"{status['tokens_in']} input / {status['tokens_out']} output tokens, cost {status['cost']:.4f}")
    if status["state"] == "cancelled":
        raise click.ClickException("cancelled; run the same command again to judge the rest")
    if status["state"] == "error":
        raise click.ClickException(status["error"] or "the judge run failed")
    if status["errors"]:
        with Session(engine) as session:
            jv = service.resolve_judge(session, jv_ref(status))
            first = service.results(session, jv, state="error", page_size=1)["results"]
        where = f"; first: run {first[0]['run_id']}: {first[0]['error']}" if first else ""
        raise click.ClickException(f"{status['errors']} run(s) could not be judged{where}")


def jv_ref(status: dict[str, Any]) -> str:
    return f"{status['judge']}@{status['version']}"


@judge.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@one_line_errors
def list_cmd(as_json: bool) -> None:
    """Registered judges and their versions (newest first), with runs judged and errors."""
    from sqlmodel import Session

    from app.judges import service

    with Session(checked_engine()) as session:
        rows = service.list_judges(session)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no judges registered (a2annotate judge run FILE)")
    for j in rows:
        for v in j["versions"]:
            click.echo(f"{j['name']}\t{v['version']}\t{v['strategy']}\t{v['model']}\t{v['taxonomy']}\t"
                       f"judged {v['judged']}\terrors {v['errors']}\t{v['created_at'][:19]}")


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _ci(c: list[float] | None) -> str:
    return "" if not c else f" [{c[0]:.2f}, {c[1]:.2f}]"


def score_text(rep: dict[str, Any]) -> str:
    lines = [f"{rep['judge']}@{rep['version']} ({rep['strategy']}, {rep['model']}) under {rep['taxonomy']}: "
             f"{rep['n_runs']} of {rep['n_judged']} judged runs have a reference "
             f"({', '.join(f'{k} {v}' for k, v in rep['reference'].items()) or 'none'})."]
    o = rep["overall"]
    lines.append(f"overall: precision {_f(o['precision'])}{_ci(o['precision_ci'])}, recall {_f(o['recall'])}"
                 f"{_ci(o['recall_ci'])}, F1 {_f(o['f1'])}{_ci(o['f1_ci'])}, kappa {_f(o['kappa']['value'])}"
                 f"{_ci(o['kappa'].get('ci'))}")
    lines.append("")
    lines.append("mode    tp   fp   fn   tn  precision  recall  F1     kappa")
    for r in rep["modes"]:
        if r["tp"] + r["fp"] + r["fn"] == 0:
            continue
        lines.append(f"{r['mode']:<6} {r['tp']:>4} {r['fp']:>4} {r['fn']:>4} {r['tn']:>4}  {_f(r['precision']):>9}  "
                     f"{_f(r['recall']):>6}  {_f(r['f1']):>5}  {_f(r['kappa']['value'])}")
    a = rep["agent_accuracy"]
    ev = rep["evidence_overlap"]
    at = rep["attribution"]
    lines += ["", f"agent attribution accuracy {_f(a['value'])} ({a['correct']}/{a['n']}); evidence overlap "
                  f"(Jaccard) {_f(ev['value'])} over {ev['n']} labels",
              f"failure point ({at['from']}): agent {_f(at['agent_accuracy'])}, step exact "
              f"{_f(at['step_accuracy'])}, step within ±{at['k']} {_f(at['step_accuracy_within_k'])} over {at['n']} runs",
              f"cost: {rep['cost']['tokens']} tokens, {rep['cost']['cost']:.4f}; per correct label "
              f"{_f(rep['cost']['cost_per_correct_label'])} ({_f(rep['cost']['tokens_per_correct_label'])} tokens)",
              f"disagreements: {len(rep['disagreements'])} runs"]
    if rep.get("versions"):
        lines.append("versions: " + "; ".join(f"{v['version']} kappa {_f(v['kappa'])} over {v['n_runs']} runs"
                                               for v in rep["versions"]))
    return "\n".join(lines)


@judge.command("score")
@click.argument("ref", metavar="NAME[@VERSION]")
@click.option("--k", "k", type=click.IntRange(0), default=1, show_default=True,
              help="Step tolerance: a step within ±k seqs of the reference's counts for step accuracy within k.")
@click.option("--n-boot", type=click.IntRange(0, 10_000), default=1000, show_default=True,
              help="Bootstrap resamples for the F1 and kappa intervals.")
@click.option("--seed", default=0, show_default=True, help="Seed of the bootstrap.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole report as JSON.")
@one_line_errors
def score(ref: str, k: int, n_boot: int, seed: int, as_json: bool) -> None:
    """Calibrate a judge against the adjudicated gold labels, or the human majority where a run has
    no gold: precision, recall, F1 and kappa per mode and category, confusion, attribution accuracy,
    evidence overlap, disagreements, kappa across versions, cost per correct label."""
    from sqlmodel import Session

    from app.judges import service

    with Session(checked_engine()) as session:
        rep = service.score(session, ref, n_boot=n_boot, seed=seed, k=k)
    click.echo(json.dumps(rep, indent=2, default=str) if as_json else score_text(rep))
