"""Issue 34 (one CSV writer, break 18): every CSV a command writes goes through `core.cells.write_csv`, which
quotes a cell a spreadsheet would run as a formula. The package sources are scanned for any other writer
(pandas' `to_csv`, the `csv` module's writers, Arrow's `write_csv`), so a new one fails here; the drift CSVs
(written with a bare `to_csv`) are checked through the command line."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pandas as pd

from analysis.load.synthetic import synthetic_results
from tests.support.cli import run as run_cli
from tests.support.studies import ROOT, cli_env

PACKAGES = ("core", "judge", "rubrics", "experiments", "analysis", "conf")  # pyproject's packages
WRITER = ROOT / "core" / "cells.py"


def other_csv_writers(path: Path) -> list[str]:
    """`file:line call` (file name only) for each CSV writer in `path` other than the cells module's."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, node.func.value
            owner_name = owner.id if isinstance(owner, ast.Name) else ""
            if (
                name == "to_csv"
                or (name in ("writer", "DictWriter") and owner_name == "csv")
                or (name == "write_csv" and owner_name not in ("", "cells"))
            ):
                found.append(f"{path.name}:{node.lineno} {owner_name or '…'}.{name}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("csv", "pyarrow.csv"):
            if any(a.name in ("writer", "DictWriter", "write_csv") for a in node.names):
                found.append(f"{path.name}:{node.lineno} from {node.module} import ...")
    return found


def test_no_csv_writer_outside_the_cells_module() -> None:
    sources = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")) if p != WRITER]
    assert len(sources) > 50  # the scan sees the packages
    found = [hit for path in sources for hit in other_csv_writers(path)]
    assert found == [], "write CSVs with core.cells.write_csv: " + "; ".join(found)


def test_the_scan_finds_each_kind_of_writer(tmp_path: Path) -> None:
    """The scan itself can fail: each kind of writer, planted in a file, is found."""
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import csv\nimport pyarrow.csv as pa_csv\n\n"
        "def f(frame, handle, table):\n"
        "    frame.to_csv('x.csv')\n    csv.writer(handle)\n    csv.DictWriter(handle, [])\n"
        "    pa_csv.write_csv(table, 'y.csv')\n"
    )
    found = other_csv_writers(planted)
    assert [hit.split(" ", 1)[1] for hit in found] == [
        "frame.to_csv",
        "csv.writer",
        "csv.DictWriter",
        "pa_csv.write_csv",
    ], found


def test_drift_csvs_quote_formulas(tmp_path: Path) -> None:
    """`python -m analysis.drift` on two runs whose judge is named `=HYPERLINK(...)`: the drift CSVs hold it
    quoted (before: as written, a formula in a spreadsheet)."""
    frame = synthetic_results(n_instances=4, seed=2)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    frame["judge"] = frame["judge"].map({"judge_a": '=HYPERLINK("http://x")', "judge_b": "judge_b"})
    runs = []
    for name in ("run1", "run2"):
        (tmp_path / name).mkdir()
        frame.to_parquet(tmp_path / name / "results.parquet", index=False)
        runs.append(str(tmp_path / name))
    run = run_cli(
        [sys.executable, "-m", "analysis.drift", *runs, "--out", str(tmp_path / "drift")],
        cwd=ROOT,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    for name in ("drift_shift.csv", "drift_chart.csv"):
        text = (tmp_path / "drift" / name).read_text()
        assert "'=HYPERLINK" in text and '"=HYPERLINK' not in text.replace("\"'=", ""), text[:300]
