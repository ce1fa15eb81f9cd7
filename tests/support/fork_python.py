"""A stand-in `python` executable whose `python -m <module> ...` commands run forked from this pytest process's
fork server (tests.support.forkserver), for code that starts its own commands as `[sys.executable, "-m", ...]`
and times them as its children (benchmarks/rqbench_scale.py): the test points that code's `sys.executable` at
`stand_in(...)` and pays for each command's work, not its interpreter start-up.

The stand-in is a real child process (its pid can be waited for, signalled, read from): it hands its own
stdin, stdout and stderr to the forked command, forwards SIGINT and SIGTERM to it, and exits as it ended;
killed by SIGKILL (which it cannot forward), its command is killed too (the server sees its connection close). Any
other command (`-c`, a script path) is exec'd as the real interpreter, a fresh process as before. Each forked
command's CPU seconds are appended to `cpu_log` (a waiting parent's rusage sees only the stand-in's own).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

# the stand-in's own code: stdlib only, so its start-up costs milliseconds
_CLIENT = """
import json, os, signal, socket, sys

def main(socket_path, cpu_log, python, argv):
    if len(argv) < 2 or argv[0] != "-m" or argv[1].startswith("-"):
        os.execv(python, [python, *argv])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(socket_path)
    request = {"module": argv[1], "args": argv[2:], "cwd": os.getcwd(), "env": dict(os.environ), "tied": True}
    socket.send_fds(conn, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
    replies = conn.makefile("r")
    pid = int(json.loads(replies.readline())["pid"])
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    line = replies.readline()
    reply = json.loads(line) if line else {"status": -9, "cpu_s": 0.0}
    with open(cpu_log, "a", encoding="utf-8") as log:
        log.write(f"{reply['cpu_s']}\\n")
    status = int(reply["status"])
    if status < 0:  # ended by a signal: end the same way
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)

main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
"""


def stand_in(folder: Path, socket_path: str, cpu_log: Path, python: str = sys.executable) -> Path:
    """Write the stand-in executable into `folder` and return its path."""
    client = folder / "fork_python_client.py"
    client.write_text(_CLIENT, encoding="utf-8")
    exe = folder / "python"
    fixed = " ".join(shlex.quote(str(a)) for a in (python, "-S", "-I", client, socket_path, cpu_log, python))
    exe.write_text(f'#!/bin/sh\nexec {fixed} "$@"\n', encoding="utf-8")
    exe.chmod(0o755)
    return exe


def forked_cpu(cpu_log: Path) -> float:
    """The CPU seconds of every command the stand-in forked so far."""
    if not cpu_log.exists():
        return 0.0
    return sum(float(line) for line in cpu_log.read_text(encoding="utf-8").split())
