"""Errors shared by the services."""
from __future__ import annotations


class FieldError(ValueError):
    """Bad input whose `field` names the offending value or parameter (`labels[1].agent`, `taxonomy`).

    ``str(err)`` reads ``"FIELD: MESSAGE"``; routes answer it as 422 ``{"detail": str(err)}``."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
