"""REST routes of agreement and adjudication.

* ``GET /api/v1/agreement``: the agreement report on the stored labels; ``/agreement/gold``
  each annotator against gold; ``/agreement/judges`` humans vs machines (these three are stored
  results shared by every process: see :mod:`app.results`; sync routes, so they run in the threadpool);
  ``/agreement/disagreements`` runs ranked by disagreement.  They aggregate every annotator's
  labels, so under blind mode an annotator gets 403 (reviewers and admins always see them;
  annotators once an admin reveals labels).
* ``POST /api/v1/agreement/compute``: the calculator for any ratings (touches no stored labels;
  any authenticated user).
* ``GET/POST /api/v1/adjudication/{run_id}``: a reviewer's adjudication of one run.

Errors are ``{"detail": "..."}`` naming the field: 422 bad input, 404 unknown run, 409 the run
is adjudicated (reopen it first).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from sqlmodel import Session

from app.agreement import adjudication, service
from app.agreement.coefficients import compute
from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import (
    MAX_PAGE,
    ApiUser,
    ReviewerUser,
    SessionDep,
    StudyQuery,
    require_labels_visible,
    study_cache_key,
    study_scope,
)
from app.core.db import begin_write
from app.results import http as stored

router = APIRouter(prefix="/api/v1", tags=["agreement"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])

#: Most cells the calculator accepts in one request.
MAX_CELLS = 1_000_000

TaxonomyQuery = Annotated[str | None, Query(
    description="Taxonomy version: `key`, `key@version` or id; default the latest a2-failures.")]
FamilyQuery = Annotated[str | None, Query(description="Only runs of this scenario family.")]
AnnotatorsQuery = Annotated[str | None, Query(
    description="Comma-separated user names (`alice,bob,judge:judge-l2`); default every human annotator and "
                "dataset source (kind `source`, e.g. `mad:annotator_1`). "
                "A judge named here is included whatever `include_judges` says.")]


def _blank_is_none(value: Any) -> Any:
    """An empty query value (`n_boot=`) means the default."""
    return None if isinstance(value, str) and not value.strip() else value


NBootQuery = Annotated[
    Annotated[int, Field(ge=0, le=service.MAX_N_BOOT)] | None, BeforeValidator(_blank_is_none), Query(
    description="Bootstrap resamples for the intervals (runs are resampled); default the server setting "
                "`bootstrap_resamples`; 0 for no intervals.")]
SeedQuery = Annotated[Annotated[int, Field(ge=0)] | None, BeforeValidator(_blank_is_none),
                      Query(description="Seed of the bootstrap, >= 0 (default 0): same seed, same intervals.")]
ConfidenceQuery = Annotated[float, Query(gt=0, lt=1, description="Level of the intervals.")]


def _n_boot(request: Request, n_boot: int | None) -> int:
    return int(request.app.state.settings.bootstrap_resamples if n_boot is None else n_boot)



def _load(session: Session, taxonomy: str | None, family: str | None, annotators: str | None,
          include_judges: bool, scope: Any = None) -> service.AgreementData:
    try:
        return service.load_agreement_data(session, taxonomy=taxonomy, family=family, annotators=annotators,
                                           include_judges=include_judges, scope=scope)
    except service.AgreementError as exc:
        raise HTTPException(422, str(exc)) from None


# --------------------------------------------------------------------------------------------
# the report on stored labels


@router.get(
    "/agreement", summary="Agreement on the stored labels: per mode, per category and overall",
    description=(
        "Agreement between annotators over the submitted annotations of one taxonomy version. `level=run`: "
        "a unit is a run, the cell says whether the annotator marked the mode; `level=agent`: a unit is a "
        "(run, agent) pair and the cell says whether the annotator marked the mode *and blamed that agent*. "
        "Rows `modes`, `categories` (any mode of the category marked) and `overall` (all unit x mode cells "
        "pooled, plus `set_alpha`: Krippendorff's alpha on each unit's set of modes with MASI and Jaccard "
        "distances) carry `percent`, `cohen_kappa` (mean pairwise), `fleiss_kappa`, `krippendorff_alpha` "
        "and `gwet_ac1`, each `{value, n_units, ci, reason?}` (`value` null with a `reason` when undefined), "
        "`prevalence` (share of marked cells), and `kappa_paradox` with `advice` (prevalence < 0.1 or > 0.9, "
        "percent >= 0.8 and Fleiss' kappa < 0.4: read AC1). Also `pairwise_cohen` (kappa between every two "
        "annotators), `blame_agreement` and `evidence_overlap`. 403 for annotators under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def agreement(
    request: Request, session: SessionDep, user: ApiUser,
    level: Annotated[Literal["run", "agent"], Query(description="What a unit is.")] = "run",
    study: StudyQuery = None, taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    annotators: AnnotatorsQuery = None,
    include_judges: Annotated[bool, Query(description="Count `judge:*` annotators as annotators too.")] = False,
    n_boot: NBootQuery = None, seed: SeedQuery = None, confidence: ConfidenceQuery = 0.95,
) -> dict[str, Any]:
    require_labels_visible(session, user, "agreement")
    st, _ = study_scope(session, user, "agreement", study)
    return stored.respond(request, session, user, "agreement", {"study": study_cache_key(st),
        "level": level, "taxonomy": taxonomy, "family": family, "annotators": annotators,
        "include_judges": include_judges, "n_boot": _n_boot(request, n_boot), "seed": seed or 0,
        "confidence": confidence})


@router.get(
    "/agreement/gold", summary="Each annotator's agreement with the gold labels",
    description=(
        "For every annotator (humans and, by default, `judge:*`), over the runs it submitted that are "
        "adjudicated: Cohen's kappa and percent agreement with gold on the run x mode cells, and micro and "
        "per-mode precision, recall and F1 (null where a denominator is 0). `gold_origins` counts the "
        "accepted gold labels by origin. 403 for annotators under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def agreement_gold(
    request: Request, session: SessionDep, user: ApiUser,
    study: StudyQuery = None, taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    annotators: AnnotatorsQuery = None,
    include_judges: Annotated[bool, Query(description="Report `judge:*` annotators too.")] = True,
    n_boot: NBootQuery = None, seed: SeedQuery = None, confidence: ConfidenceQuery = 0.95,
) -> dict[str, Any]:
    require_labels_visible(session, user, "agreement")
    st, _ = study_scope(session, user, "agreement", study)
    return stored.respond(request, session, user, "agreement_gold", {"study": study_cache_key(st),
        "taxonomy": taxonomy, "family": family, "annotators": annotators, "include_judges": include_judges,
        "n_boot": _n_boot(request, n_boot), "seed": seed or 0, "confidence": confidence})


@router.get(
    "/agreement/attribution", summary="Attribution agreement: same agent, same step, step within +-k",
    description=(
        "Agreement on attribution-only labels (who failed and when, no failure mode: e.g. Who&When's "
        "mistake agent and mistake step, or imported `mode: null` audits). An annotator's attribution of a "
        "run is the set of agents it named and its step (the earliest evidence event seq). Over every two "
        "annotators who attributed the same run: `agent` (same agents), `step_exact` (same step), "
        "`step_within_k` (steps at most `k` apart), `agent_and_step`, each `{n_pairs, n_agree, proportion}`; "
        "`per_run` lists each run's attributions; `labels_without_agent` and `labels_without_mode` count the "
        "labels that lack an agent or a mode. Judges (`judge:*`) count by default here. 403 for annotators "
        "under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def agreement_attribution(
    request: Request, session: SessionDep, user: ApiUser,
    k: Annotated[int, Query(ge=0, le=1_000_000, description="Steps at most k apart agree (`step_within_k`).")] = 1,
    study: StudyQuery = None, taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    annotators: AnnotatorsQuery = None,
    include_judges: Annotated[bool, Query(description="Count `judge:*` annotators too.")] = True,
) -> dict[str, Any]:
    require_labels_visible(session, user, "agreement")
    st, _ = study_scope(session, user, "agreement", study)
    return stored.respond(request, session, user, "agreement_attribution", {"study": study_cache_key(st), "k": k,
        "taxonomy": taxonomy, "family": family, "annotators": annotators, "include_judges": include_judges})


@router.get(
    "/agreement/judges", summary="Humans vs machines: judges against humans and gold",
    description=(
        "Judges (`judge:<source>` annotators from run audits or imported labels) beside the humans: "
        "`pairwise_cohen` (kappa between every two annotators, judges included), per judge the mean kappa "
        "with the humans beside the human-human baseline, `vs_gold` (every annotator against gold) and "
        "`vs_human_majority` (each judge against the strict majority of the human annotators of a run), "
        "both with per-mode precision and recall. 403 for annotators under blind mode." + stored.DESCRIPTION),
    responses={**stored.RESPONSES, 403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def agreement_judges(
    request: Request, session: SessionDep, user: ApiUser,
    study: StudyQuery = None, taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    n_boot: NBootQuery = None, seed: SeedQuery = None,
) -> dict[str, Any]:
    require_labels_visible(session, user, "agreement")
    st, _ = study_scope(session, user, "agreement", study)
    return stored.respond(request, session, user, "agreement_judges", {"study": study_cache_key(st),
        "taxonomy": taxonomy, "family": family, "n_boot": _n_boot(request, n_boot), "seed": seed or 0})


@router.get(
    "/agreement/disagreements", summary="Runs ranked by disagreement",
    description=(
        "Runs that at least two annotators submitted, most disputed first: `n_disagreements` (modes on "
        "which the annotators are not unanimous), `mean_set_distance` (mean Jaccard distance between two "
        "annotators' sets of modes), `disputed_modes`, and each annotator's labels (mode, responsible agent, "
        "evidence seqs). 403 for annotators under blind mode."),
    responses={403: {"description": "blind mode"}, 422: {"description": "bad parameter; `detail` names it"}},
)
def agreement_disagreements(
    session: SessionDep, user: ApiUser,
    study: StudyQuery = None, taxonomy: TaxonomyQuery = None, family: FamilyQuery = None,
    annotators: AnnotatorsQuery = None,
    include_judges: Annotated[bool, Query(description="Count `judge:*` annotators too.")] = False,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1, page_size: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    require_labels_visible(session, user, "agreement")
    _, scope = study_scope(session, user, "agreement", study)
    data = _load(session, taxonomy, family, annotators, include_judges, scope)
    return service.disagreements_payload(data, page=page, page_size=page_size)


# --------------------------------------------------------------------------------------------
# the calculator


class ComputeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    coefficient: Literal["percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha", "gwet_ac1"]
    level: Literal["nominal", "ordinal", "interval", "ratio"] = Field(
        "nominal", description="Level of measurement (Krippendorff's alpha only).")
    weights: Literal["unweighted", "linear", "quadratic"] = Field(
        "unweighted", description="Disagreement weights on category positions (Cohen's kappa only).")
    categories: list[Any] | None = Field(
        None, description="The categories in their order (for weights, the ordinal level, and AC1's number of "
                          "categories); default the sorted distinct values.")
    distance: Literal["masi", "jaccard"] | None = Field(
        None, description="Distance between set-valued labels (Krippendorff's alpha only).")
    ratings: list[list[Any]] = Field(
        description="`ratings[u][r]`: rater r's rating of unit u; null for missing, a list for a set of labels.")
    n_boot: int | None = Field(None, ge=0, le=service.MAX_N_BOOT,
                                  description="Bootstrap resamples of units; default the server setting.")
    seed: int = Field(0, ge=0, description="Seed of the bootstrap (>= 0): same seed, same interval.")
    confidence: float = Field(0.95, gt=0, lt=1)


class ComputeOut(BaseModel):
    value: float | None = Field(description="The coefficient; null when undefined for these data.")
    n_units: int = Field(description="Units the coefficient pairs ratings on.")
    ci: list[float] | None = Field(description="Bootstrap percentile interval [lo, hi], or null.")
    reason: str | None = Field(None, description="Why the value is null (present only then).")


@router.post(
    "/agreement/compute", summary="Agreement calculator for any ratings",
    response_model=ComputeOut, response_model_exclude_unset=True,
    description=(
        "Computes one coefficient on the ratings sent (no stored labels are read). Answers `{value, n_units, "
        "ci}`; where the coefficient is undefined (no ratings, a single rater, no unit with two ratings, no "
        "variation) `{value: null, n_units, ci: null, reason}`. `level` applies to krippendorff_alpha only, "
        "`weights` to cohen_kappa only, `distance` to alpha on set-valued labels; anything else is 422 "
        "naming the field. Cohen's kappa with more than two raters is the mean pairwise kappa."),
    responses={422: {"description": "bad parameter; `detail` names it"}},
)
def agreement_compute(body: ComputeIn, request: Request, user: ApiUser) -> dict[str, Any]:
    cells = sum(len(r) for r in body.ratings)
    if cells > MAX_CELLS:
        raise HTTPException(422, f"ratings: at most {MAX_CELLS} cells per request, got {cells}")
    try:
        res = compute(body.coefficient, body.ratings, level=body.level, weights=body.weights,
                      categories=body.categories, distance=body.distance, n_boot=_n_boot(request, body.n_boot),
                      seed=body.seed, confidence=body.confidence)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return res.to_dict()


# --------------------------------------------------------------------------------------------
# adjudication


class GoldLabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str | None = None
    agent: str | None = None
    principals: list[str] | None = None
    evidence: list[int] | None = None


class AdjudicationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal[adjudication.ACTIONS] = Field(description=(
        "`accept` or `reject` a candidate (`mode`, `agent`; a rejected candidate is stored as a gold label with "
        "`accepted` false, which is not gold); `undo` / `restore` / `remove` a gold label (`gold_label_id`); "
        "`add` a gold label (`label`); `edit` one (`gold_label_id`, `label`); `merge` annotators' labels "
        "(`label_ids`, optional `label` to pick mode/agent); `finish` (with `rationale`); `reopen`."))
    taxonomy: str | None = Field(None, description="`key`, `key@version` or id; default the latest a2-failures.")
    mode: str | None = None
    agent: str | None = None
    gold_label_id: int | None = None
    label: GoldLabelIn | None = None
    label_ids: list[int] | None = None
    rationale: str | None = None
    study: str | None = Field(None, description="A study (name or id): 403 unless you lead it, 404 when the run "
                                                "is not one of its runs.")
    version: int | None = Field(None, ge=0, le=2**31 - 1, description=(
        "undo / restore / edit / remove: the gold label's `version` as last read; accept / reject: the "
        "version of the candidate's gold label as last read, 0 when it had none (`gold_version` of the "
        "candidate). When it changed since, the answer is 409 with `current` (the stored gold label, null "
        "when it was removed) and nothing is written."))


def _run_and_tax(session: Session, run_id: str, taxonomy: str | None, user: Any = None, study: str | None = None):
    """The run and taxonomy version; with `study`: 403 unless `user` may adjudicate in it, 404
    when the run is not one of its runs (and its taxonomy version is the default)."""
    from app.annotations.service import AnnotationError, NotFoundError, get_run_or_error, resolve_taxonomy
    from app.studies.service import run_in_study

    st = None
    if study:
        st, _ = study_scope(session, user, "adjudicate", study)
    try:
        if st is not None and not taxonomy:
            from app.taxonomies.models import Taxonomy

            tax = session.get(Taxonomy, st.taxonomy_pk)
        else:
            tax = resolve_taxonomy(session, taxonomy)
        run = get_run_or_error(session, run_id)
    except NotFoundError as exc:
        raise HTTPException(404, str(exc)) from None
    except AnnotationError as exc:
        raise HTTPException(422, str(exc)) from None
    if st is not None and not run_in_study(session, st, run.id):
        raise HTTPException(404, f"run {run_id!r} is not in study {st.name!r}")
    return run, tax


@router.get(
    "/adjudication/{run_id:path}", summary="Open a run's adjudication and show every label on it",
    description=(
        "Reviewer or admin. Opens the adjudication of the run under the taxonomy version (creating it; labels "
        "every human annotator gave, with at least two of them, are pre-accepted as gold with origin "
        "`unanimity`) and returns the submitted labels by annotator (humans and judges), the candidates "
        "(distinct mode + agent pairs with their human support: unanimity, majority, minority, judge) and the "
        "gold labels."),
    responses={404: {"description": "unknown run"}},
)
def adjudication_get(run_id: str, session: SessionDep, user: ReviewerUser,
                     taxonomy: TaxonomyQuery = None, study: StudyQuery = None) -> dict[str, Any]:
    run, tax = _run_and_tax(session, run_id, taxonomy, user, study)
    adjudication.open_adjudication(session, run, tax, user)
    return adjudication.adjudication_view(session, run, tax)


@router.post(
    "/adjudication/{run_id:path}", summary="Change a run's gold labels or finish its adjudication",
    description=(
        "Reviewer or admin. One `action` per request (see the body schema). Gold labels are checked like "
        "annotations (mode in the taxonomy version, agent and principals of the run, evidence seqs that exist, "
        "at least one); 422 names the field. `finish` needs a `rationale`, sets the status `adjudicated` "
        "(`no_failure` when no accepted gold label remains) and locks the run's annotations; 409 for changes "
        "to an adjudicated run until it is reopened. Answers the adjudication (as GET) plus `message`. "
        "Gold labels carry a `version`: send it with undo / restore / edit / remove (and with accept / reject, "
        "0 for a candidate that had no gold label) and a gold label changed or decided elsewhere since is "
        "answered 409 `{detail, current}`, nothing written. `decided` counts the candidates accepted, rejected "
        "and still undecided."),
    responses={404: {"description": "unknown run"},
               409: {"description": "run adjudicated, or the gold label changed elsewhere (`current`)"},
               422: {"description": "bad input; `detail` names the field"}},
)
def adjudication_post(run_id: str, body: AdjudicationIn, session: SessionDep, user: ReviewerUser) -> Any:
    begin_write(session)
    run, tax = _run_and_tax(session, run_id, body.taxonomy, user, body.study)
    params = body.model_dump(exclude={"action", "taxonomy", "study"})
    if body.label is not None:
        params["label"] = body.label.model_dump(exclude_none=True)
    try:
        message = adjudication.apply_action(session, run, tax, user, body.action, params)
    except adjudication.AdjudicationError as exc:
        raise HTTPException(422, str(exc)) from None
    except adjudication.AdjudicationLocked as exc:
        raise HTTPException(409, str(exc)) from None
    except adjudication.GoldLabelStale as exc:
        current = adjudication.gold_label_dict(exc.current)
        session.rollback()
        return JSONResponse({"detail": str(exc), "current": current}, status_code=409)
    return {**adjudication.adjudication_view(session, run, tax), "message": message}
