"""The judge runner: asyncio, the official `openai` client, bounded concurrency, rate limits,
retries, a response cache, per-run state, cancellation and resumption.

`execute(engine, judge_run_id)` is a plain blocking function (so a job system can wrap it): it
runs an event loop in the calling thread and

* reads the runs of the judge run (its ``queued`` results) in a reader thread, 50 at a time in
  one query per table, ahead of the workers; a worker makes a run's prompt data
  (`app.judges.prompts.run_view`) on the loop when it takes the run; from `app.judges.prep.MIN_RUNS`
  runs on (in one process), a second process reads the runs after the first chunk and makes their
  prompt data (`app.judges.prep`);
* lets 1.5x ``limits.concurrency`` workers judge runs (the extra ones make their prompts while
  the requests wait); every request passes one shared semaphore of ``limits.concurrency`` and
  the shared `aiolimiter` buckets for requests and tokens per minute
  (``limits.requests_per_minute`` / ``tokens_per_minute``; 0 = unlimited);
* retries (``limits.retries`` times, `tenacity`) on 429, 408, 409, 5xx, timeouts and lost
  connections, waiting what ``Retry-After`` (or ``retry-after-ms``) says when the server says it,
  else exponential backoff with full jitter between ``backoff_initial_seconds`` and
  ``backoff_max_seconds``; while it waits the run's state is ``delayed``;
* sends each request through the SDK's ``client.post`` as JSON bytes made with orjson (not the
  typed ``chat.completions.create``, whose parameter transform and response models cost more CPU
  than the rest of a request), on the SDK's aiohttp transport when ``openai[aiohttp]`` is
  installed, and reads the answer with orjson;
* answers a request from the cache (`judge_cache`, keyed by the sha256 of model, messages,
  parameters and sample number) when it was answered before, and stores every new answer there;
  the lookups of requests made while one lookup runs are made together, in one query;
* retries an answer that is not the contract's JSON object once, showing the model the parse
  error; a second failure makes the run's result ``error`` with the raw text kept;
* writes results, calls and judge annotations in a writer thread, in batches (one transaction
  and a few statements per batch, every ``FLUSH_SECONDS`` or sooner when ``FLUSH_ITEMS`` results
  wait), and updates the judge run's counters and heartbeat there; a judge run whose
  ``cancel_requested`` is set (or whose `cancel` event is set) stops: runs in flight go back to
  ``queued`` and the judge run ends ``cancelled``; reaching ``limits.cost_cap`` stops it the same
  way, ending ``error``;
* with ``processes`` > 1 (``limits.processes``, ``--processes``; `processes_for`), splits the runs
  over that many processes that take chunks from one queue (`_Team`), each with its own loop and
  share of the limits (`share_limits`), the counters written as increments (docs/judges.md,
  "Several processes").
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import orjson
from aiolimiter import AsyncLimiter
from sqlalchemy.engine import Engine
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from app.core.db import other_processes_can_open
from app.judges import prep as prep_mod
from app.judges.parse import AnswerError, extract_json
from app.judges.prompts import compile_templates, estimate_tokens, run_view
from app.judges.request import PreparedCall, call_messages, prepared, request_key, request_params
from app.judges.strategies import CallSpec, Outcome, judge

log = logging.getLogger("a2annotate.judges")

FLUSH_SECONDS = 0.25
FLUSH_ITEMS = 64
#: the longest the second chunk's read waits for the first chunk's requests to be sent
FIRST_OUT_WAIT = 0.1
RETRY_STATUS = {408, 409, 429}
MAX_RETRY_AFTER = 600.0


class CallFailed(RuntimeError):
    """A request that failed for good (retries used up, or an error not worth retrying)."""

    def __init__(self, message: str, stat: CallStat | None = None):
        super().__init__(message)
        self.stat = stat


class AnswerFailed(RuntimeError):
    """An answer that could not be parsed, twice; `raw` is the model's last text."""

    def __init__(self, message: str, raw: str | None):
        super().__init__(message)
        self.raw = raw


class Stopped(Exception):
    """The judge run stopped (cancelled, or its cost cap reached) while this request waited for a
    request slot: it is not sent, and its run goes back to ``queued``."""


@dataclass
class CallStat:
    position: int
    request_key: str
    cached: bool = False
    status: str = "ok"
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    cost: float = 0.0
    error: str | None = None


@dataclass
class ResultOut:
    """What a worker hands the writer for one run."""

    result_id: int
    run_pk: int
    run_id: str
    outcome: Outcome | None
    calls: list[CallStat] = field(default_factory=list)
    error: str | None = None
    raw: str | None = None


# --------------------------------------------------------------------------- the request side

#: every request's body is the JSON bytes made here (orjson), sent as they are; each request also
#: passes its cache key as the SDK's ``idempotency_key`` (the same for every attempt of it; without
#: one the SDK makes a uuid4 per request, sent only to endpoints that ask for such a header)
_JSON_OPTIONS: dict[str, Any] = {"headers": {"Content-Type": "application/json"}}


@functools.cache
def tls_context() -> Any:
    """This process's TLS context for judge endpoints, made once: the one the SDK's transport makes
    by default (its HTTP library's ``create_ssl_context()``: the system's CAs, ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` honoured), which costs about 20 ms to load and is the same for every client;
    shared by every judge run of the process (an ``ssl.SSLContext`` may be). None when that library
    cannot be imported (the SDK then makes its own)."""
    try:
        import httpx2
        return httpx2.create_ssl_context()
    except Exception:  # noqa: BLE001 - another SDK build: it makes its own context
        return None


def _http_client(**kw: Any) -> dict[str, Any]:
    """The SDK's HTTP client: its aiohttp transport (``openai[aiohttp]``, less CPU per request than
    its default httpx transport) when it is installed, else its default one, on this process's TLS
    context (`tls_context`); `kw` (say, ``event_hooks``) go to the client."""
    import openai

    ctx = tls_context()
    if ctx is not None:
        kw.setdefault("verify", ctx)
    factory = getattr(openai, "DefaultAioHttpClient", None)
    if factory is not None:
        try:
            return {"http_client": factory(**kw)}
        except RuntimeError:  # the SDK says the aiohttp extra is missing
            pass
    return {"http_client": openai.DefaultAsyncHttpxClient(**kw)}


class _Slot:
    """One request attempt's hold on a request slot (`Endpoint._post`)."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = False


#: the slot of the request attempt being sent in this task (`Endpoint._post` sets it; the HTTP
#: client's event hooks, `Endpoint._slot_in` and `_slot_out`, take and free it)
_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("judge_request_slot", default=None)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def retry_after_seconds(exc: BaseException) -> float | None:
    """What the server asked us to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an
    HTTP date); None when it said nothing usable."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, min(float(ms) / 1000, MAX_RETRY_AFTER))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, min(float(value), MAX_RETRY_AFTER))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, min(when.timestamp() - time.time(), MAX_RETRY_AFTER))
    except (TypeError, ValueError, IndexError):
        return None


def retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUS or exc.status_code >= 500
    return False


def _refused(exc: BaseException) -> OSError | None:
    """The connection error under an SDK error, if any (its aiohttp transport reports a refused or
    unreachable connection as a connect timeout)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _describe(exc: BaseException) -> str:
    import openai

    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {str(exc.message)[:300]}"
    if isinstance(exc, openai.APITimeoutError):
        refused = _refused(exc)
        return f"connection failed: {str(refused)[:300]}" if refused is not None else "the request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {exc}"
    return f"{type(exc).__name__}: {exc}"


class Endpoint:
    """One judge's connection: the client, the limits and the accounting of its requests."""

    def __init__(self, defn: dict[str, Any], cache_get: Callable[[str], Any], cache_put: Callable[..., None],
                 on_state: Callable[[int, str], None], stopped: Callable[[], bool] = lambda: False,
                 on_send: Callable[[], None] | None = None):
        import openai

        ep, lim = defn["endpoint"], defn["limits"]
        self.defn = defn
        # a request holds its slot from just before it is sent to its answer's headers (the HTTP
        # client's event hooks): the SDK builds the next request, and reads this one's answer,
        # outside the slots, so `limits.concurrency` bounds what the server has in hand
        hooks = {"request": [self._slot_in], "response": [self._slot_out]}
        self.client = openai.AsyncOpenAI(base_url=ep["base_url"], api_key=os.environ.get(ep["api_key_env"]) or "unset",
                                         max_retries=0, timeout=float(lim["timeout_seconds"]),
                                         **_http_client(event_hooks=hooks))
        self.client.default_headers  # noqa: B018 - made now (the SDK's platform headers, once a process), not by the first request
        self.semaphore = asyncio.Semaphore(int(lim["concurrency"]))
        rpm, tpm = int(lim["requests_per_minute"] or 0), int(lim["tokens_per_minute"] or 0)
        self.requests = AsyncLimiter(rpm, 60) if rpm else None
        self.tokens = AsyncLimiter(tpm, 60) if tpm else None
        self.tpm = tpm
        self.cache_get, self.cache_put, self.on_state = cache_get, cache_put, on_state
        self.stopped, self.on_send = stopped, on_send
        # without a cost cap, a request's slot is freed as its answer's headers come, and handed on
        # at once (one loop turn sooner: measured, 1-2% of a fast judge run's wall); with one, once
        # the answer's cost is counted and the cap checked, so a cap reached stops the waiting
        # request unsent
        self.hand_on = lim.get("cost_cap") is None
        self.price_in = float(defn["prices"]["input_per_million"]) / 1e6
        self.price_out = float(defn["prices"]["output_per_million"]) / 1e6

    async def close(self) -> None:
        await self.client.close()

    def _wait(self, retry_state) -> float:
        exc = retry_state.outcome.exception()
        lim = self.defn["limits"]
        said = retry_after_seconds(exc) if exc is not None else None
        if said is not None:
            return said + random.uniform(0, min(0.1 * said, 1.0))
        cap = float(lim["backoff_max_seconds"])
        base = float(lim["backoff_initial_seconds"]) * (2 ** (retry_state.attempt_number - 1))
        return random.uniform(0, min(cap, base))  # full jitter

    async def _slot_in(self, request: Any) -> None:
        """The HTTP client's request hook: the attempt being sent waits for a request slot (held
        already when the request follows a redirect)."""
        slot = _SLOT.get()
        if slot is None or slot.held:
            return
        await self.semaphore.acquire()
        slot.held = True
        if self.stopped():  # stopped while this request waited for its slot: not sent
            raise Stopped()
        if self.on_send is not None:
            self.on_send()

    async def _slot_out(self, response: Any) -> None:
        """The HTTP client's response hook: the answer's headers came, the server is done with
        the request; without a cost cap its slot goes to the request waiting for one now."""
        slot = _SLOT.get()
        if slot is not None and slot.held and self.hand_on:
            slot.held = False
            self.semaphore.release()
            await asyncio.sleep(0)  # the request waiting for the slot just freed goes first

    async def _post(self, body: bytes, est_tokens: int, result_id: int, stat: CallStat) -> bytes:
        import openai

        def before_sleep(_state) -> None:
            self.on_state(result_id, "delayed")

        retrying = AsyncRetrying(stop=stop_after_attempt(int(self.defn["limits"]["retries"]) + 1), wait=self._wait,
                                 retry=retry_if_exception(retryable), before_sleep=before_sleep, reraise=True)
        async for attempt in retrying:
            with attempt:
                if stat.attempts:
                    self.on_state(result_id, "running")
                stat.attempts += 1
                if self.requests is not None:
                    await self.requests.acquire()
                if self.tokens is not None:
                    await self.tokens.acquire(min(est_tokens, self.tpm))
                slot = _Slot()
                token = _SLOT.set(slot)
                try:
                    return await self.client.post("/chat/completions", cast_to=bytes, content=body,
                                                  options={**_JSON_OPTIONS, "idempotency_key": stat.request_key})
                except openai.APIConnectionError as exc:
                    if isinstance(exc.__cause__, Stopped):  # (raised in the request hook; the SDK wraps it)
                        raise Stopped() from None
                    raise
                finally:
                    _SLOT.reset(token)
                    if slot.held:  # (a cost cap, or no answer: the slot is freed here)
                        slot.held = False
                        self.semaphore.release()
        raise AssertionError("unreachable")  # pragma: no cover

    def _content(self, response: Any) -> tuple[str, bool]:
        """The answer's text (a tool call's arguments in tools mode) and whether it was cut."""
        choices = response.get("choices") if isinstance(response, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None:
            return "", False
        msg = choice.get("message") or {}
        text = msg.get("content") or ""
        calls = msg.get("tool_calls")
        if self.defn["output"] == "tools" and calls:
            text = ((calls[0] or {}).get("function") or {}).get("arguments") or ""
        return str(text), choice.get("finish_reason") == "length"

    async def send(self, messages: list[dict[str, str]], answer: str, sample: int, result_id: int,
                   position: int, ahead: PreparedCall | None = None) -> tuple[str, CallStat]:
        """One request (or its cached answer): the text and the call's accounting. `ahead`: these
        messages' request, made ahead (`app.judges.request.prepare_call`)."""
        if ahead is None:
            params = request_params(self.defn, answer)
            key = request_key({"params": params, "messages": messages, "sample": sample})
        else:
            key = ahead.keys[sample]
        stat = CallStat(position=position, request_key=key)
        hit = await self.cache_get(key)
        if hit is not None:
            stat.cached, stat.tokens_in, stat.tokens_out = True, hit[1], hit[2]
            return hit[0], stat
        if ahead is None:
            body = orjson.dumps({**params, "messages": messages})
            est = sum(estimate_tokens(m["content"]) for m in messages) + int(params["max_tokens"])
        else:
            body, est = ahead.body, ahead.est_tokens
        t0 = time.perf_counter()
        try:
            raw = await self._post(body, est, result_id, stat)
            try:
                response = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"the endpoint's answer is no JSON ({exc}): {raw[:200]!r}") from None
        except Stopped:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes the call's error
            stat.latency_ms = int((time.perf_counter() - t0) * 1000)
            stat.status, stat.error = "error", _describe(exc)
            raise CallFailed(stat.error, stat) from None
        finally:
            if stat.status != "error":
                stat.latency_ms = int((time.perf_counter() - t0) * 1000)
        text, cut = self._content(response)
        usage = response.get("usage") if isinstance(response, dict) else None
        usage = usage if isinstance(usage, dict) else {}
        stat.tokens_in = _count(usage.get("prompt_tokens")) or sum(estimate_tokens(m["content"]) for m in messages)
        stat.tokens_out = _count(usage.get("completion_tokens")) or estimate_tokens(text)
        stat.cost = stat.tokens_in * self.price_in + stat.tokens_out * self.price_out
        if cut:
            stat.error = "the answer was cut at max_tokens (finish_reason length)"
        else:
            self.cache_put(key, text, stat.tokens_in, stat.tokens_out)
        return text, stat


class Asker:
    """The `Ask` of one run: renders each call, sends its samples, parses (one retry on a bad answer)."""

    def __init__(self, endpoint: Endpoint, defn: dict[str, Any], view, result_id: int):
        self.endpoint, self.defn, self.view, self.result_id = endpoint, defn, view, result_id
        self.calls: list[CallStat] = []
        self.last_raw: str | None = None

    async def _send(self, messages: list[dict[str, str]], answer: str, sample: int,
                    ahead: PreparedCall | None = None):
        try:
            text, stat = await self.endpoint.send(messages, answer, sample, self.result_id, len(self.calls), ahead)
        except CallFailed as exc:
            if exc.stat is not None:
                self.calls.append(exc.stat)
            raise
        self.calls.append(stat)
        return text, stat

    async def _one(self, spec: CallSpec, messages: list[dict[str, str]], sample: int,
                   ahead: PreparedCall | None = None):
        text, stat = await self._send(messages, spec.answer, sample, ahead)
        self.last_raw = text
        try:
            return spec.parse(extract_json(text))
        except AnswerError as exc:
            stat.status = "parse_error"
            stat.error = (stat.error + "; " if stat.error else "") + str(exc)
            retry = messages + [{"role": "assistant", "content": text},
                                {"role": "user", "content": f"Your answer could not be used: {exc}. Answer again "
                                                            "with only the JSON object, in the shape asked for."}]
            text2, stat2 = await self._send(retry, spec.answer, sample)
            self.last_raw = text2
            try:
                return spec.parse(extract_json(text2))
            except AnswerError as exc2:
                stat2.status = "parse_error"
                stat2.error = (stat2.error + "; " if stat2.error else "") + str(exc2)
                raise AnswerFailed(f"the answer could not be parsed, twice: {exc2}", text2) from None

    async def __call__(self, spec: CallSpec):
        ahead = prepared(self.view, spec)  # (the prep process made the run's first call)
        messages = ahead.messages if ahead is not None else call_messages(self.defn, self.view, spec)
        k = int(self.defn["sampling"]["samples"])
        if k == 1:
            return [await self._one(spec, messages, 0, ahead)]
        return list(await asyncio.gather(*(self._one(spec, messages, i, ahead) for i in range(k))))


# --------------------------------------------------------------------------- the run loop

@dataclass
class Progress:
    total: int
    done: int = 0
    error: int = 0
    running: int = 0
    delayed: int = 0
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    state: str = "running"
    #: why it stopped before the end (None: it did not)
    reason: str | None = None
    #: with several processes: the runs each judged (done or error), the lead's first
    processes: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Store:
    """The writer and reader threads, each with its own session."""

    def __init__(self, engine: Engine, judge_run_id: int):
        from sqlmodel import Session

        from app.core.db import write_bind

        self.engine, self.judge_run_id = engine, judge_run_id
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="judge-writer")
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="judge-reader")
        self.cacher = ThreadPoolExecutor(1, thread_name_prefix="judge-cache")
        self.wsession = Session(write_bind(engine), expire_on_commit=False)  # SQLite: BEGIN IMMEDIATE
        self.rsession = Session(engine)
        self.csession = Session(engine)
        self.ctx: dict[str, Any] = {}

    def close(self) -> None:
        def _close(s):
            s.close()

        self.writer.submit(_close, self.wsession).result()
        self.reader.submit(_close, self.rsession).result()
        self.cacher.submit(_close, self.csession).result()
        for pool in (self.writer, self.reader, self.cacher):
            pool.shutdown()


def _report(progress: Callable[[Progress], None] | None, prog: Progress) -> None:
    """Call the progress callback; a failing callback is logged, never the run's end."""
    if progress is None:
        return
    try:
        progress(prog)
    except Exception:  # noqa: BLE001
        log.exception("judge progress callback failed")


async def _run(engine: Engine, judge_run_id: int, progress: Callable[[Progress], None] | None,
               cancel: Any, processes: int | None = None, helper: dict[str, Any] | None = None) -> Progress:
    """One process's share of a judge run. The lead (``helper`` None) sets the judge run up, starts
    the other processes when there are to be more than one (`_Team`), judges runs itself, waits for
    the others and ends the judge run; a helper (``helper``: its chunk queue and limits) only judges
    the chunks of runs it takes."""
    from app.judges import service

    loop = asyncio.get_running_loop()
    store = _Store(engine, judge_run_id)
    team: _Team | None = None
    prep: prep_mod.Prep | None = None
    try:
        setup = await loop.run_in_executor(store.writer, functools.partial(
            service.runner_setup, store.wsession, judge_run_id, start=helper is None))
        defn, items = setup["definition"], setup["items"]
        if helper is None:
            n_proc = processes_for(defn, len(items), processes, engine)
            if n_proc > 1:
                team = _Team(engine, judge_run_id, n_proc, defn["limits"])
                # the lead has the whole concurrency until a helper is ready, then hands it its share
                helper = {"chunks": team.chunks, "lead": True, "limits": {
                    k: v for k, v in team.shares[0].items() if k != "concurrency"}}
        if helper is not None:
            defn = {**defn, "limits": {**defn["limits"], **helper["limits"]}}
        prog = Progress(total=setup["total"], done=setup["done"], error=0)
        shown = Progress(total=setup["total"])  # with several processes: what the judge run's row says
        flushed = dict.fromkeys(service.COUNTERS, 0)
        pending_states: dict[int, str] = {}
        pending_results: list[ResultOut] = []
        pending_cache: dict[str, tuple[str, int, int]] = {}
        stop = asyncio.Event()
        wake = asyncio.Event()  # set: the flusher writes now, not at its next tick
        stop_reason: list[str] = ["cancelled"] if setup.get("cancelled") else []
        if stop_reason:  # a helper starting after the cancel takes no chunk
            stop.set()
        cap = defn["limits"].get("cost_cap")
        cap_total = defn["limits"].get("cost_cap_total", cap)
        lock = asyncio.Lock()

        def stop_now(reason: str) -> None:
            if not stop.is_set():
                stop_reason.append(reason)
                stop.set()
                if team is not None and reason == "cancelled":
                    team.cancel.set()

        def show(totals: dict[str, Any]) -> None:
            for k, v in totals.items():
                setattr(shown, k, v)
            shown.running, shown.delayed = prog.running, prog.delayed
            _report(progress, shown)

        def on_state(result_id: int, state: str) -> None:
            pending_states[result_id] = state
            if state == "delayed":
                prog.delayed += 1
            elif state == "running" and prog.delayed:
                prog.delayed -= 1

        waiting: dict[str, list[asyncio.Future]] = {}
        looking: list[bool] = [False]

        async def look_up() -> None:
            # one query for every key asked while the previous query ran (not one per request)
            try:
                while waiting:
                    batch = dict(waiting)
                    waiting.clear()
                    try:
                        found = await loop.run_in_executor(store.cacher, service.cache_lookup, store.csession,
                                                           list(batch))
                    except Exception as exc:  # noqa: BLE001 - each waiting request gets the failure
                        for futs in batch.values():
                            for f in futs:
                                if not f.done():
                                    f.set_exception(exc)
                        continue
                    for k, futs in batch.items():
                        for f in futs:
                            if not f.done():
                                f.set_result(found.get(k))
            finally:
                looking[0] = False

        async def cache_get(key: str):
            if key in pending_cache:
                return pending_cache[key]
            fut = loop.create_future()
            waiting.setdefault(key, []).append(fut)
            if not looking[0]:
                looking[0] = True
                lookups.add(t := asyncio.create_task(look_up()))
                t.add_done_callback(lookups.discard)
            return await fut

        def cache_put(key: str, text: str, tin: int, tout: int) -> None:
            pending_cache[key] = (text, tin, tout)

        lookups: set[asyncio.Task] = set()
        endpoint: Endpoint  # made once the first runs are being read (below)
        # with several processes a process holds few runs ahead (its queue, the rest of its chunk),
        # so the others (a helper starts a few seconds late) find chunks left to take
        concurrency = int(defn["limits"]["concurrency"])
        # one process alone reads its first two chunks itself (a prep process makes the rest): the
        # first as large as the concurrency, read soonest; the second ready before the first
        # answers come, while a prep process starts
        first_chunk = min(concurrency, 50)
        second_chunk = min(2 * concurrency, 50)
        queue: asyncio.Queue = asyncio.Queue(maxsize=concurrency if helper is not None else max(4 * concurrency, 32))

        handed: list[asyncio.Task] = []

        async def hand_over(n: int) -> None:
            try:
                for _ in range(n):  # held to the end: the lead's requests in flight are at most its share
                    await endpoint.semaphore.acquire()
            finally:  # (cancelled: the lead has stopped asking)
                team.go.release()

        async def chunks():
            if helper is not None and not helper.get("lead"):
                await loop.run_in_executor(store.reader, _helper_ready)  # the lead made room for us
            if helper is None:  # the first two chunks (above), then 50 runs at a time
                yield items[:first_chunk]
                if len(items) > first_chunk:
                    yield items[first_chunk:first_chunk + second_chunk]
                for start in range(first_chunk + second_chunk, len(items), 50):
                    yield items[start:start + 50]
                return
            while True:  # several processes: each takes the next chunk of the shared queue
                chunk = await loop.run_in_executor(store.reader, helper["chunks"].get)
                if chunk is None:
                    return
                yield chunk

        async def read(chunk: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
            # each item with its run (the reader thread) and its prompt data when the prep process made it
            runs = await loop.run_in_executor(store.reader, service.load_runs, store.rsession, chunk)
            return [(item, runs.get(item["run_pk"]), None) for item in chunk]

        async def feed() -> None:
            nonlocal prep
            source = chunks()
            ahead: list[tuple[list[dict[str, Any]], Any]] = []  # chunks taken, each with its prep future
            missed = 0  # chunks in a row the prep process had not made when a worker wanted a run
            prep_first = None  # the prep process's first chunk (it may be late: the process starts)

            async def take() -> bool:  # the next chunk, handed to the prep process at once when there is one
                chunk = await anext(source, None)
                if chunk is not None:
                    ahead.append((chunk, prep.submit(chunk) if prep is not None else None))
                return chunk is not None

            first = await anext(source, None)
            if first is not None and not stop.is_set():
                second = await anext(source, None) if prep is not None else None
                if prep is not None:
                    await take()  # the third chunk is made in the prep process while these two are read here
                    prep_first = ahead[0][0] if ahead else None
                first_wave[0] = len(first)
                for entry in await read(first):
                    await queue.put(entry)
                if second:
                    # read once the first chunk's requests are out: reading holds the GIL, which the
                    # first requests' cache lookup and connections wait for
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(first_out.wait(), FIRST_OUT_WAIT)
                    for entry in await read(second):
                        await queue.put(entry)
            while not stop.is_set() and (ahead or await take()):
                chunk, fut = ahead.pop(0)
                if prep is not None and not ahead:
                    await take()  # one chunk ahead in the prep process
                got = None
                if fut is not None and prep is not None:
                    hungry.clear()  # from now: a worker that finds the queue empty
                    try:
                        views = await prep.result(fut, hungry)
                    except Exception:  # noqa: BLE001 - the prep process failed: this one reads
                        log.exception("judge run %s: the prep process failed; the runs are read here", judge_run_id)
                        prep.abandon()
                        prep = None
                    else:
                        if views is not None:
                            missed = 0
                            got = [(item, None, views.get(item["run_pk"], prep_mod.MISSING)) for item in chunk]
                        elif chunk is not prep_first:  # (its first chunk may be wanted while it starts)
                            missed += 1
                            if missed >= prep_mod.MISSES:
                                log.info("judge run %s: the prep process does not keep up; the runs are read "
                                         "here", judge_run_id)
                                prep.abandon()
                                prep = None
                for entry in got if got is not None else await read(chunk):
                    await queue.put(entry)
            for _ in range(workers_n):
                await queue.put(None)

        async def flush(final: bool = False, finish: tuple[str, str | None] | None = None) -> None:
            async with lock:
                states = dict(pending_states)
                pending_states.clear()
                results = list(pending_results)
                pending_results.clear()
                cache = dict(pending_cache)
                now = {k: getattr(prog, k) for k in service.COUNTERS}
                counters = {k: now[k] - flushed[k] for k in service.COUNTERS}
                try:
                    cancelled, totals = await loop.run_in_executor(store.writer, service.runner_flush,
                                                                   store.wsession, setup, states, results, cache,
                                                                   counters, finish)
                except Exception:
                    log.exception("judge run %s: storing results failed", judge_run_id)
                    raise
                flushed.update(now)
                for k in cache:
                    pending_cache.pop(k, None)
                if cancelled:
                    stop_now("cancelled")
                if team is not None:
                    show(totals)

        async def flusher() -> None:
            while not stop.is_set():
                try:
                    await asyncio.wait_for(wake.wait(), FLUSH_SECONDS)
                except TimeoutError:
                    pass
                wake.clear()
                if stop.is_set():  # the last batch is the final flush's
                    return
                if cancel is not None and cancel.is_set():
                    stop_now("cancelled")
                if helper is not None and not helper.get("lead") and os.getppid() != helper["parent"]:
                    stop_now("cancelled")  # the lead is gone (and with it, the judge run)
                if team is not None:
                    while team.ready.acquire(False):  # a helper is ready: its share of the concurrency
                        handed.append(asyncio.create_task(hand_over(team.shares[len(handed) + 1]["concurrency"])))
                if pending_results or pending_states or pending_cache or not stop.is_set():
                    await flush()

        async def judge_one(item: dict[str, Any], run: dict[str, Any] | None, view: Any) -> None:
            rid = item["result_id"]
            on_state(rid, "running")
            prog.running += 1
            asker = Asker(endpoint, defn, None, rid)
            out = ResultOut(rid, item["run_pk"], item["run_id"], None)
            try:
                if view is prep_mod.MISSING or (view is None and run is None):
                    raise CallFailed("the run is no longer stored")
                if view is None:
                    # made here, on the loop, one run at a time (not in the reader thread, whose CPU
                    # work would hold the GIL while answers wait to be read)
                    view = run_view(run, setup["taxonomy_vars"], success_threshold=setup["threshold"])
                else:  # made by the prep process, without the taxonomy every run shares
                    view.base["taxonomy"], view.modes = setup["taxonomy_vars"], setup["taxonomy_vars"]["modes"]
                asker.view = view
                out.outcome = await judge(defn, view, asker)
            except AnswerFailed as exc:
                out.error, out.raw = str(exc), exc.raw
            except CallFailed as exc:
                out.error = str(exc)
            except asyncio.CancelledError:
                pending_states[rid] = "queued"
                raise
            except Stopped:  # the judge run stopped before this run's request was sent: not judged
                pending_states[rid] = "queued"
                return
            except Exception as exc:  # noqa: BLE001 - a bug on one run is that run's error
                log.exception("judge run %s: run %s failed", judge_run_id, item["run_id"])
                out.error = f"{type(exc).__name__}: {exc}"
                out.raw = asker.last_raw
            finally:
                prog.running -= 1
                if not first_out.is_set():
                    launched()
            out.calls = asker.calls
            pending_states.pop(rid, None)
            pending_results.append(out)
            prog.calls += len(out.calls)
            prog.tokens_in += sum(c.tokens_in for c in out.calls)
            prog.tokens_out += sum(c.tokens_out for c in out.calls)
            prog.cost += sum(c.cost for c in out.calls)
            if out.error:
                prog.error += 1
            else:
                prog.done += 1
            if team is None:
                _report(progress, prog)
            if cap is not None and prog.cost >= float(cap):
                stop_now(f"the cost cap ({cap_total}) was reached at {prog.cost:.4f}" if cap == cap_total else
                         f"the cost cap ({cap_total}) was reached: this process's share {cap:.6g} at {prog.cost:.4f}")
            if len(pending_results) >= 4 * FLUSH_ITEMS:  # the writer is behind: wait for it
                await flush()
            elif len(pending_results) >= FLUSH_ITEMS:  # the flusher writes them; this worker goes on
                wake.set()

        hungry = asyncio.Event()  # set: a worker found no run waiting (the feeder then reads runs here)
        first_out = asyncio.Event()  # set: as many requests sent, or runs ended, as the first chunk has runs
        first_wave = [0, 0]  # the first chunk's size (once read), requests sent and runs ended since

        def launched() -> None:
            first_wave[1] += 1
            if first_wave[1] >= first_wave[0]:
                first_out.set()

        async def worker() -> None:
            while not stop.is_set():
                if queue.empty():
                    hungry.set()
                got = await queue.get()
                if got is None:
                    return
                await judge_one(*got)

        # more workers than requests allowed in flight: while `concurrency` requests wait for their
        # answers, the others make their runs' prompts and look up the cache, so that a request
        # slot freed is taken at once (the shared semaphore still bounds the requests)
        workers_n = concurrency + max(1, concurrency // 2)
        if helper is None or team is not None:
            _report(progress, prog)
        if team is not None:
            team.start(items)
        if team is None and helper is None and prep_mod.wanted(engine, len(items) - first_chunk - second_chunk):
            try:
                prep = prep_mod.Prep(engine, setup)
            except Exception:  # noqa: BLE001 - no second process here: this one reads
                log.exception("judge run %s: no prep process; reading in this process", judge_run_id)
        feeder = asyncio.create_task(feed())
        await asyncio.sleep(0)  # the feeder hands the first read to the reader thread...
        try:  # ...which reads while the client is made and the templates compiled here
            endpoint = Endpoint(defn, cache_get, cache_put, on_state, stopped=stop.is_set, on_send=launched)
            compile_templates(defn["prompts"])
        except BaseException:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
            raise
        flusher_task = asyncio.create_task(flusher())
        workers = [asyncio.create_task(worker()) for _ in range(workers_n)]
        stopper = asyncio.create_task(stop.wait())
        done_all = asyncio.gather(*workers, return_exceptions=True)
        await asyncio.wait([done_all, stopper], return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            prog.running = 0
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        if prep is not None:  # every chunk taken: it ends on its own, not waited for here
            prep.abandon()
            prep = None
        stop.set()
        wake.set()
        stopper.cancel()
        await asyncio.gather(flusher_task, stopper, return_exceptions=True)
        for t in handed:
            t.cancel()
        await endpoint.close()
        reason = stop_reason[0] if stop_reason else None
        prog.state = "cancelled" if reason == "cancelled" else ("error" if reason else "done")
        prog.reason = reason
        prog.delayed = 0
        alone = helper is None and team is None  # one process: its last batch ends the judge run too
        await flush(final=True, finish=(prog.state, reason if prog.state == "error" else None) if alone else None)
        if helper is not None and team is None:  # a helper: the lead ends the judge run
            return prog
        if team is not None:
            helpers = await team.wait(loop, store, cancel, show)
            prog.processes = [prog.done + prog.error] + [h.get("done", 0) + h.get("error", 0) for h in helpers]
            reasons = [reason] + [h["reason"] for h in helpers]
            errors = [r for r in reasons if r and r != "cancelled"]
            reason = errors[0] if errors else ("cancelled" if "cancelled" in reasons else None)
            prog.state = "cancelled" if reason == "cancelled" else ("error" if reason else "done")
            await loop.run_in_executor(store.writer, service.runner_finish, store.wsession, judge_run_id, prog.state,
                                       reason if prog.state == "error" else None)
            _, totals = await loop.run_in_executor(store.writer, service.runner_totals, store.wsession, judge_run_id)
            for k, v in totals.items():
                setattr(prog, k, v)
            prog.total, prog.reason = setup["total"], reason
        _report(progress, prog)
        return prog
    finally:
        if team is not None:
            team.close()
        if prep is not None:
            prep.close()
        store.close()


#: the cyclic collector's first threshold while a judge run runs (`_fewer_collections`; the prep
#: process's too)
GC_THRESHOLD = 50_000
_GC_LOCK = threading.Lock()
_GC_USERS: list[Any] = [0, None]  # judge runs in this process now, the threshold before the first


class _fewer_collections:  # noqa: N801 - used as a context manager
    """Python's cyclic collector runs every 700 new containers and a judge run makes hundreds of
    thousands (a run's rows, prompt data, requests, answers), so it ran hundreds of times per 500
    runs, going over every live object of the process each time: measured, a third of the runner's
    CPU. For the length of a judge run it runs every 50,000 (what the CLI import does,
    `app.ingest.loader`); memory stays flat, those objects are freed by reference counting. Judge
    runs in threads of one process share it: the last to end restores the threshold."""

    def __enter__(self) -> None:
        import gc

        with _GC_LOCK:
            if _GC_USERS[0] == 0:
                _GC_USERS[1] = gc.get_threshold()
                gc.set_threshold(max(_GC_USERS[1][0], GC_THRESHOLD), *_GC_USERS[1][1:])
            _GC_USERS[0] += 1

    def __exit__(self, *exc: Any) -> None:
        import gc

        with _GC_LOCK:
            _GC_USERS[0] -= 1
            if _GC_USERS[0] == 0:
                gc.set_threshold(*_GC_USERS[1])


def execute(engine: Engine, judge_run_id: int, *, progress: Callable[[Progress], None] | None = None,
            cancel: threading.Event | None = None, processes: int | None = None) -> Progress:
    """Judge every queued run of the judge run (blocking; see the module docstring); `processes`:
    see `processes_for`."""
    with _fewer_collections():
        return asyncio.run(_run(engine, judge_run_id, progress, cancel, processes))


# --------------------------------------------------------------------------- several processes

#: a selection this large is judged by min(2, CPU count) processes unless told otherwise: a
#: further process costs about 2 s of CPU to start (imports), worth it only for long runs
PARALLEL_MIN_RUNS = 2000
#: the runs a process takes from the shared queue at a time
CHUNK = 16
#: how a helper process starts (`multiprocessing` start method): "forkserver" (the default where
#: there is one: a single-threaded server process imports `PRELOAD` once, started early by
#: `warm_up`, and forks each helper from it in milliseconds), "spawn" (a fresh interpreter, about
#: 2 s of CPU importing the runner before it judges) or "fork" (copies the lead, whose other
#: threads may hold locks). ``A2ANNOTATE_JUDGE_START_METHOD`` sets it.
START_METHOD = os.environ.get("A2ANNOTATE_JUDGE_START_METHOD", "forkserver")
#: what the fork server imports once, before it forks any helper
PRELOAD = ["app.judges.service", "app.judges.runner", "app.judges.prep", "app.core.db", "openai", "aiohttp", "aiolimiter", "tenacity"]


def _context():
    import multiprocessing

    method = START_METHOD if START_METHOD in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)
    return ctx


def warm_up() -> None:
    """Start the fork server now (it imports `PRELOAD` in its own process, meanwhile this one goes
    on), so that a helper asked for later starts in milliseconds, and make this process's TLS
    context (`tls_context`); the CLI calls this before it plans a judge run."""
    tls_context()
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def processes_for(defn: dict[str, Any], n_items: int, requested: int | None = None,
                  engine: Engine | None = None) -> int:
    """How many processes judge `n_items` runs: `requested` (``--processes``), else the judge file's
    ``limits.processes``, else min(2, CPU count) for a selection of `PARALLEL_MIN_RUNS` runs or
    more and 1 below; never more than the concurrency or the runs, and 1 for an in-memory SQLite
    database (which other processes cannot open)."""
    want = requested if requested is not None else defn["limits"].get("processes")
    if want is None:
        want = min(2, os.cpu_count() or 1) if n_items >= PARALLEL_MIN_RUNS else 1
    if engine is not None and not other_processes_can_open(engine):
        return 1
    return max(1, min(int(want), int(defn["limits"]["concurrency"]), n_items))


def share_limits(limits: dict[str, Any], n: int, i: int) -> dict[str, Any]:
    """Process `i` of `n`'s share of a judge's limits: its part of the concurrency and of the
    requests and tokens per minute (split so the parts add up to the whole, each at least 1), and
    of the cost cap: cap / n, which it stops at. So the processes together stop at the cap at the
    latest, like one process (a process whose share is left when another reached its own is not
    given the rest: conservative)."""
    def part(total: int) -> int:
        return max(1, total // n + (1 if i < total % n else 0))

    out: dict[str, Any] = {"concurrency": part(int(limits["concurrency"]))}
    for key in ("requests_per_minute", "tokens_per_minute"):
        if int(limits.get(key) or 0):
            out[key] = part(int(limits[key]))
    if limits.get("cost_cap") is not None:
        out["cost_cap"] = float(limits["cost_cap"]) / n
        out["cost_cap_total"] = limits["cost_cap"]
    return out


class _Team:
    """The lead's further processes (`concurrent.futures.ProcessPoolExecutor`, started by
    `START_METHOD`, the fork server by default): the runs
    go into one queue in chunks of `CHUNK`, which every process (the lead too) takes from, so each
    run is judged by exactly one process and a process that starts late takes less. Each helper
    has its own event loop, database engine and share of the limits (`share_limits`), writes its
    results and its counters (as increments) itself, stops when the judge run is cancelled (its
    ``cancel_requested``, read at every batch, or the team's cancel event, which the lead sets) and
    dies with the lead (`_watch_lead`)."""

    def __init__(self, engine: Engine, judge_run_id: int, n: int, limits: dict[str, Any]):
        from concurrent.futures import ProcessPoolExecutor

        ctx = _context()
        self.n, self.judge_run_id = n, judge_run_id
        self.url = engine.url.render_as_string(hide_password=False)
        self.chunks = ctx.Queue()
        self.cancel = ctx.Event()
        # a helper says it is ready (`ready`) and starts asking once the lead has given up that
        # helper's share of the concurrency (`go`): the processes never have more in flight than
        # the judge's concurrency, and the lead uses all of it while the helpers start
        self.ready, self.go = ctx.Semaphore(0), ctx.Semaphore(0)
        self.shares = [share_limits(limits, n, i) for i in range(n)]
        self.pool = ProcessPoolExecutor(n - 1, mp_context=ctx, initializer=_helper_init,
                                        initargs=(self.chunks, self.cancel, self.ready, self.go, os.getpid()))
        self.futures: list[Any] = []

    def start(self, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), CHUNK):
            self.chunks.put(items[start:start + CHUNK])
        for _ in range(self.n):
            self.chunks.put(None)
        self.futures = [self.pool.submit(_helper_main, self.url, self.judge_run_id, share)
                        for share in self.shares[1:]]

    async def wait(self, loop, store: _Store, cancel: Any, show: Callable[[dict[str, Any]], None]) -> list:
        """Wait for the helpers, showing the judge run's progress from its row meanwhile and passing
        a cancel on; their `Progress` dicts (``reason`` None: all the runs they took were judged)."""
        from app.judges import service

        waits = [asyncio.wrap_future(f) for f in self.futures]
        while not all(w.done() for w in waits):
            while self.ready.acquire(False):  # the lead is done: a helper still starting goes at once
                self.go.release()
            await asyncio.wait(waits, timeout=FLUSH_SECONDS)
            if cancel is not None and cancel.is_set():
                self.cancel.set()
            cancelled, totals = await loop.run_in_executor(store.writer, service.runner_totals, store.wsession,
                                                           self.judge_run_id)
            if cancelled:
                self.cancel.set()
            show(totals)
        out: list[dict[str, Any]] = []
        for w in waits:
            exc = w.exception()
            if exc is not None:
                log.error("judge run %s: a judge process failed: %r", self.judge_run_id, exc)
                out.append({"reason": f"a judge process failed: {type(exc).__name__}: {exc}"})
            else:
                out.append(w.result())
        return out

    def close(self) -> None:
        self.cancel.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.chunks.close()


_HELPER: dict[str, Any] = {}


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the process that started it ends (prctl PDEATHSIG)."""
    import ctypes
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl here
        pass


def _watch_lead(lead: int) -> None:
    """End this helper at once when the lead process ends (a thread waiting on the lead's pidfd,
    Linux; else polling it): a helper's parent may be the fork server, which outlives the lead
    while helpers it forked live, so the parent-death signal alone is not enough."""
    import select
    import time as _time

    def watch() -> None:
        try:
            fd = os.pidfd_open(lead)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])
            os._exit(1)
        while True:
            try:
                os.kill(lead, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass
            _time.sleep(0.2)

    threading.Thread(target=watch, name="judge-lead-watch", daemon=True).start()


def _helper_init(chunks: Any, cancel: Any, ready: Any, go: Any, lead: int) -> None:
    """A helper's start: it ends when the lead does (`_watch_lead`; spawned, also the parent-death
    signal)."""
    _die_with_parent()
    _watch_lead(lead)
    _HELPER.update(chunks=chunks, cancel=cancel, ready=ready, go=go, parent=os.getppid())


def _helper_ready() -> None:
    """A helper: say it is ready and wait until the lead has made room for its requests (or the
    judge run is cancelled)."""
    _HELPER["ready"].release()
    while not _HELPER["go"].acquire(timeout=FLUSH_SECONDS):
        if _HELPER["cancel"].is_set():
            return


def _helper_main(url: str, judge_run_id: int, limits: dict[str, Any]) -> dict[str, Any]:
    """A helper process's unit of work: judge the chunks it takes from the lead's queue."""
    from app.core.db import make_engine

    engine = make_engine(url)
    try:
        with _fewer_collections():
            prog = asyncio.run(_run(engine, judge_run_id, None, _HELPER["cancel"], helper={
                "chunks": _HELPER["chunks"], "limits": limits, "parent": _HELPER["parent"]}))
        return prog.to_dict()
    finally:
        engine.dispose()
