"""The code is `ruff format` clean with no `# fmt: skip` packing, and `ruff check` clean (issue 23, item 6)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.studies import ROOT

pytest.importorskip("ruff", reason="ruff is not installed (pip install ruff, or the dev extra)")

#: Everything the project writes in Python.
FOLDERS = ("core", "judge", "experiments", "analysis", "conf", "rubrics", "tests", "benchmarks")


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_code_is_ruff_format_clean() -> None:
    done = _ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_code_is_ruff_check_clean() -> None:
    done = _ruff("check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_line_is_packed_with_fmt_skip() -> None:
    """A `# fmt: skip` keeps a hand-packed line from the formatter; the formatter's layout is the style."""
    marker = "# fmt: skip"
    packed = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith(marker)
    ]
    assert packed == [], packed
