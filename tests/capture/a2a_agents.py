"""Real A2A agents made with the a2a-sdk package, and a uvicorn thread to serve any ASGI app."""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role
from starlette.applications import Starlette

STEP = 0.25  # seconds between the streamed events (the test checks they are not buffered)


class ShopExecutor(AgentExecutor):
    """Answers with a task: working, an artifact in two chunks, then completed with a message."""

    async def execute(self, context: RequestContext, event_queue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        await asyncio.sleep(STEP)
        await up.add_artifact([new_text_part("Quote: 2 lamps ")], artifact_id="quote", name="quote")
        await asyncio.sleep(STEP)
        await up.add_artifact([new_text_part("for $80")], artifact_id="quote", append=True, last_chunk=True)
        await up.complete(new_text_message(f"Done: {context.get_user_input()}", context_id=task.context_id,
                                           task_id=task.id, role=Role.ROLE_AGENT))

    async def cancel(self, context, event_queue) -> None:  # pragma: no cover - not exercised
        raise NotImplementedError


class Recording:
    """ASGI middleware keeping the exact bytes (and times) of every response body the app sends."""

    def __init__(self, app):
        self.app = app
        self.log: list[dict] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rec = {"path": scope["path"], "chunks": [], "times": [],
               "headers": {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}}
        self.log.append(rec)

        async def tee(message):
            if message["type"] == "http.response.body" and message.get("body"):
                rec["chunks"].append(message["body"])
                rec["times"].append(time.monotonic())
            await send(message)

        return await self.app(scope, receive, tee)


def shop_app(base_url: str, protocol: str = "1.0") -> Recording:
    card = AgentCard(
        name="shop-agent", description="Sells lamps", version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=f"{base_url}/a2a", protocol_version=protocol),
                              AgentInterface(protocol_binding="HTTP+JSON", url=base_url, protocol_version=protocol)],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="quote", name="Quote", description="Quotes prices", tags=["shop"])])
    handler = DefaultRequestHandler(ShopExecutor(), InMemoryTaskStore(), card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True),
              *create_rest_routes(handler, enable_v0_3_compat=protocol == "0.3")]
    return Recording(Starlette(routes=routes))


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class Served:
    """`with Served(app_factory) as url:` serves the app made by `app_factory(url)` on a free port."""

    def __init__(self, app_factory, sock: socket.socket | None = None):
        self.sock = sock or free_socket()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.app = app_factory(self.url)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class TeeTransport(httpx.AsyncBaseTransport):
    """The client's transport: keeps the raw bytes (and arrival times) of every response."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.log: list[dict] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        resp = await self.inner.handle_async_request(request)
        rec = {"path": request.url.path, "chunks": [], "times": []}
        self.log.append(rec)
        inner = resp.stream

        class Stream(httpx.AsyncByteStream):
            async def __aiter__(self):
                async for chunk in inner:
                    rec["chunks"].append(chunk)
                    rec["times"].append(time.monotonic())
                    yield chunk

            async def aclose(self):
                await inner.aclose()

        return httpx.Response(resp.status_code, headers=resp.headers, stream=Stream(), extensions=resp.extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()
