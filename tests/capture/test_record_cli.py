"""`a2annotate record` as a user runs it: a subprocess proxy in front of a real a2a-sdk agent, with a
sidecar naming the principals; several proxies from one config file."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import httpx
from click.testing import CliRunner
from sqlmodel import Session, select

from app.cli import cli
from app.runs.models import Run
from app.runs.service import get_run, to_canonical

from .a2a_agents import Served, TeeTransport, free_socket, shop_app
from .test_proxy import _talk


def _wait_port(url: str, proc) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode())
        try:
            httpx.get(url + "/.well-known/agent-card.json", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the proxy did not start")


def test_record_command_with_sidecar_and_two_proxies(tmp_path, db_url, engine):
    side = tmp_path / "side.yaml"
    side.write_text("scenario: {id: shop/lamps, family: commerce, alignment: competitive}\n"
                    "agents:\n"
                    "  buyer: {principal: dana, objective: Buy two lamps under $90, constraints: [no card on file],"
                    " model: model-a, private_state: {budget_usd: 90}}\n"
                    "  shop-agent: {principal: lampco, objective: Sell at list price, harness: sdk-demo}\n"
                    "principals:\n  dana: {name: Dana, kind: person}\n")
    s1, s2 = free_socket(), free_socket()
    p1, p2 = s1.getsockname()[1], s2.getsockname()[1]
    s1.close(), s2.close()
    conf = tmp_path / "record.yaml"
    with Served(lambda url: shop_app(url)) as upstream:
        conf.write_text(f"sidecar: {side}\nspool: {tmp_path / 'spool'}\nlog: {tmp_path / 'log.jsonl'}\nproxies:\n"
                        f"  - {{listen: '127.0.0.1:{p1}', upstream: '{upstream}', name: shop-agent}}\n"
                        f"  - {{listen: '127.0.0.1:{p2}', upstream: '{upstream}', name: shop-agent}}\n")
        env = {**os.environ, "DATABASE_URL": db_url}
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "record", "--config", str(conf)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_port(f"http://127.0.0.1:{p1}", proc)
            _wait_port(f"http://127.0.0.1:{p2}", proc)
            kinds, _ = asyncio.run(_talk(f"http://127.0.0.1:{p2}", True, "JSONRPC", TeeTransport()))
            assert "status_update" in kinds
            deadline, run = time.monotonic() + 60, None
            while time.monotonic() < deadline:
                with Session(engine) as s:
                    rows = s.exec(select(Run)).all()
                    if rows and rows[0].n_events >= 4:
                        run = to_canonical(s, get_run(s, rows[0].run_id))
                        break
                time.sleep(0.1)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    log = tmp_path / "log.jsonl"
    with Session(engine) as s:
        from app.capture.models import CaptureError, CaptureRecord, LiveRun

        diag = ([(r.run_id, r.n_events) for r in s.exec(select(Run)).all()],
                [e.message for e in s.exec(select(CaptureError)).all()],
                len(s.exec(select(CaptureRecord)).all()), [(x.run_id, x.state) for x in s.exec(select(LiveRun)).all()])
    assert run is not None, (diag, proc.stdout.read().decode()[-2000:], log.read_text()[-3000:] if log.exists() else "no log",
                             list((tmp_path / "spool").glob("*")) if (tmp_path / "spool").exists() else "no spool")
    assert run["scenario"]["id"] == "shop/lamps"
    agents = {a["id"]: a for a in run["agents"]}
    assert agents["buyer"]["principal"] == "dana" and agents["buyer"]["private_state"] == {"budget_usd": 90}
    assert agents["shop-agent"]["harness"] == "sdk-demo"
    principals = {p["id"]: p for p in run["principals"]}
    assert principals["dana"]["name"] == "Dana" and principals["dana"]["constraints"] == ["no card on file"]
    assert principals["lampco"]["objective"] == "Sell at list price"


def test_record_config_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("proxies:\n  - {listen: '127.0.0.1:1', upstream: 'http://x', colour: red}\n")
    res = CliRunner().invoke(cli, ["record", "--config", str(bad)])
    assert res.exit_code == 1 and "proxies[0].colour: unknown key" in res.output
    res = CliRunner().invoke(cli, ["record", "--listen", "nohost", "--upstream", "http://x"])
    assert res.exit_code == 1 and "expected HOST:PORT" in res.output
