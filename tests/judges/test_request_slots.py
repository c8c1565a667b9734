"""The runner's request slots (`Endpoint`, real HTTP to the stand-in through the real `openai`
client): a request holds a slot from just before it is sent to its answer's headers, every way a
request can end frees it, the server never has more than `limits.concurrency` requests in hand,
and a request whose judge run stopped while it waited for its slot is not sent."""
from __future__ import annotations

import asyncio
import socket

import pytest

from app.judges.runner import CallFailed, Endpoint, Stopped
from app.judges.schema import parse_judge_text
from tests.judges.standin import Reply, StandIn

from .helpers import judge_file

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "# Run r-1: x\n#0 hi"}]
OK = '{"verdict": "no_failure", "labels": []}'


def _endpoint(base_url, limits, stopped=lambda: False, sent=None):
    defn = parse_judge_text(judge_file(base_url, extra=f"limits: {limits}\n")).definition

    async def no_hit(_key):
        return None

    return Endpoint(defn, no_hit, lambda *a: None, lambda *a: None, stopped=stopped,
                    on_send=(lambda: sent.append(1)) if sent is not None else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("cost_cap", [None, 1000.0])
def test_every_ending_frees_the_slot(monkeypatch, cost_cap):
    """A timeout, a 500, a 429 retried and a good answer, one after the other with one slot: each
    next request gets the slot (a slot kept would leave it waiting for ever)."""
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")

    def script(req):
        if req.n in (2, 3):
            return Reply(status=429, headers={"Retry-After": "0"})
        return {0: Reply(text=OK, delay=2.0), 1: Reply(status=500)}.get(req.n, Reply(text=OK))

    with StandIn(script) as srv:
        cap = f", cost_cap: {cost_cap}" if cost_cap else ""

        async def go():
            ep = _endpoint(srv.base_url, f"{{concurrency: 1, retries: 0, timeout_seconds: 0.3{cap}}}")
            outcomes = []
            for i in range(3):
                try:
                    await asyncio.wait_for(ep.send(MESSAGES, "labels", i, 1, 0), 5)
                    outcomes.append("ok")
                except CallFailed as exc:
                    outcomes.append(exc.stat.error.split(":")[0])
            ep.defn["limits"]["retries"] = 1
            text, stat = await asyncio.wait_for(ep.send(MESSAGES, "labels", 9, 1, 0), 5)
            free = ep.semaphore._value
            await ep.close()
            return outcomes, stat.attempts, text, free

        outcomes, attempts, text, free = asyncio.run(go())
    assert outcomes == ["the request timed out", "HTTP 500", "HTTP 429"]
    assert (attempts, text, free) == (2, OK, 1)


def test_a_refused_connection_frees_the_slot(monkeypatch):
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")

    async def go():
        ep = _endpoint(f"http://127.0.0.1:{_free_port()}/v1", "{concurrency: 1, retries: 0}")
        for i in range(2):
            # (the SDK's aiohttp transport reports it as a connect timeout; the error says what it was)
            with pytest.raises(CallFailed, match=r"connection failed: .*Connect call failed"):
                await asyncio.wait_for(ep.send(MESSAGES, "labels", i, 1, 0), 5)
        free = ep.semaphore._value
        await ep.close()
        return free

    assert asyncio.run(go()) == 1


def test_at_most_concurrency_requests_at_the_server(monkeypatch):
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")
    with StandIn(lambda req: Reply(text=OK, delay=0.02)) as srv:
        async def go():
            ep = _endpoint(srv.base_url, "{concurrency: 3, retries: 0}")
            await asyncio.gather(*(ep.send(MESSAGES, "labels", i, 1, 0) for i in range(20)))
            free = ep.semaphore._value
            await ep.close()
            return free

        assert asyncio.run(go()) == 3
    assert srv.peak == 3 and len(srv.log) == 20


def test_stopped_while_waiting_for_a_slot_is_not_sent(monkeypatch):
    """The judge run stops while a request waits for the one slot: it is not sent (`Stopped`), the
    slot is free again, and only the request that held the slot reached the server."""
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")
    stop = [False]
    sent: list[int] = []
    with StandIn(lambda req: Reply(text=OK, delay=0.2)) as srv:
        async def go():
            ep = _endpoint(srv.base_url, "{concurrency: 1, retries: 0}", stopped=lambda: stop[0], sent=sent)
            first = asyncio.ensure_future(ep.send(MESSAGES, "labels", 0, 1, 0))
            await asyncio.sleep(0.05)  # the first request holds the slot
            second = asyncio.ensure_future(ep.send(MESSAGES, "labels", 1, 2, 0))
            await asyncio.sleep(0.05)
            stop[0] = True
            text, _ = await first
            with pytest.raises(Stopped):
                await second
            free = ep.semaphore._value
            await ep.close()
            return text, free

        text, free = asyncio.run(go())
    assert (text, free, len(srv.log), len(sent)) == (OK, 1, 1, 1)
