"""Login throttling and bounded password hashing.

* Failed logins are counted per account (user name as typed, case-folded) and per client
  address in a sliding window (LOGIN_WINDOW_SECONDS). Past LOGIN_MAX_FAILURES_PER_ACCOUNT /
  LOGIN_MAX_FAILURES_PER_ADDRESS, a login is answered 429 with `Retry-After` (seconds until the
  oldest counted failure leaves the window) before any password is checked, even a right one.
  A successful login clears its account's failures. The counters live in the server process
  (one uvicorn process, as `a2annotate serve` runs). The address is the connection's peer;
  `X-Forwarded-For` counts only from the proxies listed in FORWARDED_ALLOW_IPS (empty by default),
  so behind a reverse proxy list it there, and nobody else can choose an address per request.
* Password hashing (argon2, 64 MiB and ~50-300 ms each) runs on a separate limiter of
  MAX_CONCURRENT_PASSWORD_HASHES threads: waiting logins wait in the event loop, holding no
  thread of the pool the pages and the API use and no hashing memory; past MAX_WAITING_LOGINS
  waiting, a login is answered 503 with `Retry-After`.
"""
from __future__ import annotations

import math
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class LoginThrottle:
    """Sliding-window failure counters per key; thread-safe."""

    def __init__(self, max_failures: int, window: float, clock: Callable[[], float] = time.monotonic):
        self.max_failures = max_failures
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        self._fails: dict[str, deque[float]] = defaultdict(deque)

    def _prune(self, key: str, now: float) -> deque[float]:
        q = self._fails[key]
        while q and q[0] <= now - self.window:
            q.popleft()
        if not q:
            self._fails.pop(key, None)
        return q

    def retry_after(self, key: str) -> int:
        """0 when a login for `key` may be tried now, else the seconds to wait."""
        with self._lock:
            now = self.clock()
            q = self._prune(key, now)
            if len(q) < self.max_failures:
                return 0
            return max(1, math.ceil(q[len(q) - self.max_failures] + self.window - now))

    def fail(self, key: str) -> None:
        with self._lock:
            now = self.clock()
            self._prune(key, now)
            self._fails[key].append(now)

    def clear(self, key: str) -> None:
        with self._lock:
            self._fails.pop(key, None)


class HashLimiter:
    """At most `slots` password hashes at once, at most `max_waiting` logins waiting for one."""

    def __init__(self, slots: int, max_waiting: int):
        self.slots = max(1, slots)
        self.max_waiting = max_waiting
        self._limiter: anyio.CapacityLimiter | None = None
        self._loop: Any = None

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The limiter of the running event loop (the server has one; it is made in it)."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._limiter is None or self._loop is not loop:
            self._limiter, self._loop = anyio.CapacityLimiter(self.slots), loop
        return self._limiter

    def busy(self) -> bool:
        """True when too many logins already wait for a hashing slot."""
        return self.limiter.statistics().tasks_waiting >= self.max_waiting

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(func, *args, limiter=self.limiter)


class LoginGuard:
    """Everything the login route needs: the two throttles and the hash limiter."""

    def __init__(self, settings: Any):
        window = settings.login_window_seconds
        self.accounts = LoginThrottle(settings.login_max_failures_per_account, window)
        self.addresses = LoginThrottle(settings.login_max_failures_per_address, window)
        self.hashing = HashLimiter(settings.max_concurrent_password_hashes, settings.max_waiting_logins)

    @staticmethod
    def account_key(username: str) -> str:
        return username.strip().casefold()[:200]

    def retry_after(self, username: str, address: str) -> int:
        return max(self.accounts.retry_after(self.account_key(username)), self.addresses.retry_after(address))

    def failed(self, username: str, address: str) -> None:
        self.accounts.fail(self.account_key(username))
        self.addresses.fail(address)

    def succeeded(self, username: str) -> None:
        self.accounts.clear(self.account_key(username))
