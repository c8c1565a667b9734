"""Taxonomy versions in the database. Files are the source; each changed file is a new version."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from app.core.text import is_decimal
from app.taxonomies.models import Taxonomy


def register_file(session: Session, path: str | Path) -> tuple[Taxonomy, bool]:
    """Store the taxonomy in `path` unless this exact content is stored; returns (row, created)."""
    from app.taxonomies.loader import load_taxonomy_file

    tdef = load_taxonomy_file(path)
    row = session.exec(select(Taxonomy).where(Taxonomy.key == tdef.key,
                                              Taxonomy.content_hash == tdef.content_hash)).first()
    if row is not None:
        return row, False
    last = session.exec(select(func.max(Taxonomy.version)).where(Taxonomy.key == tdef.key)).one()
    row = Taxonomy(key=tdef.key, version=(last or 0) + 1, name=tdef.name, content_hash=tdef.content_hash,
                   definition=tdef.definition, source_file=str(Path(path).name))
    session.add(row)
    session.flush()
    return row, True


def sync_builtin(session: Session, folder: str | Path) -> list[Taxonomy]:
    """Register every taxonomy file in `folder` (the built-ins); returns the new versions."""
    from app.taxonomies.loader import builtin_taxonomy_files

    created = []
    for f in builtin_taxonomy_files(folder):
        row, new = register_file(session, f)
        if new:
            created.append(row)
    return created


def latest(session: Session, key: str) -> Taxonomy | None:
    return session.exec(select(Taxonomy).where(Taxonomy.key == key).order_by(Taxonomy.version.desc())).first()


def all_versions(session: Session) -> list[Taxonomy]:
    return list(session.exec(select(Taxonomy).order_by(Taxonomy.key, Taxonomy.version)).all())


def latest_versions(session: Session) -> list[Taxonomy]:
    rows = all_versions(session)
    out: dict[str, Taxonomy] = {}
    for r in rows:
        out[r.key] = r
    return list(out.values())


def resolve(session: Session, ref: str | None) -> Taxonomy | None:
    """`a2-failures`, `a2-failures@2` or a numeric id; None means the default (a2-failures latest)."""
    if ref is None or ref == "":
        return latest(session, "a2-failures") or (latest_versions(session) or [None])[0]
    if is_decimal(ref):  # ASCII digits only ("³".isdigit() is True); beyond 64 bits no id matches
        return session.get(Taxonomy, int(ref)) if len(ref) <= 18 else None
    if "@" in ref:
        key, _, ver = ref.partition("@")
        ver = ver.lstrip("v")
        if not is_decimal(ver) or len(ver) > 9:
            return None
        return session.exec(select(Taxonomy).where(Taxonomy.key == key, Taxonomy.version == int(ver))).first()
    return latest(session, ref)


def mode_codes(tax: Taxonomy) -> list[str]:
    return [m["code"] for m in tax.definition.get("modes", [])]


def mode_category(tax: Taxonomy) -> dict[str, str]:
    return {m["code"]: m["category"] for m in tax.definition.get("modes", [])}


def taxonomy_def(tax: Taxonomy):
    """The parsed `TaxonomyDef` of a stored version (cached per row id and hash)."""
    from app.taxonomies.loader import parse_taxonomy

    key = (tax.id, tax.content_hash)
    if key not in _DEF_CACHE:
        _DEF_CACHE[key] = parse_taxonomy(tax.definition, source=f"{tax.key}@{tax.version}")
    return _DEF_CACHE[key]


_DEF_CACHE: dict = {}


def canonical_mode(tax: Taxonomy, code) -> str | None:
    """The mode code for `code`, a name or an alias (case and spacing ignored), else None."""
    from app.taxonomies.loader import UnknownModeError

    try:
        return taxonomy_def(tax).mode(code)["code"]
    except UnknownModeError:
        return None


def taxonomy_for_mode(session: Session, code: str, cache: dict | None = None) -> Taxonomy | None:
    """The latest taxonomy version that has mode `code` (a2-failures first)."""
    cache = cache if cache is not None else {}
    if "versions" not in cache:
        rows = latest_versions(session)
        rows.sort(key=lambda t: (t.key != "a2-failures", t.key))
        cache["versions"] = rows
    for t in cache["versions"]:
        if canonical_mode(t, code):
            return t
    return None


def to_api(t: Taxonomy, full: bool = True) -> dict:
    d = {"id": t.id, "key": t.key, "version": t.version, "name": t.name, "content_hash": t.content_hash,
         "source_file": t.source_file, "created_at": t.created_at.isoformat()}
    if full:
        d.update({k: t.definition.get(k) for k in ("description", "provenance", "categories", "modes")})
    return d


def attribution_schema(tax: Taxonomy | None) -> dict[str, Any] | None:
    """The taxonomy's attribution schema (``{description, reason, k}``: labels name agent, step and
    reason, Who&When's shape), or None for a taxonomy of failure modes only."""
    att = (tax.definition or {}).get("attribution") if tax is not None else None
    return att if isinstance(att, dict) else None
