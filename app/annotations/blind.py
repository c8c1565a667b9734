"""Blind mode: annotators see only their own labels until an admin reveals them.

The one rule for every place that shows labels or runs: run pages, the REST API and exports all
ask `labels_visible_to` (other annotators' labels and machine audits), `visible_annotation_filter`
(which annotations to list), `demo_truth_visible_to` (the demo's seeded truth), and `sight_of` /
`visible_run` / `visible_metadata` (which parts of a run's, agent's or event's metadata an
annotator may see: labels, answers and judgements a reader kept in metadata are hidden, see
`HIDDEN_KEYS`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.annotations.models import AppSetting
from app.auth.models import User

REVEAL_KEY = "labels_revealed"


def labels_revealed(session: Session) -> bool:
    """True when an admin has revealed all labels to annotators (blind mode off)."""
    row = session.get(AppSetting, REVEAL_KEY)
    return bool(row and row.value)


def set_revealed(session: Session, revealed: bool) -> None:
    """Turn blind mode off (`revealed=True`) or back on; the caller commits."""
    row = session.get(AppSetting, REVEAL_KEY) or AppSetting(key=REVEAL_KEY)
    row.value = bool(revealed)
    session.add(row)


def labels_visible_to(session: Session, user: User) -> bool:
    """True when `user` may see other annotators' labels (reviewers, admins, or after reveal)."""
    return user.role in ("admin", "reviewer") or labels_revealed(session)


def demo_truth_visible_to(user: User) -> bool:
    """True when `user` may see the demo corpus's seeded truth (`metadata.demo_truth`): admins only."""
    return user.role == "admin"


def visible_annotation_filter(session: Session, user: User):
    """Returns a SQL condition on `Annotation` selecting the annotations `user` may see.

    Reviewers, admins, and everyone once labels are revealed: all annotations (humans and
    `judge:*`); otherwise (blind mode) only the user's own. Use it as
    `select(Annotation).where(visible_annotation_filter(session, user))`.
    """
    from sqlalchemy import true

    from app.annotations.models import Annotation

    if labels_visible_to(session, user):
        return true()
    return Annotation.user_id == user.id


# --------------------------------------------------------------------------- metadata an annotator may see

#: Metadata keys (dotted paths inside a metadata object) that hold labels, answers or judgements.
#: They are hidden from annotators under blind mode at every level (run, scenario, principal,
#: agent, event metadata), whichever reader stored them, so runs imported before a reader learnt
#: to declare its labels are covered too:
#:
#: * ``hidden`` (a section a reader, an import profile or a canonical file fills with anything
#:   annotators must not see) and ``hidden_keys`` (its list of further hidden paths);
#: * ``audited_by`` (which judges looked at the run), ``unmapped_audits`` (judge verdicts no
#:   taxonomy took), ``import_warnings`` (they quote labels: "mistake_agent 'X' says nothing");
#: * Who&When's answers (``whowhen.mistake_agent`` / ``mistake_step`` / ``mistake_reason`` /
#:   ``mistake_type`` / ``ground_truth``) and MAD's marks (``mad.mast_annotation``,
#:   ``mad.annotations``, ``mad.modes``, ``mad.unmapped_codes``).
HIDDEN_KEYS: tuple[str, ...] = (
    "hidden", "hidden_keys", "audited_by", "unmapped_audits", "import_warnings",
    "whowhen.mistake_agent", "whowhen.mistake_step", "whowhen.mistake_reason", "whowhen.mistake_type",
    "whowhen.ground_truth",
    "mad.mast_annotation", "mad.annotations", "mad.modes", "mad.unmapped_codes",
)
#: The levels a run-level ``hidden_keys`` entry may name with a prefix (``agents.notes`` hides
#: ``notes`` in every agent's metadata); an entry without one of these prefixes is a run-metadata path.
LEVELS = ("scenario", "principals", "agents", "events")
#: Judgements recorded inside an event's `data` by the trace format itself: OpenTelemetry GenAI
#: evaluation results (span events named ``gen_ai.evaluation.result``, attributes
#: ``gen_ai.evaluation.*``: an evaluator's score, label and explanation) are hidden like labels.
HIDDEN_DATA_PREFIX = "gen_ai.evaluation."
DEMO_TRUTH = "demo_truth"


@dataclass(frozen=True)
class Sight:
    """What one viewer may see of runs: ``labels`` (other annotators' labels, judge and detector
    output, audits, checks and hidden metadata) and ``demo_truth`` (the demo's seeded answers)."""

    labels: bool
    demo_truth: bool

    @property
    def everything(self) -> bool:
        return self.labels and self.demo_truth


def sight_of(session: Session, user: User) -> Sight:
    """The one answer to "what may `user` see of a run", for pages, REST API and exports alike."""
    return Sight(labels=labels_visible_to(session, user), demo_truth=demo_truth_visible_to(user))


def _drop_path(meta: dict, path: list[str]) -> dict:
    """A copy of `meta` without the value at `path` (copies only along the path)."""
    head = path[0]
    if head not in meta:
        return meta
    if len(path) == 1:
        return {k: v for k, v in meta.items() if k != head}
    inner = meta[head]
    if not isinstance(inner, dict):
        return meta
    new_inner = _drop_path(inner, path[1:])
    if new_inner is inner:
        return meta
    return {**meta, head: new_inner}


def declared_hidden(run_metadata: Any) -> dict[str, list[str]]:
    """The paths a run's ``metadata.hidden_keys`` declares, by level (``run`` and :data:`LEVELS`)."""
    out: dict[str, list[str]] = {"run": [], **{lv: [] for lv in LEVELS}}
    keys = run_metadata.get("hidden_keys") if isinstance(run_metadata, dict) else None
    for entry in keys if isinstance(keys, list) else []:
        if not isinstance(entry, str) or not entry.strip():
            continue
        level, _, rest = entry.partition(".")
        if level in LEVELS and rest:
            out[level].append(rest)
        else:
            out["run"].append(entry)
    return out


def visible_metadata(meta: Any, sight: Sight, extra: list[str] | tuple[str, ...] = ()) -> Any:
    """`meta` (any level's metadata object) as `sight` may see it: without :data:`HIDDEN_KEYS`,
    the object's own ``hidden_keys`` and the `extra` paths when labels are hidden, without the
    demo truth unless it may be seen. Not a dict: returned as is. Never modifies `meta`."""
    if not isinstance(meta, dict) or not meta:
        return meta
    out = meta
    if not sight.demo_truth:
        out = _drop_path(out, [DEMO_TRUTH])
    if sight.labels:
        return out
    own = meta.get("hidden_keys")
    paths = list(HIDDEN_KEYS) + list(extra) + ([k for k in own if isinstance(k, str)] if isinstance(own, list) else [])
    for p in paths:
        out = _drop_path(out, p.split("."))
    return out


def _judgement_free(value: Any) -> Any:
    """`value` (an event's data) without evaluation results (:data:`HIDDEN_DATA_PREFIX`), copied
    only where something is removed."""
    if isinstance(value, dict):
        changed = False
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and k.startswith(HIDDEN_DATA_PREFIX):
                changed = True
                continue
            if isinstance(v, dict) and isinstance(v.get("name"), str) and v["name"].startswith(HIDDEN_DATA_PREFIX):
                changed = True
                continue
            nv = _judgement_free(v)
            changed = changed or nv is not v
            out[k] = nv
        return out if changed else value
    if isinstance(value, list):
        kept = [_judgement_free(v) for v in value
                if not (isinstance(v, dict) and isinstance(v.get("name"), str)
                        and v["name"].startswith(HIDDEN_DATA_PREFIX))]
        return kept if len(kept) != len(value) or any(a is not b for a, b in zip(kept, value)) else value
    return value


def visible_event_data(data: Any, sight: Sight) -> Any:
    """An event's `data` as `sight` may see it (evaluation results left out while labels are hidden)."""
    return data if sight.labels else _judgement_free(data)


def visible_run(run: dict[str, Any], sight: Sight) -> dict[str, Any]:
    """A canonical run (``app.runs.service.to_canonical``'s shape) as `sight` may see it: metadata
    at every level through :func:`visible_metadata` (with the run's declared ``hidden_keys``),
    and, while labels are hidden, no ``audits`` and no ``checks``. Returns a new dict (the parts
    it changes are copied; `run` is not modified)."""
    if sight.everything:
        return run
    declared = declared_hidden(run.get("metadata")) if not sight.labels else {}
    out = dict(run)
    out["metadata"] = visible_metadata(run.get("metadata") or {}, sight, declared.get("run", ()))
    sc = run.get("scenario")
    if isinstance(sc, dict) and "metadata" in sc:
        out["scenario"] = {**sc, "metadata": visible_metadata(sc.get("metadata") or {}, sight,
                                                              declared.get("scenario", ()))}
    for level in ("principals", "agents", "events"):
        items = run.get(level)
        if isinstance(items, list):
            extra = declared.get(level, ())
            out[level] = [{**x, "metadata": visible_metadata(x.get("metadata") or {}, sight, extra)}
                          if isinstance(x, dict) and x.get("metadata") else x for x in items]
    if not sight.labels:
        out["audits"] = []
        out.pop("checks", None)
        out["events"] = [{**e, "data": visible_event_data(e.get("data"), sight)}
                         if isinstance(e, dict) and e.get("data") else e for e in out.get("events") or []]
    return out
