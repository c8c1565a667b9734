"""The OpenAPI document builds, and every /api route in it says what it does."""
from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app


def test_openapi_documents_every_api_route(engine):
    spec = TestClient(create_app(engine)).get("/openapi.json").json()
    api_paths = {p: ops for p, ops in spec["paths"].items() if p.startswith("/api/v1/")}
    for required in ("/api/v1/imports", "/api/v1/runs", "/api/v1/runs/{run_id}", "/api/v1/taxonomies",
                     "/api/v1/annotations", "/api/v1/annotations/import", "/api/v1/agreement",
                     "/api/v1/agreement/compute", "/api/v1/reports/outcomes", "/api/v1/reports/blind-spots",
                     "/api/v1/reports/crossplay"):
        assert required in api_paths, required
    assert any(p.startswith("/api/v1/exports/") for p in api_paths)
    for path, ops in api_paths.items():
        for method, op in ops.items():
            assert op.get("summary"), f"{method.upper()} {path} has no summary"
    assert "/login" not in spec["paths"]  # pages stay out of the API document
