"""The data fetch against hostile mirrors (issue 34 break 9 and 17, issue 37's fetch frictions), each through
`python -m experiments.data fetch` in a subprocess against a server on 127.0.0.1 started here: a body that
breaks off, one byte at a time, 300 MB for a file under 1 MB, a redirect loop, URLs that do not parse, a
token in the URL, a full disk (the file size limit), a wrong copy already there, every dataset reported."""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from experiments.datasets.fetch import DATASETS
from tests.support.cli import run as run_cli
from tests.support.studies import ROOT, cli_env, public_data

HUMAN = DATASETS["novbench_human"][0]  # 420,608 bytes


class Hostile(BaseHTTPRequestHandler):
    """A mirror misbehaving as `self.server.mode` says; `self.server.sent` counts the body bytes it wrote."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        mode, server = self.server.mode, self.server  # type: ignore[attr-defined]
        if mode == "loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.end_headers()
            return
        self.send_response(200)
        if mode == "announce_huge":
            self.send_header("Content-Length", str(300 * 2**20))
        elif mode in ("truncated", "drip"):
            self.send_header("Content-Length", str(HUMAN.size))
        self.end_headers()
        try:
            if mode == "truncated":
                self.wfile.write(b"{" * (HUMAN.size // 2))
            elif mode == "drip":
                for _ in range(120):  # one byte every half second, until the client gives up
                    self.wfile.write(b"{")
                    self.wfile.flush()
                    time.sleep(0.5)
            elif mode in ("huge", "announce_huge"):
                chunk = b"0" * 2**16
                while server.sent < 300 * 2**20:
                    self.wfile.write(chunk)
                    server.sent += len(chunk)
        except OSError:  # the client hung up: what it was meant to do
            pass
        self.close_connection = True


@contextmanager
def hostile(mode: str) -> Iterator[tuple[str, Any]]:
    """A misbehaving mirror on 127.0.0.1: (base URL, server)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.mode, httpd.sent = mode, 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def fetch_cli(tmp: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m experiments.data fetch ARGS` (a file size limit of `limit` bytes: a disk that fills)."""

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "-m", "experiments.data", "fetch", *args]
    if limit is None:  # forked from the test server (tests/support/cli.py)
        return run_cli(cmd, cwd=ROOT, env=cli_env(tmp), capture_output=True, text=True, timeout=120)
    return subprocess.run(  # a fresh interpreter: the limit is set before it starts, and it writes no .pyc
        cmd,
        cwd=ROOT,
        env=cli_env(tmp, {"PYTHONDONTWRITEBYTECODE": "1"}),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_disk,  # noqa: PLW1509 (no threads in the child yet)
    )


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, run
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
    assert "Traceback" not in run.stderr
    return run.stderr


def nothing_stored(store: Path) -> bool:
    """No file at all in the data folder, hidden partial ones included."""
    return not store.exists() or not any(store.iterdir())


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("truncated", f"broke off after {HUMAN.size // 2:,} of {HUMAN.size:,} bytes"),
        ("loop", "the server redirects in a loop (HTTP 302)"),
        ("announce_huge", f"announces {300 * 2**20:,} bytes"),
        ("huge", f"the body passes {2 * HUMAN.size:,} bytes"),
    ],
)
def test_a_hostile_mirror_gets_one_line_and_nothing_is_stored(tmp_path: Path, mode: str, said: str) -> None:
    store = tmp_path / "store"
    with hostile(mode) as (url, server):
        err = one_line(fetch_cli(tmp_path, "novbench_human", "--dir", str(store), "--url", url))
    assert said in err and "nothing" in err, err
    assert nothing_stored(store)
    # the 300 MB body is not read whole: the client hangs up at the cap (what the server got out before
    # noticing is the cap plus the sockets' buffers)
    assert server.sent < 64 * 2**20


def test_a_dripping_mirror_meets_the_deadline(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with hostile("drip") as (url, _):
        args = ("novbench_human", "--dir", str(store), "--url", url, "--deadline", "1.5")
        err = one_line(fetch_cli(tmp_path, *args))
    assert "no complete answer within 1.5 s" in err and "--deadline" in err, err
    assert nothing_stored(store)


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections (bound, never listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("notaurl", "error: --url notaurl: not a URL (give https://"),
        ("http://[::1/", "error: --url http://[::1/: not a URL (Invalid IPv6 URL)"),
        ("http://user:TOKEN@[::1/", "error: --url http://***@[::1/: not a URL"),
        ("ftp://example.org/", "error: --url ftp://example.org/: not a URL"),
        ("http://127.0.0.1:x/", "error: --url http://127.0.0.1:x/: not a URL"),
    ],
)
def test_a_url_that_is_not_one_is_named_in_one_line(tmp_path: Path, url: str, said: str) -> None:
    err = one_line(fetch_cli(tmp_path, "novbench", "--dir", str(tmp_path / "store"), "--url", url))
    assert err.startswith(said), err
    assert "TOKEN" not in err


def test_the_token_in_a_mirror_url_is_never_printed(tmp_path: Path) -> None:
    with refusing_port() as port:
        url = f"http://user:TOKEN@127.0.0.1:{port}/rebuttal_result/"
        run = fetch_cli(tmp_path, "novbench", "--dir", str(tmp_path / "store"), "--url", url)
    err = one_line(run)
    assert f"cannot reach 127.0.0.1:{port}" in err, err
    assert "TOKEN" not in run.stdout + run.stderr


def test_a_full_disk_is_said_and_leaves_no_partial_file(tmp_path: Path) -> None:
    source = public_data(HUMAN.name)
    store = tmp_path / "store"
    mirror = source.parent.as_uri() + "/"
    err = one_line(fetch_cli(tmp_path, "novbench_human", "--dir", str(store), "--url", mirror, limit=100_000))
    assert f"{store}: no room to store {HUMAN.name} (File too large after" in err, err
    assert "not writable" not in err
    assert nothing_stored(store)


def test_a_wrong_copy_already_there_is_named_and_every_dataset_is_reported(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / HUMAN.name).write_text("not the file\n")
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}/"
        run = fetch_cli(tmp_path, "coling2020", "novbench_human", "--dir", str(store), "--url", url)
    lines = run.stderr.splitlines()
    assert run.returncode == 2 and len(lines) == 3, run.stderr
    assert "copy coling2020_reviews.jsonl" in lines[0] and "already there" not in lines[0]
    assert f"copy {HUMAN.name}" in lines[1], lines[1]
    assert f"the {HUMAN.name} already there is the wrong file (13 bytes, SHA-256" in lines[1], lines[1]
    assert f"the pinned one has {HUMAN.size:,} bytes" in lines[1]
    assert lines[2] == "error: 2 of 2 datasets not fetched"
