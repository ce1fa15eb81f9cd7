"""A test-only fork server: `python -m <module> <args>` run by forking a process that has already imported the
project and its heavy libraries, so a CLI test pays for its command, not for interpreter start-up.

Each command still runs in its own process, with its own argv, environment, working folder, file
descriptors, exit status and signals (a test can Ctrl-C it): only the imports are shared, done once, before
any command runs and with no Python thread running (checked; numpy's native pool is fork-safe).
`tests.support.cli.run` decides which commands come here; a command whose environment differs in a way read at
import time runs in a fresh interpreter instead.

Protocol on a Unix socket, one connection per command: the client sends one JSON line (module, args, cwd,
env) with its stdin, stdout and stderr descriptors (SCM_RIGHTS); the server forks a supervisor that forks
the command, answers `{"pid": N}` at once and `{"status": S, "cpu_s": T}` (a `subprocess` return code, and the
command's CPU time) when it ends.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import signal
import socket
import sys
import threading
import traceback
from typing import Any

# What the CLIs import (each command imports anything else itself, as a fresh interpreter would).
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow",
    "pyarrow.parquet",
    "scipy.stats",
    "duckdb",
    "litellm",
    "hydra",
    "omegaconf",
    "jinja2",
    "experiments.run",
    "experiments.study",
    "experiments.inputs",
    "experiments.cli.entry",
    "judge.speedups",
    "judge.local.provider",
    "analysis.report.cli",
    "analysis.card.cli",
    "analysis.load",
    "analysis.report.build",
    # the embedded judge's libraries (no model is loaded, no torch thread pool started: those stay per command)
    "torch",
    "transformers",
)
MAX_REQUEST = 1 << 22


def _preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401 - transformers' lazy imports

    if threading.active_count() != 1:  # a forked command gets only the thread that forks
        raise RuntimeError(f"threads running after the imports: {threading.enumerate()}")


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The JSON request and the three descriptors sent with its first bytes."""
    data, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(MAX_REQUEST)
        if not more:
            break
        data += more
    return json.loads(data), fds


def _send(conn: socket.socket, message: dict[str, float]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _exit_code(code: object) -> int:
    """What the interpreter makes of `sys.exit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _command(request: dict[str, Any], fds: list[int], server_path: list[str]) -> None:
    """In the forked command process: become `python -m module args` and never return."""
    import runpy

    for number, fd in enumerate(fds):
        os.dup2(fd, number)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sys.stdin = sys.__stdin__ = open(0, closefd=False, encoding="utf-8")  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", closefd=False, encoding="utf-8")  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(  # noqa: SIM115
        2, "w", buffering=1, closefd=False, encoding="utf-8", errors="backslashreplace"
    )
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *[p for p in server_path if p not in extra]]
    sys.argv = [request["module"], *request["args"]]
    if os.environ.get("JUDGESCOPE_FORK_DEBUG"):
        import faulthandler

        faulthandler.dump_traceback_later(float(os.environ["JUDGESCOPE_FORK_DEBUG"]), exit=False)
    for name in (request["module"], f"{request['module']}.__main__"):
        sys.modules.pop(name, None)  # `python -m` runs it as __main__ only (runpy warns otherwise)
    code, interrupted = 0, False
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001 - the interpreter prints it and exits 1
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as at exit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if interrupted:  # an unhandled Ctrl-C ends the interpreter by SIGINT (status -2), not an exit code
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        os._exit(code)


def _end_with_client(conn: socket.socket, pidfd: int) -> None:
    """SIGKILL the command once its client's connection closes before its status was sent: a client killed
    by SIGKILL (which it cannot forward) takes its command with it, as a real interpreter would end (a pidfd:
    never a recycled pid)."""
    try:
        closed = not conn.recv(1)
    except OSError:
        closed = True
    if closed:
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except ProcessLookupError:  # it had ended already
            pass


def _supervise(conn: socket.socket, request: dict[str, Any], fds: list[int], server_path: list[str]) -> None:
    """In the forked supervisor: fork the command, report its pid, then its status, and exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(request, fds, server_path)
    for fd in fds:
        os.close(fd)
    if request.get("tied"):  # a stand-in interpreter (tests.support.fork_python) that may itself be killed
        threading.Thread(target=_end_with_client, args=(conn, os.pidfd_open(pid)), daemon=True).start()
    _send(conn, {"pid": pid})
    _pid, status, usage = os.wait4(pid, 0)
    try:
        _send(conn, {"status": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime})
    except BrokenPipeError:  # its client is gone (killed): no one to tell
        pass
    os._exit(0)


def serve(path: str) -> None:
    """Preload, then fork one supervisor per connection until the client closes the listening socket's
    parent pipe (stdin at EOF) or sends SIGTERM."""
    _preload()
    server_path = list(sys.path[1:])
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        request, fds = _read_request(conn)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _supervise(conn, request, fds, server_path)
        conn.close()
        for fd in fds:
            os.close(fd)


if __name__ == "__main__":
    serve(sys.argv[1])
