"""REST routes for taxonomies: every key with its versions, and one version with its modes."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from app.annotations.http import JsonErrorRoute, api_csrf
from app.api.deps import ApiUser, SessionDep
from app.taxonomies import service

router = APIRouter(prefix="/api/v1", tags=["taxonomies"], route_class=JsonErrorRoute,
                   dependencies=[Depends(api_csrf)])


def taxonomy_index(session) -> list[dict[str, Any]]:
    """Returns [{key, name, latest_version, versions: [summary of each version]}] sorted by key."""
    out: dict[str, dict[str, Any]] = {}
    for t in service.all_versions(session):
        entry = out.setdefault(t.key, {"key": t.key, "name": t.name, "latest_version": t.version, "versions": []})
        entry["name"], entry["latest_version"] = t.name, t.version
        summary = service.to_api(t, full=False)
        summary["n_modes"] = len(t.definition.get("modes") or [])
        summary["n_categories"] = len(t.definition.get("categories") or [])
        entry["versions"].append(summary)
    return list(out.values())


@router.get("/taxonomies", summary="All taxonomies with their versions",
            description="One entry per taxonomy key: name, latest version and a summary of every version "
                        "(id, version, content hash, number of modes and categories).")
def list_taxonomies(session: SessionDep, user: ApiUser) -> list[dict[str, Any]]:
    return taxonomy_index(session)


@router.get("/taxonomies/{ref}", summary="One taxonomy version with its categories and modes",
            description="`ref` is a numeric id, a key (its latest version) or `key@version`. Answers the "
                        "version's description, provenance, label fields, categories and modes (definition, "
                        "boundary, hint, aliases); 404 when there is no such version.",
            responses={404: {"description": "no such taxonomy version"}})
def get_taxonomy(ref: str, session: SessionDep, user: ApiUser) -> dict[str, Any]:
    t = service.resolve(session, ref)
    if t is None:
        raise HTTPException(404, f"no taxonomy {ref!r}")
    d = service.to_api(t, full=True)
    d["label_fields"] = t.definition.get("label_fields")
    d["versions"] = [v.version for v in service.all_versions(session) if v.key == t.key]
    return d
