"""Import every table so SQLModel.metadata is complete (Alembic and tests use this)."""
from sqlmodel import SQLModel

from app.annotations.models import Annotation, AppSetting, Assignment, GoldLabel, GoldRun, Label  # noqa: F401
from app.auth.models import ApiToken, User  # noqa: F401
from app.runs.models import (  # noqa: F401
    Agent,
    Audit,
    Check,  # noqa: F401
    Event,
    Principal,
    Run,
    Scenario,
)
from app.taxonomies.models import Taxonomy  # noqa: F401

metadata = SQLModel.metadata
