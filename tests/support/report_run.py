"""`report_without_figures`: `python -m analysis.report ARGS` run in this process with its figures left
undrawn, for tests that read the report's tables and text, not its figures.

Why: drawing and encoding the figures is about two thirds of a small report's CPU (12 -> 4 CPU-s for an
8-instance study), and a fresh or forked process adds nothing these tests look at (issue 36, item 6). The
figures are tested where they are looked at (tests/test_report_golden.py, tests/test_calibration.py, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from analysis.report import build


def report_without_figures(argv: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """The report command's exit status; its figures are None (nothing drawn), the rest as the command does."""
    with monkeypatch.context() as patch:
        patch.setattr(build, "build_figures", lambda *args, **kwargs: {})
        return build.main(list(argv))
