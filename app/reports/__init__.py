"""Outcome reporting: each agent against its own principal, beside the aggregate score.

Pure computation (pandas in, pandas / plain data / SVG strings out).  See
:mod:`app.reports.outcomes` for the reports and :mod:`app.reports.charts` for the SVG charts.
"""

from app.reports.charts import bar_chart, dumbbell_chart, heatmap
from app.reports.outcomes import (
    AGENT_COLUMNS,
    DEFAULT_THRESHOLD,
    GROUPINGS,
    LABEL_COLUMNS,
    PRINCIPAL_COLUMNS,
    RESOLVED_LABEL_COLUMNS,
    RUN_COLUMNS,
    SUBMISSION_COLUMNS,
    ReportInputError,
    aggregate_success,
    blind_spot_rates,
    blind_spots,
    crossplay,
    crossplay_matrix,
    outcome_report,
    principal_success,
    report_payload,
    resolve_labels,
    to_records,
)

__all__ = [
    "AGENT_COLUMNS",
    "DEFAULT_THRESHOLD",
    "GROUPINGS",
    "LABEL_COLUMNS",
    "PRINCIPAL_COLUMNS",
    "RESOLVED_LABEL_COLUMNS",
    "RUN_COLUMNS",
    "SUBMISSION_COLUMNS",
    "ReportInputError",
    "aggregate_success",
    "bar_chart",
    "blind_spot_rates",
    "blind_spots",
    "crossplay",
    "crossplay_matrix",
    "dumbbell_chart",
    "heatmap",
    "outcome_report",
    "principal_success",
    "report_payload",
    "resolve_labels",
    "to_records",
]
