"""`a2annotate study create|list|show|member|batch|undo|remove|rule|fill`: studies and their queues."""
from __future__ import annotations

import json

import click

from app.cli.common import checked_engine, one_line_errors
from app.core.db import session_scope, write_session

SELECTION_OPTIONS = ("family", "scenario", "alignment", "status", "condition", "model", "harness", "source", "tags",
                     "run_ids")


@click.group()
def study() -> None:
    """Studies: a taxonomy, a run selection and members; their queues."""


def _selection(opts: dict) -> dict:
    sel = {k: list(v) for k, v in opts.items() if k in SELECTION_OPTIONS and v}
    for k in ("imported_after", "imported_before"):
        if opts.get(k):
            sel[k] = opts[k]
    return sel


@study.command("create")
@click.argument("name")
@click.option("--taxonomy", help="Taxonomy version (key@version); default latest a2-failures.")
@click.option("--family", multiple=True, help="Runs of this scenario family (repeat for any of several).")
@click.option("--scenario", multiple=True, help="Scenario id; `*` wildcards (commerce/*).")
@click.option("--alignment", multiple=True, help="cooperative | mixed | competitive.")
@click.option("--status", multiple=True, help="Run status.")
@click.option("--condition", multiple=True, help="The run's metadata.condition (or metadata.path.condition).")
@click.option("--model", multiple=True, help="Some agent of the run has this model.")
@click.option("--harness", multiple=True, help="Some agent of the run has this harness.")
@click.option("--source", multiple=True, help="The file the run was imported from; `*` wildcards (*/whowhen/*).")
@click.option("--tags", "--tag", "tags", multiple=True, help="The run's metadata.tags holds this tag.")
@click.option("--run-id", "run_ids", multiple=True, help="This run.")
@click.option("--imported-after", help="Imported at or after this ISO date-time (an import batch by time).")
@click.option("--imported-before", help="Imported at or before this ISO date-time.")
@click.option("--lead", "leads", multiple=True, help="A reviewer (or admin) who leads the study.")
@click.option("--member", "annotators", multiple=True, help="An annotator of the study.")
@click.option("--description", help="Free text.")
@one_line_errors
def study_create(name: str, taxonomy: str | None, leads: tuple, annotators: tuple, description: str | None,
                 **opts) -> None:
    """Create study NAME over the runs the filters select (none: every run)."""
    from app.studies.service import create_study, study_dict

    with session_scope(checked_engine()) as session:
        st = create_study(session, name, taxonomy=taxonomy, selection=_selection(opts), leads=list(leads),
                          annotators=list(annotators), description=description)
        info = study_dict(session, st)
    click.echo(f"created study {info['name']}: {info['runs']} run(s), taxonomy {info['taxonomy']}")


@study.command("list")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of a table.")
@one_line_errors
def study_list(as_json: bool) -> None:
    """List the studies with their runs, taxonomy, selection and members."""
    from app.studies.service import list_studies

    with session_scope(checked_engine()) as session:
        rows = list_studies(session)
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if not rows:
        click.echo("no studies")
        return
    for r in rows:
        members = ", ".join(f"{m['username']} ({m['role']})" for m in r["members"]) or "no members"
        click.echo(f"{r['name']}\t{r['runs']} run(s)\t{r['taxonomy']}\t{json.dumps(r['selection'])}\t{members}")


@study.command("member")
@click.argument("name")
@click.argument("username")
@click.option("--role", type=click.Choice(["lead", "annotator", "none"]), required=True,
              help="The member's role in the study; none removes them.")
@one_line_errors
def study_member(name: str, username: str, role: str) -> None:
    """Add USERNAME to study NAME (or change or remove their role)."""
    from app.studies.service import get_study, remove_member, set_member

    with session_scope(checked_engine()) as session:
        st = get_study(session, name)
        if role == "none":
            remove_member(session, st, username)
        else:
            set_member(session, st, username, role)
    click.echo(f"{username}: {role} in {name}")


@study.command("batch")
@click.argument("name")
@click.option("--annotator", "annotators", multiple=True, required=True, help="An annotator (repeat).")
@click.option("--k", type=int, default=1, show_default=True, help="Distinct annotators per run.")
@click.option("--policy", type=click.Choice(["random", "stratified", "disagreement", "uncertainty", "flagged", "all"]),
              default="random", show_default=True, help="How the runs are drawn (docs/studies.md).")
@click.option("--size", "sample_size", type=int, help="How many runs (default: every run the policy takes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the draw.")
@click.option("--stratify-by", help="stratified: a run field, detector:<name> or judge:<name>.")
@click.option("--allocation", type=click.Choice(["proportional", "equal"]), default="proportional",
              show_default=True, help="stratified: how the sample is shared between strata.")
@click.option("--against", help="disagreement: judge:<name> or detector:<name> (default: humans among themselves).")
@click.option("--source", help="uncertainty: judge:<name>; flagged: a detector or judge (default every one).")
@click.option("--batch", "batch_name", help="Batch name (default batch-<time>).")
@click.option("--preview", is_flag=True, help="Only say what would be made.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@one_line_errors
def study_batch(name: str, annotators: tuple, k: int, policy: str, sample_size: int | None, seed: int,
                stratify_by: str | None, allocation: str, against: str | None, source: str | None,
                batch_name: str | None, preview: bool, as_json: bool) -> None:
    """Draw a batch of study NAME's runs by a policy and assign it to the annotators."""
    from app.admin.study import default_batch_name, preview_assignments
    from app.annotations.assignments import create_assignments
    from app.runs.service import RunFilter
    from app.studies.service import get_study
    from app.taxonomies.models import Taxonomy

    params = {}
    if stratify_by:
        params = {"stratify_by": stratify_by, "allocation": allocation}
    if against:
        params["against"] = against
    if source:
        params["source"] = source
    engine = checked_engine()
    session = write_session(engine)
    try:
        st = get_study(session, name)
        tax = session.get(Taxonomy, st.taxonomy_pk)
        options = {"policy": policy, "params": params, "study": st}
        if preview:
            out = preview_assignments(session, RunFilter(), sample_size, seed, list(annotators), k, tax,
                                      batch_name, **options)
            session.rollback()
        else:
            out = create_assignments(session, RunFilter(), sample_size, seed, list(annotators), k, tax,
                                     batch=batch_name or default_batch_name(), **options).to_dict()
            session.commit()
    finally:
        session.close()
    if as_json:
        click.echo(json.dumps(out, indent=2, default=str))
        return
    verb = "would create" if preview else "created"
    click.echo(f"{out['batch'] or '(preview)'}: {verb} {out['created']} assignment(s) on {out['runs_selected']} of "
               f"{out['runs_matching']} run(s) by {policy} (seed {seed}); skipped: {out['skipped_existing']} already "
               f"assigned, {out['skipped_full']} at k, {out['skipped_removed']} removed by hand")
    for h, v in (out.get("strata") or {}).items():
        click.echo(f"  stratum {h or '(all)'}: {v['sampled']} of {v['frame']}, inclusion probability "
                   f"{v['inclusion_prob']:.4f}")


@study.command("undo")
@click.argument("name")
@click.argument("batch")
@one_line_errors
def study_undo(name: str, batch: str) -> None:
    """Undo BATCH of study NAME: its assignments nobody has started are removed."""
    from app.admin.study import undo_batch
    from app.studies.service import get_study

    with session_scope(checked_engine()) as session:
        st = get_study(session, name)
        removed, kept = undo_batch(session, batch, st.taxonomy_pk, st)
    if not removed and not kept:
        raise click.ClickException(f"no assignments in batch {batch!r} of study {name!r}")
    click.echo(f"batch {batch}: {removed} removed, {kept} kept (already started)")


@study.command("remove")
@click.argument("name")
@click.argument("run_id")
@click.argument("annotator")
@one_line_errors
def study_remove(name: str, run_id: str, annotator: str) -> None:
    """Take RUN_ID out of ANNOTATOR's queue in study NAME; no later fill gives it back."""
    from sqlmodel import select

    from app.annotations.assignments import remove_assignment
    from app.auth.models import User
    from app.runs.service import get_run
    from app.studies.service import get_study
    from app.taxonomies.models import Taxonomy

    with session_scope(checked_engine()) as session:
        st = get_study(session, name)
        run = get_run(session, run_id)
        if run is None:
            raise click.ClickException(f"no run {run_id!r}")
        user = session.exec(select(User).where(User.username == annotator)).first()
        if user is None:
            raise click.ClickException(f"no user {annotator!r}")
        removed = remove_assignment(session, run.id, user, session.get(Taxonomy, st.taxonomy_pk), st)
    click.echo(f"{run_id} {'removed from' if removed else 'was not assigned to'} {annotator}; it stays out of "
               "their queue in this study")


@study.command("rule")
@click.argument("name")
@click.argument("rule_name")
@click.option("--policy", type=click.Choice(["random", "all", "flagged"]), required=True,
              help="random: each arriving run taken with probability --rate; all; flagged.")
@click.option("--rate", type=float, help="random: the probability that an arriving run is taken.")
@click.option("--source", help="flagged: a detector or judge (default every one).")
@click.option("--annotator", "annotators", multiple=True, required=True, help="An annotator (repeat).")
@click.option("--k", type=int, default=1, show_default=True, help="Distinct annotators per run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the Bernoulli draw.")
@one_line_errors
def study_rule(name: str, rule_name: str, policy: str, rate: float | None, source: str | None, annotators: tuple,
               k: int, seed: int) -> None:
    """Store queue rule RULE_NAME for study NAME: applied after each import and by `study fill`."""
    from app.studies.rules import add_rule
    from app.studies.service import get_study

    with session_scope(checked_engine()) as session:
        add_rule(session, get_study(session, name), rule_name, policy=policy, k=k, annotators=list(annotators),
                 seed=seed, rate=rate, source=source)
    click.echo(f"rule {rule_name} stored for study {name}")


@study.command("fill")
@click.argument("name", required=False)
@one_line_errors
def study_fill(name: str | None) -> None:
    """Apply the queue rules of study NAME (default: every study) to all its runs now."""
    from app.studies.rules import apply_rules
    from app.studies.service import get_study

    engine = checked_engine()
    session = write_session(engine)
    try:
        out = apply_rules(session, get_study(session, name) if name else None)
        session.commit()
    finally:
        session.close()
    if not out:
        click.echo("no enabled rules")
    for batch, r in out.items():
        click.echo(f"{batch}: {r['created']} new assignment(s) ({r['runs_selected']} run(s) taken)")
