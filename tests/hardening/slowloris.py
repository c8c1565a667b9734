"""A slowloris attacker for the live-server tests and bench/bench_attacks.py: `n` connections
from another loopback address that send a request line, then a header line now and then, never
the blank line ending the headers; each one the server closes is reopened. It runs in a spawned
process of its own (the probes' timings are then the server's, not this process's GIL); this
module imports nothing heavy, so that process starts at once."""
from __future__ import annotations

import multiprocessing
import socket
import time

ATTACKER = "127.0.0.2"  # another loopback address: the attack's, while the probes come from 127.0.0.1


class Slowloris:
    """`n` connections from `source` that send a request line and then a header line now and
    then, never the blank line ending the headers; each one closed by the server is reopened.
    Runs in a process of its own (the probes' timings are the server's, not this one's GIL)."""

    def __init__(self, port: int, n: int, source: str = ATTACKER):
        self.port, self.n, self.source = port, n, source
        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        self.counts = ctx.Array("i", 3)  # opened, refused (503), closed by the server
        self.proc = ctx.Process(target=_slowloris, args=(port, n, source, self.stop, self.counts), daemon=True)

    @property
    def opened(self) -> int:
        return self.counts[0]

    @property
    def refused(self) -> int:
        return self.counts[1]

    @property
    def closed_by_server(self) -> int:
        return self.counts[2]

    def __enter__(self):
        self.proc.start()
        return self

    def wait_started(self, timeout: float = 60) -> None:
        """Wait until the attack has opened its first `n` connections."""
        end = time.monotonic() + timeout
        while self.opened < self.n:
            if time.monotonic() > end or not self.proc.is_alive():
                raise AssertionError(f"the attack opened {self.opened} connections")
            time.sleep(0.1)

    def __exit__(self, *exc):
        self.stop.set()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _slowloris(port, n, source, stop, counts) -> None:
    _SlowlorisLoop(port, n, source, stop, counts)._run()


class _SlowlorisLoop:
    def __init__(self, port, n, source, stop, counts):
        self.port, self.n, self.source, self.stop, self.counts = port, n, source, stop, counts

    def _connect(self) -> socket.socket | None:
        s = socket.socket()
        s.bind((self.source, 0))
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", self.port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            s.close()
            return None
        self.counts[0] += 1
        return s

    def _run(self) -> None:
        socks = [self._connect() for _ in range(self.n)]
        while not self.stop.wait(0.3):
            for i, s in enumerate(socks):
                if s is None:
                    socks[i] = self._connect()
                    continue
                try:
                    s.sendall(b"X-a: b\r\n")
                    s.setblocking(False)
                    try:
                        data = s.recv(4096)
                    except BlockingIOError:
                        data = None
                    s.setblocking(True)
                    if data is not None:  # answered (503: too many from this address; 408) or closed
                        self.counts[1] += data.startswith(b"HTTP/1.1 503")
                        self.counts[2] += 1
                        s.close()
                        socks[i] = self._connect()
                except OSError:
                    self.counts[2] += 1
                    s.close()
                    socks[i] = self._connect()
        for s in socks:
            if s is not None:
                s.close()
