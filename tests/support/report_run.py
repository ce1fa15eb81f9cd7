"""`report_without_figures`: `python -m analysis.report ARGS` run in this process with its figures left
undrawn, for tests that read the report's tables and text, not its figures (`figures_undrawn` for a test that
calls the report's functions itself).

Why: drawing and encoding the figures is about two thirds of a small report's CPU (12 -> 4 CPU-s for an
8-instance study), and a fresh or forked process adds nothing these tests look at (issue 36, item 6). The
figures are tested where they are looked at (tests/test_report_golden.py, tests/test_calibration.py,
tests/test_analysis_report.py's full report, the browser and pdflatex tests, ...).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from analysis.report import build


def fake_no_figures(*args: object, **kwargs: object) -> dict[str, None]:
    """A fake `analysis.report.build.build_figures` that draws nothing."""
    return {}


@contextmanager
def figures_undrawn() -> Iterator[None]:
    """Within: the report builds every table and text as the command does, and no figure."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "build_figures", fake_no_figures)
        yield


def report_without_figures(argv: Sequence[str]) -> int:
    """The report command's exit status; its figures are None (nothing drawn), the rest as the command does."""
    with figures_undrawn():
        return build.main(list(argv))
