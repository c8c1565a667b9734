"""An append-only event list with dense seqs and strictly increasing whole-second timestamps."""
from __future__ import annotations

import calendar
import random
import time
from typing import Any

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAY = 86400
#: 2026-01-05T00:00:00Z, the earliest day a demo run can start.
EPOCH0 = calendar.timegm((2026, 1, 5, 0, 0, 0, 0, 0, 0))


def iso(t: int) -> str:
    """Epoch seconds -> ``YYYY-MM-DDTHH:MM:SSZ``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def iso_date(t: int) -> str:
    """Epoch seconds -> ``YYYY-MM-DD``."""
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def human_date(t: int) -> str:
    """Epoch seconds -> ``Thu, Mar 12``."""
    g = time.gmtime(t)
    return f"{WEEKDAYS[g.tm_wday]}, {MONTHS[g.tm_mon - 1]} {g.tm_mday}"


class Trace:
    """Builds the `events` list of one canonical run.

    Every event gets the next seq and a timestamp `gap` seconds (drawn from the given range, at
    least 1) after the previous one; shared events get the next hop number, private ones none.
    """

    def __init__(self, rng: random.Random, t0: int) -> None:
        self.rng = rng
        self.t = t0
        self.hop = 0
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, actor: str, recipients: list[str], visibility: str, content: str | None,
            data: dict[str, Any] | None = None, parent: int | None = None,
            gap: tuple[int, int] = (3, 20)) -> int:
        """Append one event; return its seq."""
        self.t += max(1, self.rng.randint(gap[0], gap[1]))
        seq = len(self.events)
        hop = None
        if visibility == "shared":
            self.hop += 1
            hop = self.hop
        self.events.append({
            "seq": seq, "ts": iso(self.t), "kind": kind, "actor": actor, "recipients": recipients,
            "visibility": visibility, "content": content, "data": data if data is not None else {},
            "parent_seq": parent, "hop": hop, "metadata": {},
        })
        return seq

    # -- conveniences ----------------------------------------------------------------------------
    def message(self, frm: str, to: str, content: str, data: dict | None = None, parent: int | None = None,
                gap: tuple[int, int] = (6, 45)) -> int:
        """A shared message from one agent to a peer agent."""
        return self.add("message", frm, [to], "shared", content, data, parent, gap)

    def private_message(self, frm: str, to: str, content: str, data: dict | None = None,
                        parent: int | None = None, gap: tuple[int, int] = (5, 30)) -> int:
        """A principal <-> own agent message (private to that pair)."""
        return self.add("message", frm, [to], "private", content, data, parent, gap)

    def tool(self, agent: str, name: str, args: dict, status: str, result: dict, summary: str,
             gap: tuple[int, int] = (1, 4)) -> tuple[int, int]:
        """A tool call and its result inside `agent`'s environment; return (call seq, result seq)."""
        arg_text = ", ".join(f"{k}={v}" for k, v in args.items())
        call = self.add("tool_call", agent, [], "private", f"{name}({arg_text})",
                        {"tool": name, "args": args}, None, gap)
        res = self.add("tool_result", agent, [], "private", summary,
                       {"tool": name, "status": status, "result": result}, call, (1, 3))
        return call, res

    def record(self, agent: str, record_type: str, record: dict, content: str, op: str = "create") -> int:
        """A write to the agent's own system of record."""
        return self.add("state_update", agent, [], "private", content,
                        {"record_type": record_type, "op": op, "record": record}, None, (1, 4))

    def log(self, agent: str, content: str, data: dict | None = None, gap: tuple[int, int] = (1, 5)) -> int:
        """A harness log line of `agent`."""
        return self.add("log", agent, [], "private", content, data, None, gap)
