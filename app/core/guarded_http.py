"""uvicorn's HTTP/1.1 protocol (h11) with what it lacks against slow and many clients.

uvicorn has no timeout for a request's headers: a connection that never finishes them is kept
for ever, and since `--limit-concurrency` counts connections, 99 such connections (slowloris)
made every request 503, `/healthz` included. `GuardedH11Protocol` adds, per connection:

* a **header timeout** (`SERVER_TIMEOUT_HEADERS`, seconds): the request line and headers must be
  complete within it, counted from the connection's start, or from the end of the previous
  response on a kept-alive connection (a header trickled a byte at a time does not reset it);
  past it the server answers 408 and closes;
* a **body timeout** (`SERVER_TIMEOUT_BODY`, seconds): while a request body is being received, a
  pause longer than it closes the connection (the app sees a disconnect); the time the app
  itself does not read (flow control paused) does not count;
* a **per-address connection limit** (`SERVER_LIMIT_PER_ADDRESS`): one client address holds at
  most that many open connections in a server process; a further one is answered 503 and closed
  at once, before anything is read. The proxies in `FORWARDED_ALLOW_IPS` (a reverse proxy carries
  every client) are not limited.

The values come from the environment (set by `a2annotate serve` from its options, so the worker
processes of `--workers N` read the same), read once per process.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import time
from dataclasses import dataclass
from functools import lru_cache

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

DEFAULT_TIMEOUT_HEADERS = 10.0
DEFAULT_TIMEOUT_BODY = 60.0
DEFAULT_LIMIT_PER_ADDRESS = 30

#: open connections per client address in this process
_OPEN: dict[str, int] = {}


@dataclass(frozen=True)
class Guards:
    timeout_headers: float
    timeout_body: float
    limit_per_address: int
    exempt: tuple  # networks (ip_network) whose peers are not limited per address; ("*",): all

    def is_exempt(self, host: str) -> bool:
        if "*" in self.exempt:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(ip in net for net in self.exempt if not isinstance(net, str))


def _float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


@lru_cache
def guards() -> Guards:
    """The limits of this process, from the environment (see the module docstring)."""
    exempt: list = []
    for part in os.environ.get("FORWARDED_ALLOW_IPS", "").split(","):
        part = part.strip()
        if part == "*":
            exempt.append("*")
        elif part:
            try:
                exempt.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                continue  # a host name: uvicorn matches those literally; it is no address here
    return Guards(timeout_headers=_float("SERVER_TIMEOUT_HEADERS", DEFAULT_TIMEOUT_HEADERS),
                  timeout_body=_float("SERVER_TIMEOUT_BODY", DEFAULT_TIMEOUT_BODY),
                  limit_per_address=int(_float("SERVER_LIMIT_PER_ADDRESS", DEFAULT_LIMIT_PER_ADDRESS)),
                  exempt=tuple(exempt))


def open_connections(host: str) -> int:
    """Open connections of client address `host` in this process (for tests and logs)."""
    return _OPEN.get(host, 0)


_REFUSED: dict[str, list] = {}  # address -> [refusals not logged yet, time of the last log line]


def _log_refusal(logger, host: str, limit: int) -> None:
    """One log line per address and 10 s (a refused client reconnecting in a loop would flood the log)."""
    now = time.monotonic()
    entry = _REFUSED.setdefault(host, [0, 0.0])
    entry[0] += 1
    if now - entry[1] >= 10:
        logger.warning("%s: %d connection(s) refused: more than %d open from this address (SERVER_LIMIT_PER_ADDRESS)",
                       host, entry[0], limit)
        entry[0], entry[1] = 0, now
        if len(_REFUSED) > 10_000:
            _REFUSED.clear()


def _raw_response(status: str, message: str) -> bytes:
    body = message.encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body timeouts and a per-address connection limit."""

    _guards: Guards
    _counted: str | None = None
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guards = g = guards()
        host = self.client[0] if self.client else None
        if host is not None and g.limit_per_address > 0 and not g.is_exempt(host):
            if _OPEN.get(host, 0) >= g.limit_per_address:
                _log_refusal(self.logger, host, g.limit_per_address)
                transport.write(_raw_response("503 Service Unavailable",
                                              "too many connections from your address\n"))
                transport.close()
                return
            _OPEN[host] = _OPEN.get(host, 0) + 1
            self._counted = host
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        if self._counted is not None:
            left = _OPEN.get(self._counted, 1) - 1
            if left > 0:
                _OPEN[self._counted] = left
            else:
                _OPEN.pop(self._counted, None)
            self._counted = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().data_received(data)
        self._after_events()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # the next request's headers, from now
            self._after_events()

    # -- timers
    def _after_events(self) -> None:
        state = self.conn.their_state
        if state is not h11.IDLE and self._header_timer is not None:
            self._header_timer.cancel()  # the headers are complete
            self._header_timer = None
        if state is h11.SEND_BODY and self._body_timer is None and not self.transport.is_closing():
            self._body_timer = self.loop.call_later(self._guards.timeout_body, self._body_timeout)

    def _arm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self._guards.timeout_headers, self._header_timeout)

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is still being sent (pipelining): not idle
        if self.conn.trailing_data[0]:  # part of a request arrived: say why it is closed
            self.logger.warning("%s: request headers not complete within %s s (SERVER_TIMEOUT_HEADERS); closed",
                                self.client[0] if self.client else "?", self._guards.timeout_headers)
            self.transport.write(_raw_response("408 Request Timeout", "request headers took too long\n"))
        self.transport.close()

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
            return
        if self.flow.read_paused:  # the app is not reading: the client is not the slow one
            self._body_timer = self.loop.call_later(self._guards.timeout_body, self._body_timeout)
            return
        self.logger.warning("%s: request body stalled for %s s (SERVER_TIMEOUT_BODY); closed",
                            self.client[0] if self.client else "?", self._guards.timeout_body)
        self.transport.close()
