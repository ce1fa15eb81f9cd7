"""A real redis-server (Debian's package) on 127.0.0.1 and a free port, its data in a temporary folder."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """One redis-server process; `url` points at its database 0; `stop()` kills it (a dead cache)."""

    def __init__(self, folder: Path, *, port: int | None = None, persist: bool = False) -> None:
        """`port`: restart on a known port; `persist`: every write fsynced to an append-only file in `folder`,
        so a server killed and started again on the folder holds what it held (a restart, not a new cache)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder.resolve()
        durable = ["--appendonly", "yes", "--appendfsync", "always"] if persist else ["--appendonly", "no"]
        for _ in range(5):  # a port another process took between free_port() and redis' bind: another port
            self.port = port or free_port()
            self.url = f"redis://127.0.0.1:{self.port}/0"
            self.proc = subprocess.Popen(
                [
                    REDIS_SERVER,
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    str(self.folder),
                    "--save",
                    "",
                    *durable,
                    "--protected-mode",
                    "no",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._answers():
                return
            self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _answers(self) -> bool:
        """Our redis-server answers on its port (not another test's: its `dir` is our folder)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"CONFIG GET dir\r\n")
                    reply = b""
                    while reply.count(b"\r\n") < 5 and not reply.startswith(b"-"):  # *2, $3, dir, $n, the dir
                        chunk = sock.recv(4096)
                        if not chunk:
                            break
                        reply += chunk
                    if reply.startswith((b"*", b"-")):  # "-": CONFIG refused; trust our live process
                        ours = reply.startswith(b"-") or str(self.folder).encode() in reply
                        return ours and self.proc.poll() is None
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    """A running redis-server, or the test skipped (one line) where the Debian package is not installed."""
    if not Path(REDIS_SERVER).exists():
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
    server = RedisServer(folder)
    try:
        yield server
    finally:
        server.stop()
