"""Home page."""
from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import SessionDep
from app.web.deps import PageUser
from app.web.templating import render

router = APIRouter(include_in_schema=False)


@router.get("/")
def home(request: Request, session: SessionDep, user: PageUser):
    return render(request, "home.html")
