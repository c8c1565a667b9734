"""Import every table so SQLModel.metadata is complete (Alembic and tests use this)."""
from sqlmodel import SQLModel

from app.annotations.models import Annotation, AppSetting, Assignment, GoldLabel, GoldRun, Label  # noqa: F401
from app.auth.models import ApiToken, User  # noqa: F401
from app.capture.models import CaptureError, CaptureRecord, LiveRun  # noqa: F401
from app.flags.models import RunFlag  # noqa: F401
from app.jobs.models import Job  # noqa: F401
from app.judges.models import JudgeCache, JudgeCall, JudgeResult, JudgeRun, JudgeVersion  # noqa: F401
from app.results.models import StoredResult  # noqa: F401
from app.runs.models import Agent, Audit, Check, Event, Principal, Run, Scenario  # noqa: F401
from app.studies.models import (  # noqa: F401
    AssignmentBatch,
    AssignmentRemoval,
    QueueRule,
    RunQuota,
    Study,
    StudyMember,
)
from app.taxonomies.models import Taxonomy  # noqa: F401

metadata = SQLModel.metadata
