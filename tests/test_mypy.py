"""The production packages type-check clean (issue 23, item 6): a mypy error is a bug that waits for its input."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.studies import ROOT

#: What ships; tests/ is not held to it.
PACKAGES = ("core", "judge", "experiments", "analysis", "conf", "rubrics")

pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy, or the dev extra)")


@pytest.mark.slow
def test_production_packages_have_no_mypy_errors() -> None:
    """mypy with the project's own settings ([tool.mypy] in pyproject.toml) reports 0 errors."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, f"{len(errors)} mypy errors:\n" + "\n".join(
        errors or [done.stderr]
    )
