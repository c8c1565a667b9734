"""`/judges`: define, launch, watch, cancel and compare LLM judges (reviewers and admins);
`/judges/{name}`: calibration; `/judges/{name}/runs/{run_id}`: one disagreement, both answers
beside the trace the judge saw.

Routes stay thin: the work is in `app.judges.service`. Every form post carries the CSRF token.
A launch stores the judge run as queued and hands it to `service.launch` (never run in the request).
"""
from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from app.api.deps import SessionDep
from app.judges import service
from app.judges.schema import JudgeFileError
from app.web.csrf import verify_form_csrf
from app.web.deps import ReviewerPage
from app.web.templating import render

router = APIRouter(include_in_schema=False)
CSRF = [Depends(verify_form_csrf)]
URL = "/judges"


def _back(request: Request, kind: str, text: str, url: str = URL) -> RedirectResponse:
    request.session["flash"] = {"kind": kind, "text": text}
    return RedirectResponse(url, status_code=303)


@router.get(URL)
def judges_page(request: Request, session: SessionDep, user: ReviewerPage):
    """Judges and versions, the define and launch forms, recent judge runs with their progress."""
    runs = service.judge_runs(session, None, 30)
    live = any(r["state"] in ("queued", "running") for r in runs)
    return render(request, "judges/index.html", judges=service.list_judges(session), runs=runs, live=live,
                  estimate=request.session.pop("estimate", None), flash=request.session.pop("flash", None))


@router.post(f"{URL}/define", dependencies=CSRF)
def judges_define(request: Request, session: SessionDep, user: ReviewerPage, file: Annotated[str, Form()] = ""):
    try:
        jv, created = service.register(session, file, "judge file")
    except JudgeFileError as exc:
        session.rollback()
        return _back(request, "error", str(exc))
    session.commit()
    return _back(request, "ok", f"{'Registered new version' if created else 'Known version'} {jv.name}@{jv.version}.")


@router.post(f"{URL}/launch", dependencies=CSRF)
def judges_launch(request: Request, session: SessionDep, user: ReviewerPage, judge: Annotated[str, Form()] = "",
                  run_ids: Annotated[str, Form()] = "", batch: Annotated[str, Form()] = "",
                  limit: Annotated[str, Form()] = "", dry_run: Annotated[str, Form()] = ""):
    ids = [r for r in run_ids.replace(",", " ").split() if r]
    try:
        lim = int(limit) if limit.strip() else None
        if lim is not None and lim < 1:
            raise ValueError
    except ValueError:
        return _back(request, "error", f"limit: {limit!r} is not a positive number")
    try:
        jv = service.resolve_judge(session, judge)
        if dry_run:
            pending, skipped = service.select_pending(session, jv, run_ids=ids or None, batch=batch or None, limit=lim)
            est = service.estimate(session, jv, [pk for pk, _, _ in pending])
            request.session["estimate"] = {**est, "skipped": skipped, "judge": f"{jv.name}@{jv.version}"}
            return _back(request, "error" if est["over_cap"] else "ok",
                         f"Estimate for {jv.name}@{jv.version}: {est['runs']} runs, {est['calls']} calls, cost about "
                         f"{est['cost']:.4f}" + (" — above the cost cap" if est["over_cap"] else ""))
        jr = service.plan(session, jv, run_ids=ids or None, batch=batch or None, limit=lim, user=user)
    except service.JudgeError as exc:
        session.rollback()
        return _back(request, "error", str(exc))
    session.commit()
    service.launch(request.app.state.engine, jr.id, user.id)
    return _back(request, "ok", f"Judge run {jr.id} of {jv.name}@{jv.version} started over {jr.total} runs "
                                f"({jr.n_skipped} already judged).")


@router.post(URL + "/{name}/runs/{run_id}/cancel", dependencies=CSRF)
def judges_cancel(request: Request, name: str, run_id: int, session: SessionDep, user: ReviewerPage):
    try:
        service.cancel(session, service.get_judge_run(session, name, run_id))
    except service.JudgeError as exc:
        session.rollback()
        return _back(request, "error", str(exc))
    session.commit()
    return _back(request, "ok", f"Judge run {run_id} asked to stop; judged runs are kept.")


@router.get(URL + "/{name}")
def judge_page(request: Request, name: str, session: SessionDep, user: ReviewerPage, version: str | None = None,
               k: int = 1):
    """Calibration of one judge version, its versions compared, disagreements linked."""
    try:
        jv = service.resolve_judge(session, f"{name}@{version}" if version else name)
        rep = service.score(session, f"{jv.name}@{jv.version}" if version else jv.name, n_boot=200, k=max(k, 0))
    except service.JudgeError as exc:
        raise HTTPException(404, str(exc)) from None
    return render(request, "judges/score.html", judge_name=name, rep=rep, k=k, runs=service.judge_runs(session, name, 10))


@router.get(URL + "/{name}/runs/{run_id:path}")
def judge_disagreement(request: Request, name: str, run_id: str, session: SessionDep, user: ReviewerPage,
                       version: str | None = None):
    """One run: the judge's answer and the reference beside the trace as the judge saw it."""
    from app.runs.service import get_run, to_canonical

    try:
        jv = service.resolve_judge(session, f"{name}@{version}" if version else name)
    except service.JudgeError as exc:
        raise HTTPException(404, str(exc)) from None
    run = get_run(session, run_id)
    if run is None:
        raise HTTPException(404, f"no run {run_id!r}")
    res = service.results(session, jv, run_id=run_id, page_size=10)["results"]
    ref = service._reference(session, jv.taxonomy_pk, [run.id]).get(run.id)
    reference = [] if ref is None else [{"mode": m, "agent": a, "evidence": sorted(ev)}
                                        for (m, a), ev in sorted(ref["labels"].items())]
    from app.judges.prompts import run_view

    setup = service._setup_vars(session, jv)
    view = run_view(to_canonical(session, run), setup["taxonomy_vars"], success_threshold=setup["threshold"])
    cited = {e for r in res for lab in (r["answer"] or {}).get("labels", []) for e in lab.get("evidence", [])}
    cited |= {e for lab in reference for e in lab["evidence"]}
    return render(request, "judges/run.html", judge_name=name, jv=jv, run_id=run_id, results=res, reference=reference,
                  reference_source=ref["source"] if ref else None, lines=view.lines, cited=cited,
                  agents=view.agents)
