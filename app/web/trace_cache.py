"""The run page's trace, built and rendered once per run content.

`build_trace` and the trace template depend only on the run's content (its `content_hash`), whether
the demo truth is shown, whether labels are shown (the blind rule of app.annotations.blind: hidden
metadata), and the success threshold, never on who is looking otherwise; the other blind-mode parts
of the page (other annotators' labels, audits) are rendered outside the cached fragment. A small LRU
keeps the view model and the rendered HTML of the last runs opened, so a 2,000-event run is
built once, not on every page load. A run replaced by a re-import has a new hash: a new entry.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from markupsafe import Markup
from sqlmodel import Session

from app.runs.models import Run

MAX_ENTRIES = 12
#: events rendered in the page at once; the rest arrive in <template> chunks trace.js opens on demand
WINDOW = 300
CHUNK = 250

_lock = threading.Lock()
_cache: OrderedDict[tuple, tuple[dict[str, Any], Markup]] = OrderedDict()
stats = {"hits": 0, "misses": 0}


def cached_trace(session: Session, run: Run, *, show_demo_truth: bool, success_threshold: float,
                 recording: bool = False, show_labels: bool = True) -> tuple[dict[str, Any], Markup]:
    """Returns (view model, rendered trace HTML) of `run`, from the cache when its content is unchanged.
    `recording` (a live-captured run still receiving events) shows in the header, so it is part of the key.
    `show_labels` False (a blind annotator): the run is first passed through the blind rule
    (`app.annotations.blind.visible_run`: no hidden metadata, audits or checks), a separate entry."""
    key = (run.id, run.content_hash, bool(show_demo_truth), float(success_threshold), bool(recording),
           bool(show_labels))
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            stats["hits"] += 1
            return hit
    from app.annotations.blind import Sight, visible_run
    from app.runs import service as runs_service
    from app.web.templating import templates
    from app.web.trace import build_trace

    canon = visible_run(runs_service.to_canonical(session, run),
                        Sight(labels=bool(show_labels), demo_truth=bool(show_demo_truth)))
    view = build_trace(canon, show_demo_truth=show_demo_truth, success_threshold=success_threshold)
    html = Markup(templates.env.get_template("run/trace.html").render(t=view, window=WINDOW, chunk=CHUNK,
                                                                          recording=recording))
    with _lock:
        stats["misses"] += 1
        _cache[key] = (view, html)
        _cache.move_to_end(key)
        while len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    return view, html


def clear() -> None:
    with _lock:
        _cache.clear()
