"""The computations whose results are stored (`app.results.service.KINDS`): each takes a session
and the result's ``params`` (as the route resolved them) and returns the JSON payload."""
from __future__ import annotations

from typing import Any

from sqlmodel import Session

from app.agreement import service as agreement
from app.reports import service as reports
from app.results.service import register


def _scope(session: Session, p: dict[str, Any]) -> Any:
    """The run-id subquery of the study in ``p["study"]`` (``app.api.deps.study_cache_key``: its id
    and the selection it had when asked; a study changed since keys another result), or None."""
    ref = p.get("study")
    if not ref:
        return None
    from app.studies.models import Study
    from app.studies.service import study_run_ids

    study = session.get(Study, int(ref[0]))
    if study is None:
        raise agreement.AgreementError("study", f"no study {ref[0]!r}")
    return study_run_ids(session, study)


def _agreement_data(session: Session, p: dict[str, Any], include_judges: bool | None = None) -> agreement.AgreementData:
    return agreement.load_agreement_data(
        session, taxonomy=p.get("taxonomy"), family=p.get("family"), annotators=p.get("annotators"),
        include_judges=p.get("include_judges", False) if include_judges is None else include_judges,
        scope=_scope(session, p))


@register("agreement")
def agreement_report(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/agreement and the agreement page."""
    return agreement.agreement_payload(_agreement_data(session, p), level=p["level"], n_boot=p["n_boot"],
                                       seed=p["seed"], confidence=p["confidence"])


@register("agreement_gold")
def agreement_gold(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/agreement/gold and the agreement page's gold table."""
    return agreement.gold_payload(_agreement_data(session, p), n_boot=p["n_boot"], seed=p["seed"],
                                  confidence=p["confidence"])


@register("agreement_judges")
def agreement_judges(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/agreement/judges."""
    data = _agreement_data(session, {**p, "annotators": None}, include_judges=True)
    return agreement.judges_payload(data, n_boot=p["n_boot"], seed=p["seed"])


def _report_data(session: Session, p: dict[str, Any], with_labels: bool = True) -> reports.ReportData:
    return reports.load_report_data(session, threshold=p["threshold"], taxonomy=p.get("taxonomy"),
                                    family=p.get("family"), with_labels=with_labels, scope=_scope(session, p))


@register("report_outcomes")
def report_outcomes(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/reports/outcomes."""
    return reports.outcomes_payload(_report_data(session, p), p["by"], p["source"])


@register("report_blind_spots")
def report_blind_spots(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/reports/blind-spots."""
    return reports.blind_spots_payload(_report_data(session, p), p["source"])


@register("report_crossplay")
def report_crossplay(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/reports/crossplay."""
    return reports.crossplay_payload(_report_data(session, p, with_labels=False), p["by"], p["value"])


@register("reports_page")
def reports_page(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """The data of the reports page (/reports): the outcome report, the prevalence table, cross-play,
    blind spots and the taxonomy's names; the page draws its charts from them."""
    from app.reports.pages import _category_names, prevalence_table

    data = _report_data(session, p)
    prev_columns, prev_rows = prevalence_table(data, p["source"])
    return {"outcomes": reports.outcomes_payload(data, p["by"], p["source"]),
            "prevalence": {"columns": prev_columns, "rows": prev_rows},
            "crossplay": reports.crossplay_payload(data, p["crossplay"]),
            "blind": reports.blind_spots_payload(data, p["source"]),
            "cat_names": _category_names(data),
            "mode_names": {m["code"]: m.get("name", m["code"]) for m in data.taxonomy.definition.get("modes") or []},
            "n_runs": len(data.runs)}


@register("detector_scores")
def detector_scores(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/detectors/scores and the scores table of /admin/detectors."""
    from app.core.errors import FieldError
    from app.detectors import service as det

    try:
        return det.score_report(session, reference=p["reference"], level=p["level"], n_boot=p["n_boot"],
                                seed=p["seed"])
    except det.DetectError as exc:
        raise FieldError("taxonomy" if "taxonomy" in str(exc) else "parameters", str(exc)) from None


@register("agreement_judges_page")
def agreement_judges_page(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """The judges page (/agreement/judges): humans vs machines, with the taxonomy's modes."""
    data = _agreement_data(session, {**p, "annotators": None}, include_judges=True)
    return {"report": agreement.judges_payload(data, n_boot=p["n_boot"], seed=p["seed"]), "modes": list(data.modes)}


@register("agreement_attribution")
def agreement_attribution(session: Session, p: dict[str, Any]) -> dict[str, Any]:
    """GET /api/v1/agreement/attribution and the attribution table of the agreement page (who and
    when: the CLI's `agreement --k K`)."""
    return agreement.attribution_payload(_agreement_data(session, p), k=p["k"])
