"""The report of the shared sample study (tests.support.studies.shared_sample_study) with the shipped experts,
written once per test session through `python -m analysis.report` and copied to each test that reads it.

Why: three files read that one report (tests/test_report_golden.py its tables, tests/test_analysis_report.py
its expert-vs-judge table and paper tables, tests/test_view.py its pages in a browser); each wrote it again, at
~10-15 CPU-s a report with its figures (issue 36, item 6). The report is deterministic (the study is, and the
bootstrap is seeded), so a copy holds what a fresh build would.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from tests.support.cli import run as run_cli
from tests.support.studies import ROOT, cli_env, shared_sample_study

HUMANS = ROOT / "data" / "sample" / "humans.csv"
#: the command's arguments after the study folder: the shipped experts, declared a simple random sample of the
#: judged candidates (they rated every candidate of their instances), and the golden tables' bootstrap size
ARGS = ("--humans", str(HUMANS), "--humans-design", "random", "--n-boot", "20")


def shared_sample_report(factory: pytest.TempPathFactory, dest: Path) -> Path:
    """`python -m analysis.report <sample study> --humans data/sample/humans.csv --humans-design random
    --n-boot 20`, run once per test session (of any xdist worker: behind a file lock in the session's shared
    temporary root) into a folder of its own, then copied to `dest` (report.md, report.html, tables/, figures/,
    paper tables); `dest`, so a test may change its copy."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    built = shared / "sample-report"
    with FileLock(str(built) + ".lock"):
        if not (built / "done").is_file():
            shutil.rmtree(built, ignore_errors=True)
            built.mkdir()
            root = shared_sample_study(factory, built / "study")
            done = run_cli(
                [sys.executable, "-m", "analysis.report", str(root), *ARGS, "--out", str(built / "report")],
                capture_output=True,
                text=True,
                env=cli_env(built),
                cwd=ROOT,
                timeout=900,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            (built / "done").touch()
    shutil.copytree(built / "report", dest, dirs_exist_ok=True)
    return dest
