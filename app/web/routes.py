"""Every router of the app, in one place: a newcomer finds what is served from here."""
from __future__ import annotations

import importlib

from fastapi import FastAPI

#: modules exposing `router` (API routers first so /api paths are documented together)
ROUTER_MODULES = [
    "app.runs.views",
    "app.taxonomies.views",
    "app.annotations.views",
    "app.agreement.views",
    "app.reports.views",
    "app.estimates.views",
    "app.exports.dataset_views",  # before app.exports.views: its {table}.{fmt} path would take hf.zip
    "app.exports.views",
    "app.detectors.views",
    "app.jobs.views",
    "app.judges.views",
    "app.studies.views",
    "app.auth.views",
    "app.runs.pages",  # before app.web.pages: /import is not a run
    "app.web.pages",
    "app.taxonomies.pages",
    "app.agreement.pages",
    "app.reports.pages",
    "app.estimates.pages",
    "app.admin.pages",
    "app.detectors.pages",
    "app.judges.pages",
    "app.capture.views",
    "app.flags.views",
    "app.flags.pages",
    "app.exports.pages",
    "app.jobs.pages",
    "app.studies.pages",
]


def include_routers(app: FastAPI) -> None:
    for name in ROUTER_MODULES:
        app.include_router(importlib.import_module(name).router)
