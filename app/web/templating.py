"""Jinja2 templates (autoescape on) with the helpers every page needs."""
from __future__ import annotations

import json
from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates

from app.web.csrf import csrf_token

TEMPLATES_DIR = Path(__file__).parent / "templates"
templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescape on for .html
templates.env.globals["csrf_token"] = csrf_token
# no blank lines and indentation left by {% %} tags: long run pages are mostly template whitespace otherwise
templates.env.trim_blocks = True
templates.env.lstrip_blocks = True
templates.env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def render(request: Request, name: str, status_code: int = 200, **context):
    context.setdefault("user", getattr(request.state, "user", None))
    context.setdefault("leads_study", getattr(request.state, "leads_study", False))
    return templates.TemplateResponse(request, name, context, status_code=status_code)
