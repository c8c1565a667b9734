"""A stand-in Chat Completions server for the judge tests: real HTTP on 127.0.0.1 (port 0), the
real `openai` client talks to it, and a script chooses the answer per request.

The script is a function ``(request: Req) -> Reply``; `Req` carries the parsed body, the run id
and task found in the prompt, and how many times that same prompt was seen. Every request is
logged in ``server.log``.
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
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

RUN_RE = re.compile(r"^# Run (\S+):", re.M)


@dataclass
class Req:
    body: dict[str, Any]
    run_id: str | None
    user: str
    seen: int
    n: int

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


class StandIn:
    def __init__(self, script: Callable[[Req], Reply]):
        self.script = script
        self.log: list[Req] = []
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()
        app = Starlette(routes=[Route("/v1/chat/completions", self._handle, methods=["POST"])])
        self.config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off",
                                     access_log=False)
        self.server = uvicorn.Server(self.config)
        self.thread: threading.Thread | None = None

    async def _handle(self, request: Request) -> Response:
        body = await request.json()
        user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
        m = RUN_RE.search(user)
        key = json.dumps(body["messages"], sort_keys=True)
        with self.lock:
            self.seen[key] = self.seen.get(key, 0) + 1
            req = Req(body=body, run_id=m.group(1) if m else None, user=user, seen=self.seen[key], n=len(self.log))
            self.log.append(req)
        reply = self.script(req)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            return JSONResponse({"error": {"message": f"scripted {reply.status}", "type": "scripted"}},
                                status_code=reply.status, headers=reply.headers)
        if reply.raw_body is not None:
            return Response(reply.raw_body, media_type="application/json")
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if body.get("tools"):
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "answer", "arguments": reply.text}}]}
        return JSONResponse({
            "id": f"cmpl-{req.n}", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {"prompt_tokens": reply.tokens[0], "completion_tokens": reply.tokens[1],
                      "total_tokens": sum(reply.tokens)}})

    def __enter__(self) -> StandIn:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started and time.time() < deadline:
            time.sleep(0.01)
        assert self.server.started, "stand-in server did not start"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def runs_requested(self) -> list[str]:
        return [r.run_id for r in self.log if r.run_id]
