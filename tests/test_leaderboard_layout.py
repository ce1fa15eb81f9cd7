"""Issue 37 item 3: the report's leaderboard one screen wide, through the report command (in process)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report import summary
from tests.support.report_run import report_without_figures


def test_the_leaderboard_is_one_row_per_judge_with_alpaca_evals_columns_and_no_nan(tmp_path: Path) -> None:
    """Before: one column per κ_w named `kappa_w:<dim> [<mode>]` first, sorted by an unnamed mean, NaN in
    empty cells, and an empty latency for a judge whose every call was a cache replay. After: judge, then
    alpaca_eval's columns in its order (agreement: the named sort key, cost and time per 1,000, position and
    length bias), the κ_w columns together under one header group, parse rate; blank cells; a replayed call
    counts with its original latency."""
    results = synthetic_results(n_instances=8, n_samples=2, shift=1.0, seed=2)
    results["latency_s"] = np.where(results["judge"] == "judge_a", 2.0, 4.0)
    results["cached"] = results["judge"] == "judge_b"  # judge_b's run: a rerun served from the cache
    run = tmp_path / "run"
    run.mkdir()
    results.to_csv(run / "results.csv", index=False)
    synthetic_humans(results, seed=3).to_csv(tmp_path / "humans.csv", index=False)
    out = tmp_path / "report"  # the report command in this process, figures undrawn (none is read here)
    argv = [str(run), "--humans", str(tmp_path / "humans.csv"), "--out", str(out), "--n-boot", "20"]
    assert report_without_figures(argv) == 0
    board = pd.read_csv(out / "tables" / "leaderboard.csv")
    columns = list(board.columns)
    lead = ["judge", "agreement", "cost_per_1k", "time_per_1k_s", "position_bias", "length_rho"]
    assert columns[: len(lead)] == lead
    kappas = [i for i, c in enumerate(columns) if c.startswith("kappa_w:")]
    assert len(kappas) == 4 and kappas == list(range(len(lead), len(lead) + 4))  # together, after alpaca's
    assert columns[len(lead) + 4] == "parse_rate"
    assert len(board) == board["judge"].nunique() == 2
    means = board[[columns[i] for i in kappas]].mean(axis=1)
    assert np.allclose(board["agreement"], means) and board["agreement"].is_monotonic_decreasing
    lat = board.set_index("judge")["median_latency_s"]
    assert lat["judge_b"] == 4.0 and lat["judge_a"] == 2.0  # the cached judge_b keeps its recorded latency
    assert board.set_index("judge")["time_per_1k_s"].to_dict() == {"judge_a": 2000.0, "judge_b": 4000.0}
    html = (out / "report.html").read_text()
    section = html[html.index('id="leaderboard"') :][:20000]
    assert "κ_w with the experts" in section and "NaN" not in section and ">nan<" not in section
    assert "sorted by agreement" in html


def test_leaderboard_display_blanks_and_groups() -> None:
    board = pd.DataFrame(
        {
            "judge": ["a", "b"],
            "agreement": [0.5, np.nan],
            "kappa_w:x [independent]": [0.5, np.nan],
            "cost_per_1k": [np.nan, 1.0],
        }
    )
    shown = summary.leaderboard_display(board)
    assert list(shown.columns) == [
        ("", "judge"),
        ("", "agreement"),
        (summary.KAPPA_GROUP, "x [independent]"),
        ("", "cost_per_1k"),
    ]
    assert shown.iloc[1].tolist() == ["b", "", "", "1.0000"] and shown.iloc[0, 3] == "unknown"
