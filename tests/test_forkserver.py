"""The tests' fork server (tests.support.forkserver, tests.support.cli) runs a command as a fresh interpreter
would: the same output, exit status and signals, its own environment and folder; and whatever depends on
import-time state still gets a fresh interpreter."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import cli, fork_python
from tests.support.studies import cli_env

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the fork server needs Linux (fork, SCM_RIGHTS)"
)

PROBE = """
import os, sys
print("argv", sys.argv[1:])
print("cwd", os.getcwd())
print("cache", os.environ.get("JUDGESCOPE_CACHE_DIR"))
print("pid", os.getpid())
print("first on path", sys.path[0])
sys.stderr.write("to stderr\\n")
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def probe(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A module `probe` on PYTHONPATH that prints what a process sees, and the environment to run it with."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "probe.py").write_text(PROBE)
    (mods / "sleeper.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    env = cli_env(tmp_path, {"PYTHONPATH": os.pathsep.join([str(mods), str(cli.ROOT)])})
    return tmp_path, env


def test_a_forked_command_sees_its_own_argv_folder_environment_and_exit_status(probe) -> None:
    tmp, env = probe
    work = tmp / "work"
    work.mkdir()
    command = [sys.executable, "-m", "probe", "3", "a b"]
    assert cli.fresh_reason(command, env) is None, cli.fresh_reason(command, env)
    forked = cli.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    fresh = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert forked.returncode == fresh.returncode == 3
    assert forked.stderr == fresh.stderr == "to stderr\n"

    def lines(out: str) -> list[str]:
        return [line for line in out.splitlines() if not line.startswith("pid ")]

    assert lines(forked.stdout) == lines(fresh.stdout)
    assert f"cwd {work}" in forked.stdout and f"cache {tmp / 'cache'}" in forked.stdout
    assert f"first on path {work}" in forked.stdout  # `python -m` puts the working folder first
    assert f"pid {os.getpid()}" not in forked.stdout
    with pytest.raises(subprocess.CalledProcessError):
        cli.run(command, cwd=work, env=env, capture_output=True, text=True, check=True)


def test_outputs_go_where_subprocess_would_send_them(probe, tmp_path: Path) -> None:
    """Bytes as bytes, DEVNULL, a file's descriptor, and a pseudo-terminal the command sees as one."""
    tmp, env = probe
    command = [sys.executable, "-m", "probe", "0"]
    as_bytes = cli.run(command, cwd=tmp, env=env, capture_output=True, timeout=120)
    assert as_bytes.stderr == b"to stderr\n" and b"argv ['0']" in as_bytes.stdout
    with (tmp_path / "out.txt").open("wb") as out:
        to_file = cli.run(
            command, cwd=tmp, env=env, stdout=out.fileno(), stderr=subprocess.DEVNULL, timeout=120
        )
    assert (to_file.stdout, to_file.stderr) == (None, None) and "argv ['0']" in (
        tmp_path / "out.txt"
    ).read_text()
    master, slave = os.openpty()
    (tmp / "mods" / "ttyprobe.py").write_text(
        "import sys\nsys.stderr.write(f'tty={sys.stderr.isatty()}\\n')\n"
    )
    try:
        on_tty = cli.run(
            [sys.executable, "-m", "ttyprobe"], cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=slave
        )
    finally:
        os.close(slave)
    assert on_tty.returncode == 0 and on_tty.stderr is None and b"tty=True" in os.read(master, 1024)
    os.close(master)
    assert cli.fresh_reason(command, env) is None  # forked, not fresh (the fork log would say so too)


def test_a_cli_answers_the_same_forked_or_fresh(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    for command in (
        [sys.executable, "-m", "experiments.run", "judge=nope", "progress=false"],
        [sys.executable, "-m", "analysis.report", str(tmp_path / "missing")],
    ):
        forked = cli.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        fresh = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), command
        assert forked.returncode == 2 and forked.stderr.count("\n") == 1


def test_a_forked_command_can_be_interrupted_and_timed_out(probe) -> None:
    tmp, env = probe
    forked = cli.Forked([sys.executable, "-m", "sleeper"], tmp, env, None)
    deadline = time.monotonic() + 60
    while os.read(forked.stdout_fd, 100) != b"started\n" and time.monotonic() < deadline:
        pass
    forked.send_signal(signal.SIGINT)
    assert forked.wait(60) == -signal.SIGINT  # an unhandled KeyboardInterrupt, as an interpreter ends on it
    os.close(forked.stdout_fd)
    os.close(forked.stderr_fd)
    with pytest.raises(subprocess.TimeoutExpired):
        cli.run([sys.executable, "-m", "sleeper"], env=env, capture_output=True, text=True, timeout=3)


def test_what_depends_on_import_time_state_runs_fresh(tmp_path: Path, monkeypatch) -> None:
    env = cli_env(tmp_path)
    module = [sys.executable, "-m", "experiments.run"]
    assert cli.fresh_reason(module, env) is None, cli.fresh_reason(module, env)
    assert cli.forkable(module, {**env, "QWEN_API_KEY": "sk-test", "JUDGESCOPE_CACHE_DIR": "/x"})
    assert not cli.forkable(module, {**env, "LITELLM_LOG": "DEBUG"})  # litellm reads it at import
    assert not cli.forkable([*module, "prices=remote"], env)  # the price map is chosen before litellm loads
    assert not cli.forkable([sys.executable, "-X", "importtime", "-m", "experiments.run"], env)
    assert not cli.forkable([sys.executable, "-c", "pass"], env)
    monkeypatch.setenv("JUDGESCOPE_TEST_FRESH", "1")
    assert not cli.forkable(module, env)


def test_a_stand_in_interpreter_killed_takes_its_forked_command_with_it(probe) -> None:
    """tests.support.fork_python's stand-in cannot forward a SIGKILL: the server ends the command when the
    stand-in's connection closes, so the outputs reach their end (rqbench_scale's viewer step kills a viewer
    that did not start, then reads its stderr to the end) instead of a command left running."""
    tmp, env = probe
    exe = fork_python.stand_in(tmp, cli.SERVER.address(), tmp / "cpu.txt")
    proc = subprocess.Popen([str(exe), "-m", "sleeper"], cwd=tmp, env=env, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    proc.kill()
    proc.wait(60)
    ready, _, _ = select.select([proc.stdout], [], [], 60)  # a hang guard, not a timing: EOF comes at once
    assert ready and proc.stdout.read() == b"", "the forked command outlived its stand-in"
