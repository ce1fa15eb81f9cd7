"""Long commands show progress on a terminal and stay silent when piped (issue 37, frictions).

`python -m analysis.card` computes every table of the study before it writes a card (minutes on a real
study); on a terminal its stderr shows a progress bar naming the table being computed. Run under a
pseudo-terminal here; the same command with stderr piped prints no bar (scripts and CI logs stay clean).
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.support.cli import run as run_cli
from tests.support.studies import cli_env
from tests.support.study_folders import write_fake_run


def _score(judge: str, cand: str, dim: str, k: int) -> float:
    return float(sum(map(ord, cand + dim + judge)) % 4)


def _study(tmp: Path) -> Path:
    root = tmp / "multirun"
    for judge in ("judge-a", "judge-b"):
        write_fake_run(root / f"{judge}-independent", judge, "independent", _score, n_samples=2)
    return root


def _card(root: Path, out: Path, tmp: Path, stderr: int) -> subprocess.CompletedProcess[bytes]:
    args = [sys.executable, "-m", "analysis.card", str(root), "--n-boot", "20", "--n-null", "5"]
    return run_cli(
        [*args, "--out", str(out)],
        cwd=tmp,
        env=cli_env(tmp),
        stderr=stderr,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed (EIO on Linux)
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_the_cards_show_which_table_they_compute_on_a_terminal(tmp_path: Path) -> None:
    root = _study(tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal 120 wide
    try:
        done = _card(root, tmp_path / "cards", tmp_path, slave)
    finally:
        os.close(slave)
    shown = _read_all(master).decode(errors="replace")
    os.close(master)
    assert done.returncode == 0, shown[-2000:]
    assert "tables:" in shown, shown[-2000:]
    assert "self_consistency" in shown  # the bar names the table it is on


def test_piped_stderr_shows_no_progress_bar(tmp_path: Path) -> None:
    root = _study(tmp_path)
    done = _card(root, tmp_path / "cards", tmp_path, subprocess.PIPE)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"tables:" not in done.stderr
