"""A stand-in Chat Completions server for the judge tests: real HTTP/1.1 on 127.0.0.1 (port 0), the
real `openai` client talks to it, and a script chooses the answer per request.

The script is a function ``(request: Req) -> Reply``; `Req` carries the parsed body, the run id
and task found in the prompt, and how many times that same prompt was seen. Every request is
logged in ``server.log``.

The server is a lean asyncio one (its own event loop in a thread, keep-alive connections,
``Content-Length`` or chunked request bodies): it answers in a fraction of the CPU a framework
would take, so that the runner's benchmark (`bench/bench_judges.py`, which runs it in its own
process) measures the runner, not the stand-in.
"""
from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson

RUN_RE = re.compile(r"^# Run (\S+):", re.M)
PATH = "/v1/chat/completions"


@dataclass
class Req:
    body: dict[str, Any]
    run_id: str | None
    user: str
    seen: int
    n: int
    #: the client's TCP port (which connection, so which process, asked)
    peer: int = 0

    @property
    def is_retry_for_parse(self) -> bool:
        return any(m["role"] == "assistant" for m in self.body["messages"])


@dataclass
class Reply:
    text: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    finish_reason: str = "stop"
    raw_body: str | None = None
    tokens: tuple[int, int] = (100, 20)


def answer(obj: Any) -> Reply:
    return Reply(text=json.dumps(obj))


def _response(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Status"
    lines = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    n = int(headers.get("content-length") or 0)
    return await reader.readexactly(n) if n else b""


class StandIn:
    def __init__(self, script: Callable[[Req], Reply]):
        self.script = script
        self.log: list[Req] = []
        self.seen: dict[bytes, int] = {}
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._conns: set[asyncio.Task] = set()
        #: requests being answered now, and the most at once (the client's concurrency, seen here)
        self.in_flight = 0
        self.peak = 0

    def _reply(self, body: dict[str, Any], peer: int = 0) -> tuple[Req, Reply]:
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        m = RUN_RE.search(user)
        key = orjson.dumps(body["messages"], option=orjson.OPT_SORT_KEYS)
        with self.lock:
            self.seen[key] = self.seen.get(key, 0) + 1
            req = Req(body=body, run_id=m.group(1) if m else None, user=user, seen=self.seen[key], n=len(self.log),
                      peer=peer)
            self.log.append(req)
        return req, self.script(req)

    async def _answer(self, method: str, path: str, raw: bytes, peer: int = 0) -> bytes:
        if method != "POST" or path.split("?")[0] != PATH:
            return _response(404, b'{"error": {"message": "not found", "type": "not_found"}}')
        body = orjson.loads(raw)
        req, reply = self._reply(body, peer)
        self.in_flight += 1  # (the server's own loop: no lock needed)
        self.peak = max(self.peak, self.in_flight)
        try:
            if reply.delay:
                await asyncio.sleep(reply.delay)
        finally:
            self.in_flight -= 1
        if reply.status != 200:
            return _response(reply.status, orjson.dumps({"error": {"message": f"scripted {reply.status}",
                                                                    "type": "scripted"}}), reply.headers)
        if reply.raw_body is not None:
            return _response(200, reply.raw_body.encode())
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if body.get("tools"):
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "answer", "arguments": reply.text}}]}
        return _response(200, orjson.dumps({
            "id": f"cmpl-{req.n}", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {"prompt_tokens": reply.tokens[0], "completion_tokens": reply.tokens[1],
                      "total_tokens": sum(reply.tokens)}}))

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._conns.add(task)
        peer = (writer.get_extra_info("peername") or ("", 0))[1]
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, path, _ = head[0].split(" ", 2)
                headers = {}
                for line in head[1:]:
                    if ":" in line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                raw = await _read_body(reader, headers)
                try:
                    out = await self._answer(method, path, raw, peer)
                except Exception as exc:  # noqa: BLE001 - a failing script is a 500, as a framework's would be
                    out = _response(500, orjson.dumps({"error": {"message": f"stand-in: {exc!r}", "type": "bug"}}))
                writer.write(out)
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()

    async def _main(self, sock: socket.socket) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=sock, limit=2 ** 24)
        self._ready.set()
        async with server:
            await self._stop.wait()
            for t in list(self._conns):
                t.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)

    def __enter__(self) -> StandIn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self._main(sock),), daemon=True)
        self.thread.start()
        assert self._ready.wait(10), "stand-in server did not start"
        return self

    def __exit__(self, *exc) -> None:
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self.thread is not None:
            self.thread.join(10)
        if self.loop is not None and not self.loop.is_running():
            self.loop.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def runs_requested(self) -> list[str]:
        return [r.run_id for r in self.log if r.run_id]
