"""Request and response bodies of the annotation, queue, assignment and progress endpoints."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.annotations.service import MAX_TIME_MS


class LabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: str | None = Field(description="Failure mode code of the taxonomy version (aliases and names are resolved); "
                                         "null for an attribution (agent, one step in `evidence`, reason in `note`) "
                                         "under a taxonomy with an attribution schema (e.g. `who-and-when`).")
    agent: str | None = Field(None, description="Responsible agent: an agent id of the run. Required on submit.")
    principals: list[str] = Field(default_factory=list, description="Affected principals: principal ids of the run.")
    evidence: list[int] = Field(default_factory=list,
                                description="Event seqs of the run that show the failure; at least one on submit.")
    note: str | None = None
    confidence: float | None = Field(None, ge=0, le=1, description="The annotator's confidence, 0 to 1.")
    time_ms: int = Field(0, ge=0, le=MAX_TIME_MS, description="Time spent on this label in ms; stored as sent.")


class AnnotationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str
    taxonomy: str | None = Field(None, description="`a2-failures`, `a2-failures@1`, a numeric id, or null "
                                                      "for the latest a2-failures version.")
    labels: list[LabelIn] = Field(default_factory=list)
    no_failure: bool = Field(False, description="Explicit 'no failure found' mark; not allowed with labels.")
    status: Literal["draft", "submitted"] = "draft"
    time_ms: int = Field(0, ge=0, le=MAX_TIME_MS,
                         description="Time on task since the client's last save, in ms; added to the stored total "
                                     f"(which stops at {MAX_TIME_MS}).")
    note: str | None = None
    version: int | None = Field(None, ge=0, le=2**31 - 1, description=(
        "Optimistic concurrency: the `version` of the annotation the client last read (0: it read none, "
        "this is a first save). When the stored annotation has another version the answer is 409 with "
        "`current` (the stored annotation) and nothing is written. Omitted or null: save unconditionally "
        "(last writer wins)."))


class TaxonomyRef(BaseModel):
    id: int
    key: str
    version: int


class LabelOut(BaseModel):
    mode: str | None = Field(description="Failure mode code; null for an attribution-only label (who and when, "
                                         "no mode: under an attribution taxonomy, or imported or judge labels).")
    agent: str | None = Field(description="Responsible agent; null while a draft label has none.")
    principals: list[str]
    evidence: list[int]
    note: str | None
    confidence: float | None
    time_ms: int


class AnnotationOut(BaseModel):
    id: int
    run_id: str
    annotator: str
    annotator_kind: str = Field(description="`human`, or `judge` for `judge:*` annotators.")
    taxonomy: TaxonomyRef
    status: str
    no_failure: bool
    origin: str = Field(description="`human` (made in the app), `import` (import-labels), `audit` (run audits) or "
                                    "`detector` (a `detector:<name>` annotator).")
    time_ms: int = Field(description="Accumulated time on task, ms.")
    note: str | None
    labels: list[LabelOut]
    started_at: str | None
    updated_at: str | None
    submitted_at: str | None
    hints_on: bool | None = Field(None, description="A human's annotation: whether detector hints were shown "
                                                    "while it was made (null for machine annotators).")
    source_version: str | None = Field(None, description="A detector's annotation: the detector's version.")
    version: int = Field(description="Bumped on every save; send it back as `version` with the next save.")


class StaleAnnotation(BaseModel):
    detail: str = Field(description="What changed: the version sent and the version stored.")
    current: AnnotationOut | None = Field(default=None, description="The stored annotation (null if it was deleted); absent "
                                         "when the run is adjudicated (`detail` only).")


class AnnotationPage(BaseModel):
    total: int
    page: int
    page_size: int
    items: list[AnnotationOut]


class QueueItem(BaseModel):
    run_id: str
    position: int
    taxonomy: TaxonomyRef
    status: Literal["new", "draft", "submitted", "skipped", "flagged"]
    batch: str | None
    reason: str | None = Field(default=None, description="why the caller skipped or flagged the run")


class Queue(BaseModel):
    assigned: int
    drafts: int
    submitted: int
    remaining: int = Field(description="Assigned runs not yet submitted.")
    set_aside: int = Field(default=0, description="Runs the caller skipped or flagged (not submitted).")
    items: list[QueueItem]


class RunFilterIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    family: str | None = None
    scenario: str | None = None
    model: str | None = None
    harness: str | None = None
    status: str | None = None
    alignment: str | None = None


class AssignmentsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filters: RunFilterIn = Field(default_factory=RunFilterIn, description="Which runs to sample from.")
    sample_size: int | None = Field(None, ge=1, description="How many runs to sample; null for all matching.")
    seed: int = Field(0, description="RNG seed: the same inputs give the same assignment.")
    annotators: list[str] = Field(description="User names of the human annotators.")
    k: int = Field(ge=1, description="Distinct annotators per run (at most the number of annotators).")
    taxonomy: str | None = Field(None, description="Taxonomy version to label under (default latest a2-failures).")
    batch: str | None = Field(None, max_length=200, description="A name for this batch of assignments.")
    study: str | None = Field(None, description="Draw from this study's runs (name or id); its leads may assign.")
    policy: Literal["random", "stratified", "disagreement", "uncertainty", "flagged", "all"] = Field(
        "random", description="How the runs are drawn (see docs/studies.md): `random` simple random sample of "
                              "`sample_size` (the default); `stratified` by `params.stratify_by` with "
                              "`params.allocation`; `disagreement` (humans, or humans against "
                              "`params.against`); `uncertainty` (`params.source`: the judge whose samples "
                              "split); `flagged` (by `params.source`, default every detector and judge); `all`.")
    params: dict[str, Any] = Field(default_factory=dict, description=(
        "Policy parameters: `stratify_by` (a run field: family, scenario, alignment, status, condition, model, "
        "harness, source; or `detector:<name>` / `judge:<name>`), `allocation` (`proportional` | `equal`), "
        "`against` (`judge:<name>` / `detector:<name>`), `source`."))
    preview: bool = Field(False, description="Only say what would be made; nothing is written.")


class AssignmentsOut(BaseModel):
    taxonomy: str
    batch: str | None
    runs_matching: int
    runs_selected: int
    created: int
    skipped_existing: int = Field(description="(run, annotator) pairs already assigned, left as they were.")
    skipped_full: int = Field(0, description="pairs not made: the run already had k annotators in the study.")
    skipped_removed: int = Field(0, description="pairs not made: removed from that annotator by hand before.")
    per_annotator: dict[str, int]
    policy: str = "random"
    seed: int | None = None
    study: str | None = None
    strata: dict[str, Any] = Field(default_factory=dict, description=(
        "Per stratum `{frame, sampled, inclusion_prob}` (random and all: one stratum named \"\")."))
    first_picks: list[dict[str, Any]] | None = Field(None, description=(
        "Preview: the first runs drawn, `{run_id, inclusion_prob, stratum, score}`."))
    first_pairs: list[dict[str, Any]] | None = None


class LabelImportOut(BaseModel):
    imported: int = Field(description="Annotations stored (one per annotator, run and taxonomy version).")
    replaced: int = 0
    rejected: int = Field(description="Annotations (or unreadable rows) rejected.")
    errors: list[dict[str, str]] = Field(description="`{location: 'FILE:LINE', message: 'FIELD: ...'}` each.")
