"""`run`: `subprocess.run` for the tests' command lines (`popen`: `subprocess.Popen`, for a command a test runs
alongside others or signals), with `python -m <module>` commands forked from a process that has already imported
the project (tests.support.forkserver) instead of a fresh interpreter.

Why: the suite runs a few hundred CLI commands, and a fresh interpreter spends 3-8 s of CPU importing litellm,
pandas and Hydra before each one does anything (issue 36, item 6). A forked command is still its own process
with its own argv, environment, working folder, output, exit status and signals; what it shares is the imports.

What cannot be shared runs in a fresh interpreter, as before: any command that is not `[sys.executable, "-m",
module, ...]`, one given stdin data, a preexec_fn or any other option beyond captured (text or bytes) or
redirected outputs (DEVNULL, a descriptor such as a pseudo-terminal's), a command whose environment differs from the server's in a variable a library reads at import
time (only the variables in RUNTIME_VARIABLES, and secrets, may differ), one that chooses litellm's price map
(`prices=`: chosen before litellm is imported), and every command when JUDGESCOPE_TEST_FRESH=1 (the whole suite
as fresh interpreters: `JUDGESCOPE_TEST_FRESH=1 python -m pytest ...`). Tests of start-up itself (what an
entry point imports, how fast `--help` is) call `subprocess` directly.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.studies import ROOT

# read by the project when a command runs, never at import (judge/, experiments/, analysis/, core/)
RUNTIME_VARIABLES = frozenset(
    {
        "JUDGESCOPE_CACHE_DIR",
        "JUDGESCOPE_JOURNAL_DIR",
        "JUDGESCOPE_DATA_DIR",
        "JUDGESCOPE_DATA_URL",
        "JUDGESCOPE_MODEL_DIR",
        "JUDGESCOPE_MODEL_CACHE",
        "JUDGESCOPE_PPL_CACHE",
        "XDG_CACHE_HOME",
        "PYTHONPATH",
        "PWD",
        "JUDGESCOPE_FORK_DEBUG",
        "PYTEST_CURRENT_TEST",  # pytest sets it per test phase
        "JUDGESCOPE_TEST_FORK_LOG",
        # set by the libraries themselves in a process that used them, to what a command's would set
        "TIKTOKEN_CACHE_DIR",  # litellm: its bundled encodings, when it first counts tokens
        "TORCHINDUCTOR_CACHE_DIR",  # torch
        "KMP_DUPLICATE_LIB_OK",  # set by a library loading Intel's OpenMP (before it loads)
        "KMP_INIT_AT_FORK",
        "JUDGESCOPE_TEST_CPU_LOG",
        "OLDPWD",
    }
)
# a provider key is read when a call is made; judge.secrets learns secrets from the environment at run time
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_IMPORT_TIME_ARGS = re.compile(r"^\+*prices=")


def _server_env() -> dict[str, str]:
    """The environment the server imports under: this worker's, as tests.support.studies.cli_env gives it."""
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


class _Server:
    """This pytest process's fork server, started on first use and stopped at exit."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[str] | None = None
        self.path = ""
        self.env: dict[str, str] = {}
        self.failed = ""

    def address(self) -> str:
        with self.lock:
            if self.failed:  # tried once in this process: every command runs fresh, no second wait
                raise RuntimeError(self.failed)
            if self.proc is None or self.proc.poll() is not None:
                folder = tempfile.mkdtemp(prefix="judgescope-forkserver-")
                self.path = os.path.join(folder, "socket")
                self.env = _server_env()
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.support.forkserver", self.path],
                    cwd=ROOT,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                assert self.proc.stdout is not None
                if self.proc.stdout.readline().strip() != "ready":
                    self.failed = "tests.support.forkserver did not start (its error is on stderr above)"
                    raise RuntimeError(self.failed)
            return self.path

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        if self.path:  # the socket's folder
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


SERVER = _Server()
atexit.register(SERVER.stop)
FORKED_CPU = [0.0]  # the CPU seconds of every command forked for this process so far (tests/conftest.py)


def fresh_reason(cmd: Sequence[str], env: Mapping[str, str] | None) -> str | None:
    """Why `cmd` needs a fresh interpreter, or None when it may run forked from the server (the module doc)."""
    if os.environ.get("JUDGESCOPE_TEST_FRESH") == "1" or sys.platform != "linux":
        return "JUDGESCOPE_TEST_FRESH=1" if sys.platform == "linux" else sys.platform
    if len(cmd) < 3 or cmd[0] != sys.executable or cmd[1] != "-m" or cmd[2].startswith("-"):
        return "not python -m"
    if any(_IMPORT_TIME_ARGS.match(arg) for arg in cmd[3:]):
        return "prices="
    if env is None:
        return None
    base = SERVER.env or _server_env()
    differing = {k for k in set(env) | set(base) if env.get(k) != base.get(k)}
    read_at_import = sorted(k for k in differing if k not in RUNTIME_VARIABLES and not _SECRET.search(k))
    return f"environment: {', '.join(read_at_import)}" if read_at_import else None


def forkable(cmd: Sequence[str], env: Mapping[str, str] | None) -> bool:
    """Whether `cmd` may run forked from the server."""
    return fresh_reason(cmd, env) is None


def _log(cmd: Sequence[str], how: str) -> None:
    """One line per command in JUDGESCOPE_TEST_FORK_LOG, when set: which commands ran fresh, and why."""
    path = os.environ.get("JUDGESCOPE_TEST_FORK_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{how}\t{' '.join(cmd[1:4])}\n")


class Forked:
    """A forked command, like `subprocess.Popen` for what the tests use: pid, poll, wait, send_signal, kill."""

    def __init__(
        self,
        cmd: Sequence[str],
        cwd: str | Path | None,
        env: Mapping[str, str] | None,
        stdin: int | None,
        stdout: int = subprocess.PIPE,
        stderr: int = subprocess.PIPE,
    ) -> None:
        """`stdout` / `stderr`: PIPE (read by `communicate`), DEVNULL, or a descriptor the command writes to (a
        pseudo-terminal's end, a file), as `subprocess.Popen` takes them."""
        self.args = list(cmd)
        self.returncode: int | None = None
        self.cpu_s = 0.0  # the command's user + system CPU, once it has ended
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.connect(SERVER.address())
        ours: list[int] = []  # descriptors opened here for the command, closed once it has them
        readers: list[int | None] = []
        writers: list[int] = []
        for where in (stdout, stderr):
            if where == subprocess.PIPE:
                read_end, write_end = os.pipe()
                readers.append(read_end)
                ours.append(write_end)
            elif where == subprocess.DEVNULL:
                readers.append(None)
                write_end = os.open(os.devnull, os.O_WRONLY)
                ours.append(write_end)
            elif isinstance(where, int) and where >= 0:
                readers.append(None)
                write_end = where
            else:
                raise ValueError(f"stdout/stderr={where!r}: PIPE, DEVNULL or a descriptor")
            writers.append(write_end)
        in_fd = os.open(os.devnull, os.O_RDONLY) if stdin is None else stdin
        if stdin is None:
            ours.append(in_fd)
        request = {
            "module": cmd[2],
            "args": list(cmd[3:]),
            "cwd": str(Path(cwd) if cwd is not None else Path.cwd()),
            "env": dict(env if env is not None else os.environ),
        }
        socket.send_fds(self.conn, [json.dumps(request).encode() + b"\n"], [in_fd, *writers])
        for fd in ours:
            os.close(fd)
        self.stdout_fd, self.stderr_fd = readers
        self.replies = self.conn.makefile("r")
        self.pid = int(json.loads(self.replies.readline())["pid"])

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self.conn], [], [], 0)
            if ready:
                self._status()
        return self.returncode

    def _status(self) -> None:
        line = self.replies.readline()
        reply = json.loads(line) if line else {"status": -9, "cpu_s": 0.0}
        self.returncode, self.cpu_s = int(reply["status"]), float(reply["cpu_s"])
        FORKED_CPU[0] += self.cpu_s
        self.conn.close()

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            ready, _, _ = select.select([self.conn], [], [], timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._status()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None, text: bool = True) -> tuple[Any, Any]:
        """The piped outputs to their ends (None for one not piped), then the status; or TimeoutExpired after
        killing the command."""
        chunks: dict[int, list[bytes]] = {fd: [] for fd in (self.stdout_fd, self.stderr_fd) if fd is not None}
        open_fds = set(chunks)
        deadline = None if timeout is None else time.monotonic() + timeout
        while open_fds:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(list(open_fds), [], [], left)
            if not ready:
                self.kill()
                self.wait(30)
                for fd in open_fds:
                    os.close(fd)
                out, err = self._outputs(chunks, text)
                raise subprocess.TimeoutExpired(self.args, timeout or 0, out, err)
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.discard(fd)
                    os.close(fd)
        self.wait(None if deadline is None else max(1.0, deadline - time.monotonic()))
        return self._outputs(chunks, text)

    def _outputs(self, chunks: dict[int, list[bytes]], text: bool) -> tuple[Any, Any]:
        def one(fd: int | None) -> str | bytes | None:
            if fd is None:
                return None
            data = b"".join(chunks[fd])
            return data.decode("utf-8", errors="replace") if text else data

        return one(self.stdout_fd), one(self.stderr_fd)


def _streams(kwargs: Mapping[str, Any]) -> tuple[int, int] | None:
    """Where a forked command's stdout and stderr go, from `subprocess.run`'s arguments; None if the arguments
    ask for something a forked command does not do (stdin data, preexec_fn, shell, ...)."""
    options = {k for k, v in kwargs.items() if v is not None} - {"cwd", "env", "timeout", "check", "text"}
    if kwargs.get("capture_output"):
        return (subprocess.PIPE, subprocess.PIPE) if options == {"capture_output"} else None
    if not options <= {"stdout", "stderr"}:
        return None
    out, err = kwargs.get("stdout"), kwargs.get("stderr")
    if (
        out is None or err is None or err == subprocess.STDOUT
    ):  # the test's own stdout: not a case the tests use
        return None
    return int(out), int(err)


def popen(
    cmd: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], stdout: int, stderr: int
) -> Forked | subprocess.Popen[str]:
    """`subprocess.Popen(cmd, ..., text=True)` for a command a test runs alongside others or signals itself
    (what the tests use of it: pid, poll, wait, send_signal, kill, communicate(timeout=...));
    forked from the server when `run` would fork it, else a fresh interpreter."""
    reason = fresh_reason(cmd, env)
    if reason is None:
        try:
            forked = Forked(cmd, cwd, env, None, stdout, stderr)
        except (OSError, RuntimeError, ValueError) as exc:
            reason = f"fork server unavailable: {exc}"
        else:
            _log(cmd, "forked")
            return forked
    _log(cmd, f"fresh ({reason})")
    return subprocess.Popen(list(cmd), cwd=cwd, env=dict(env), stdout=stdout, stderr=stderr, text=True)


def run(cmd: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(cmd, **kwargs)`; forked from the server when `cmd` is `[sys.executable, "-m", module,
    ...]`, its outputs are captured (text or bytes) or sent to DEVNULL or a descriptor (and any of cwd, env,
    timeout, check), and `forkable`."""
    streams = _streams(kwargs)
    reason = (
        "outputs not captured nor redirected" if streams is None else fresh_reason(cmd, kwargs.get("env"))
    )
    forked = None
    if reason is None and streams is not None:
        try:
            forked = Forked(cmd, kwargs.get("cwd"), kwargs.get("env"), None, *streams)
        except (OSError, RuntimeError, ValueError) as exc:  # no server: the command still runs, fresh
            reason = f"fork server unavailable: {exc}"
    _log(cmd, f"fresh ({reason})" if reason else "forked")
    if forked is None:
        return subprocess.run(list(cmd), **kwargs)
    out, err = forked.communicate(kwargs.get("timeout"), text=bool(kwargs.get("text")))
    assert forked.returncode is not None
    if kwargs.get("check") and forked.returncode:
        raise subprocess.CalledProcessError(forked.returncode, list(cmd), out, err)
    return subprocess.CompletedProcess(list(cmd), forked.returncode, out, err)
