"""The recording proxy between two real a2a-sdk agents (an A2A server and a client agent).

For protocol 1.0 and 0.3, JSON-RPC and HTTP+JSON, streaming and not: the client receives exactly the
bytes the server sent (SSE: event by event, as they are sent), the card names the proxy, and the run
recorded in the database is the run `import` makes of the proxy's wire log. With the database down,
traffic still flows and the spool is replayed later."""
from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_text_message
from a2a.types import Role, SendMessageRequest
from sqlmodel import Session, select

from app.capture.models import LiveRun
from app.capture.proxy import Recorder, SSEParser, create_proxy_app, rewrite_card
from app.ingest import iter_path
from app.runs.service import get_run, to_canonical

from .a2a_agents import Served, TeeTransport, shop_app

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere?connect_timeout=2"


async def _talk(base_url: str, streaming: bool, binding: str, transport: TeeTransport, between=None) -> list:
    """Send one message (and, when `between` is given, call it and send a second one in the same
    context). Returns the kinds of the events received and the context id."""
    http = httpx.AsyncClient(transport=transport, timeout=30,
                             headers={"x-a2annotate-from": "buyer", "Authorization": "Bearer client-secret"})
    cfg = ClientConfig(streaming=streaming, supported_protocol_bindings=[binding], httpx_client=http)
    client = await create_client(base_url, cfg)
    msg = new_text_message("Two lamps please", role=Role.ROLE_USER)
    events = [ev async for ev in client.send_message(SendMessageRequest(message=msg))]
    first = events[0]
    ctx = first.task.context_id if first.HasField("task") else first.message.context_id
    if between is not None:
        between()
        msg2 = new_text_message("And a shade", role=Role.ROLE_USER, context_id=ctx)
        events += [ev async for ev in client.send_message(SendMessageRequest(message=msg2))]
    await http.aclose()
    return [ev.WhichOneof("payload") for ev in events], ctx


def _sse_events(chunks: list[bytes]) -> list[bytes]:
    p = SSEParser()
    out = []
    for c in chunks:
        out.extend(p.feed(c))
    return out + p.close()


_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_STAMP = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def _masked(chunks: list[bytes]) -> bytes:
    """A response body with the ids and timestamps a second, identical conversation changes."""
    return _STAMP.sub(b"TS", _UUID.sub(b"ID", b"".join(chunks)))


def _strip(run):
    return [{k: e[k] for k in ("seq", "kind", "actor", "recipients", "content", "data")} for e in run["events"]]


@pytest.mark.parametrize("protocol,binding,streaming", [
    ("1.0", "JSONRPC", False), ("1.0", "JSONRPC", True), ("1.0", "HTTP+JSON", True),
    ("1.0", "HTTP+JSON", False), ("0.3", "JSONRPC", False), ("0.3", "JSONRPC", True), ("0.3", "HTTP+JSON", True),
])
def test_proxy_is_transparent_and_records_the_run(tmp_path, db_url, engine, protocol, binding, streaming):
    log = tmp_path / "wire.jsonl"
    rec = Recorder(db_url, stream=f"test-{protocol}-{binding}-{streaming}", spool_dir=tmp_path / "spool",
                   log_path=log, batch_seconds=0.05)
    tee = TeeTransport()
    served = Served(lambda url: shop_app(url, protocol))
    with served as upstream_url:
        with Served(lambda url: create_proxy_app(upstream_url, rec, name="shop-agent")) as proxy_url:
            kinds, _ = asyncio.run(_talk(proxy_url, streaming, binding, tee))
            card = httpx.get(f"{proxy_url}/.well-known/agent-card.json").json()
            direct = TeeTransport()  # the same conversation without the proxy
            direct_kinds, _ = asyncio.run(_talk(upstream_url, streaming, binding, direct))
            deadline = time.monotonic() + 20
            while (rec.queue is None or rec.queue._unfinished_tasks) and time.monotonic() < deadline:
                time.sleep(0.05)
        upstream_log = served.app.log
    # the card names the proxy (1.0 supportedInterfaces and the 0.3 url)
    assert all(i["url"].startswith(proxy_url) for i in card["supportedInterfaces"])
    if "url" in card:
        assert card["url"].startswith(proxy_url)
    # the client gets what it gets without the proxy (up to the ids and times of a new conversation)
    assert kinds == direct_kinds
    plain = [r for r in direct.log if "well-known" not in r["path"]]
    # byte for byte: every non-card response the client got is what the server sent
    sent = [r for r in upstream_log if "well-known" not in r["path"]][:len(plain)]
    got = [r for r in tee.log if "well-known" not in r["path"]]
    assert [_masked(r["chunks"]) for r in got] == [_masked(r["chunks"]) for r in plain]
    assert [r["path"] for r in got] == [r["path"] for r in sent] and got
    for g, s in zip(got, sent):
        assert b"".join(g["chunks"]) == b"".join(s["chunks"])
        # headers are forwarded (auth, A2A-Version), the proxy's own naming header is not
        assert s["headers"]["authorization"] == "Bearer client-secret" and "x-a2annotate-from" not in s["headers"]
        if protocol == "1.0":
            assert s["headers"]["a2a-version"] == "1.0"
    if streaming:
        events = _sse_events(got[-1]["chunks"])
        assert events == _sse_events(sent[-1]["chunks"]) and len(events) >= 4
        assert kinds[-1] == "status_update" or "status_update" in kinds
        # not buffered: the client had the first bytes before the server sent its last ones (the
        # server spreads them over 2 x STEP; a buffering proxy would deliver the first only after
        # the last was sent). Not "> STEP": on a loaded machine the first delivery can take that long.
        assert got[-1]["times"][0] < sent[-1]["times"][-1]
    else:
        assert kinds == ["task"]
    # the run in the database is the run the wire log imports to
    (item,) = [i for i in iter_path(log) if i.run]
    file_run = item.run
    assert [a["id"] for a in file_run["agents"]] == ["buyer", "shop-agent"]
    assert file_run["metadata"]["a2a_protocol_version"] == protocol
    with Session(engine) as s:
        db_run = to_canonical(s, get_run(s, file_run["run_id"]))
        live = s.exec(select(LiveRun).where(LiveRun.run_id == file_run["run_id"])).one()
    assert _strip(db_run) == _strip(file_run) and db_run["agents"] == file_run["agents"]
    texts = [e["content"] for e in db_run["events"]]
    assert "Two lamps please" in texts and "Done: Two lamps please" in texts
    # streamed chunks are joined; a final Task lists the SDK's two artifact parts
    assert any(t and t.replace("\n", "") == "Quote: 2 lamps for $80" for t in texts)
    assert live.state == "final" and live.final_reason == "task completed"


def test_database_down_mid_run_loses_nothing(tmp_path, db_url, engine):
    """The first exchange of a conversation is written; then the database goes away (an
    unreachable URL) for the second one: traffic still flows, the capture is spooled, and once the
    database is back the spool is replayed into the same run, equal to the wire log's import."""
    log = tmp_path / "wire.jsonl"
    rec = Recorder(db_url, stream="down", spool_dir=tmp_path / "spool", log_path=log, batch_seconds=0.05)
    tee = TeeTransport()

    def wait_written():
        deadline = time.monotonic() + 30
        while (rec.queue is None or rec.queue._unfinished_tasks) and time.monotonic() < deadline:
            time.sleep(0.05)

    def database_goes_down():
        wait_written()
        with Session(engine) as s:
            assert s.exec(select(LiveRun)).one().n_records >= 3  # the first exchange is in
        rec.database_url = UNREACHABLE

    with Served(lambda url: shop_app(url)) as upstream_url:
        with Served(lambda url: create_proxy_app(upstream_url, rec, name="shop-agent")) as proxy_url:
            kinds, ctx = asyncio.run(_talk(proxy_url, True, "JSONRPC", tee, between=database_goes_down))
            wait_written()
    assert kinds.count("task") == 2 and kinds[-1] == "status_update"  # both exchanges went through
    spooled = [json.loads(x) for x in rec.spool_path.read_text().splitlines()]
    assert len(spooled) == rec.spooled >= 6
    with Session(engine) as s:
        partial = to_canonical(s, get_run(s, ctx))
    assert "And a shade" not in [e["content"] for e in partial["events"]]
    rec.database_url = db_url  # the database is back
    assert rec.replay() is True and not rec.spool_path.exists()
    assert rec.replay() is True  # nothing left; replaying again changes nothing
    (item,) = [i for i in iter_path(log) if i.run]
    with Session(engine) as s:
        db_run = to_canonical(s, get_run(s, ctx))
    assert _strip(db_run) == _strip(item.run)
    assert [e["content"] for e in db_run["events"]].count("And a shade") == 1


def test_rewrite_card_both_forms():
    card = {"name": "a", "url": "http://10.0.0.5:9000/a2a",
            "supportedInterfaces": [{"url": "http://10.0.0.5:9000/a2a", "protocolBinding": "JSONRPC"},
                                    {"url": "grpc://10.0.0.5:9001", "protocolBinding": "GRPC"}],
            "additionalInterfaces": [{"url": "http://10.0.0.5:9000/rest", "transport": "HTTP+JSON"}]}
    out = rewrite_card(card, "http://127.0.0.1:7000")
    assert out["url"] == "http://127.0.0.1:7000/a2a"
    assert [i["url"] for i in out["supportedInterfaces"]] == ["http://127.0.0.1:7000/a2a", "grpc://10.0.0.5:9001"]
    assert out["additionalInterfaces"][0]["url"] == "http://127.0.0.1:7000/rest"
    assert card["url"] == "http://10.0.0.5:9000/a2a"  # not changed in place
