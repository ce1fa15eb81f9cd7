"""One error rate for the report's many tests (analysis.stats.multiplicity): BH q-values against statsmodels, and
the family spanning every table with a p-value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report.build import compute_tables
from analysis.stats import multiplicity
from analysis.tables import declarations
from tests.support.report_run import report_without_figures


def test_q_values_are_statsmodels_bh_and_nan_is_not_a_test() -> None:
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.2])
    q = multiplicity.bh_q_values(p)
    assert np.isnan(q[2])
    expected = multipletests([0.01, 0.04, 0.03, 0.2], method="fdr_bh")[1]
    assert q[[0, 1, 3, 4]] == pytest.approx(expected)
    # hand-computed: sorted p 0.01, 0.03, 0.04, 0.2 × 4 / rank = 0.04, 0.06, 0.0533, 0.2 → monotone 0.04, .0533
    assert q[[0, 3, 1, 4]] == pytest.approx([0.04, 0.0533333, 0.0533333, 0.2])


def test_families_are_fixed_by_the_design_and_significance_on_q() -> None:
    """Issue 32.4: BH runs within each declared family, not over whatever tables happen to be present; the
    combined-judge shifts are a family of their own (not pooled with the per-judge verdicts they reuse)."""
    tables = {
        "mode_shift": pd.DataFrame({"mcnemar_p": [0.01, 0.04], "significant": [True, True]}),
        "mode_shift_combined": pd.DataFrame({"mcnemar_p": [0.02]}),
        "self_preference": pd.DataFrame({"p": [0.03, 0.2]}),
        "pairwise_bias": pd.DataFrame({"first_p": [0.01]}),
        "other": pd.DataFrame({"p": [0.0001]}),  # not a declared test: left alone
    }
    family = multiplicity.add_q_values(tables, declarations.p_columns(), families=declarations.p_families())
    # in the order the tables are declared (`TableSpec.p_column`, `p_family` beside each statistic)
    assert list(family["table"]) == ["mode_shift", "mode_shift_combined", "pairwise_bias", "self_preference"]
    assert list(family["test_family"]) == ["mode_shift", "mode_shift_combined", "bias", "bias"]
    assert (
        multiplicity.family_size(family, "bias") == 3 and multiplicity.family_size(family, "mode_shift") == 2
    )
    q = multipletests([0.01, 0.04], method="fdr_bh")[1]
    assert tables["mode_shift"]["mcnemar_p_q"].tolist() == pytest.approx(q)  # [0.02, 0.04]: its own family
    assert tables["mode_shift_combined"]["mcnemar_p_q"].tolist() == pytest.approx([0.02])
    bias = multipletests([0.01, 0.03, 0.2], method="fdr_bh")[1]
    assert tables["self_preference"]["p_q"].tolist() == pytest.approx(bias[1:])
    assert tables["pairwise_bias"]["first_p_q"].tolist() == pytest.approx(bias[:1])
    assert list(tables["mode_shift"].columns) == ["mcnemar_p", "mcnemar_p_q", "significant"]
    assert tables["mode_shift"]["significant"].tolist() == [True, True]
    assert "p_q" not in tables["other"]
    sentence = multiplicity.family_sentence(family)
    assert "mode shift per judge × generator × dimension: 2" in sentence and "bias tests" in sentence


def test_a_family_s_q_values_ignore_another_family_s_inputs() -> None:
    base = {"mode_shift": pd.DataFrame({"mcnemar_p": [0.01, 0.04, 0.3]})}
    more = {**base, "preference_gap": pd.DataFrame({"mcnemar_p": np.linspace(0.2, 0.9, 30)})}
    p_columns, families = declarations.p_columns(), declarations.p_families()
    multiplicity.add_q_values(base, p_columns, families=families)
    multiplicity.add_q_values(more, p_columns, families=families)
    assert base["mode_shift"]["mcnemar_p_q"].tolist() == more["mode_shift"]["mcnemar_p_q"].tolist()


def test_the_report_corrects_its_p_values_within_each_family() -> None:
    study = synthetic_results(n_instances=10, seed=3)
    tables = compute_tables(study, n_boot=20)
    family = tables["multiple_testing"]
    assert "mode_shift" in set(family["table"])
    shift = tables["mode_shift"]
    assert (shift["significant"] == (shift["mcnemar_p_q"] < 0.05)).all()
    for _, members in family.groupby("test_family"):
        every_p = np.concatenate(
            [
                tables[t][c].to_numpy(dtype=float)
                for t, c in zip(members["table"], members["p_column"], strict=True)
            ]
        )
        every_q = np.concatenate(
            [
                tables[t][f"{c}_q"].to_numpy(dtype=float)
                for t, c in zip(members["table"], members["p_column"], strict=True)
            ]
        )
        ok = np.isfinite(every_p)
        assert int(members["n_tests"].sum()) == int(ok.sum())
        assert every_q[ok] == pytest.approx(multipletests(every_p[ok], method="fdr_bh")[1])


def test_mode_shift_q_values_are_the_same_with_and_without_humans(tmp_path: Path) -> None:
    """Issue 32.4 through the report command (in process, figures undrawn: only tables and report.md are
    read): adding expert labels (the human-agreement family) leaves the mode-shift q-values as they were; the
    power note quotes the design, with the family's size."""
    study = synthetic_results(n_instances=10, judges=("judge_a",), k=2, n_samples=2, shift=0.3, seed=4)
    for (judge, mode), part in study.groupby(["judge", "mode"], observed=True):
        folder = tmp_path / "multirun" / f"{judge}-{mode}"
        folder.mkdir(parents=True)
        part = part.astype({c: str for c in part.columns if isinstance(part[c].dtype, pd.CategoricalDtype)})
        part.to_parquet(folder / "results.parquet", index=False)
    synthetic_humans(study, seed=2).to_csv(tmp_path / "humans.csv", index=False)
    q = {}
    for name, extra in (("plain", []), ("humans", ["--humans", str(tmp_path / "humans.csv")])):
        out = tmp_path / name
        argv = [str(tmp_path / "multirun"), "--out", str(out), "--n-boot", "20", *extra]
        assert report_without_figures(argv) == 0
        q[name] = pd.read_csv(out / "tables" / "mode_shift.csv")["mcnemar_p_q"].to_numpy(dtype=float)
        testing = pd.read_csv(out / "tables" / "multiple_testing.csv")
        size = int(testing.loc[testing["test_family"] == "mode_shift", "n_tests"].sum())
        report = (out / "report.md").read_text()
        assert f"discordance 0.30 assumed, BH q = 0.05 over {size} mode-shift test(s)" in report
    assert (tmp_path / "humans" / "tables" / "preference_gap.csv").is_file()  # the other family is there
    assert len(q["plain"]) > 1 and np.array_equal(q["plain"], q["humans"], equal_nan=True)
