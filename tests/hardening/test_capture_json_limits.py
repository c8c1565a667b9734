"""Live capture parses what it receives within the input limits too: a deeply nested value in a
span attribute, a recorded body or the sidecar header is kept as text or refused, never a
RecursionError (which would answer 500 or stop the recorder)."""
from __future__ import annotations

import pytest

from app.capture import proxy, views
from app.ingest.readers import otlp

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deep_span_attribute_stays_text():
    assert otlp._maybe_json(DEEP) == DEEP
    assert otlp._maybe_json('{"a": [1, 2]}') == {"a": [1, 2]}


def test_a_deep_recorded_body_is_kept_as_raw_text():
    got = proxy._json(DEEP.encode())
    assert set(got) == {"raw"} and got["raw"].startswith("[[[")
    assert proxy._json(b'{"jsonrpc": "2.0"}') == {"jsonrpc": "2.0"}


def test_a_deep_sidecar_header_is_a_sidecar_error():
    class Req:
        headers = {views.SIDECAR_HEADER: DEEP}

    with pytest.raises(views.SidecarError, match="not JSON"):
        views._sidecar(Req())
