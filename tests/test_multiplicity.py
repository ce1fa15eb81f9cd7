"""One error rate for the report's many tests (analysis.stats.multiplicity): BH q-values against statsmodels, and
the family spanning every table with a p-value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from analysis.load.synthetic import synthetic_results
from analysis.report.build import compute_tables
from analysis.stats import multiplicity


def test_q_values_are_statsmodels_bh_and_nan_is_not_a_test() -> None:
    p = np.array([0.01, 0.04, np.nan, 0.03, 0.2])
    q = multiplicity.bh_q_values(p)
    assert np.isnan(q[2])
    expected = multipletests([0.01, 0.04, 0.03, 0.2], method="fdr_bh")[1]
    assert q[[0, 1, 3, 4]] == pytest.approx(expected)
    # hand-computed: sorted p 0.01, 0.03, 0.04, 0.2 × 4 / rank = 0.04, 0.06, 0.0533, 0.2 → monotone 0.04, .0533
    assert q[[0, 3, 1, 4]] == pytest.approx([0.04, 0.0533333, 0.0533333, 0.2])


def test_one_family_across_tables_and_significance_on_q() -> None:
    tables = {
        "mode_shift": pd.DataFrame({"mcnemar_p": [0.01, 0.04], "significant": [True, True]}),
        "self_preference": pd.DataFrame({"p": [0.03, 0.2]}),
        "other": pd.DataFrame({"p": [0.0001]}),  # not a declared test: left alone
    }
    family = multiplicity.add_q_values(tables)
    assert list(family["table"]) == ["mode_shift", "self_preference"]
    assert family["n_tests"].sum() == 4
    q = multipletests([0.01, 0.04, 0.03, 0.2], method="fdr_bh")[1]
    assert tables["mode_shift"]["mcnemar_p_q"].tolist() == pytest.approx(q[:2])
    assert tables["self_preference"]["p_q"].tolist() == pytest.approx(q[2:])
    assert list(tables["mode_shift"].columns) == ["mcnemar_p", "mcnemar_p_q", "significant"]
    assert tables["mode_shift"]["significant"].tolist() == [True, False]  # q 0.04, 0.0533: the second is not
    assert "p_q" not in tables["other"]


def test_the_report_corrects_its_p_values_as_one_family() -> None:
    study = synthetic_results(n_instances=10, seed=3)
    tables = compute_tables(study, n_boot=20)
    family = tables["multiple_testing"]
    assert "mode_shift" in set(family["table"])
    shift = tables["mode_shift"]
    assert (shift["significant"] == (shift["mcnemar_p_q"] < 0.05)).all()
    every_p = np.concatenate(
        [tables[t][c].to_numpy(dtype=float) for t, c in zip(family["table"], family["p_column"], strict=True)]
    )
    ok = np.isfinite(every_p)
    assert int(family["n_tests"].sum()) == int(ok.sum())
    every_q = np.concatenate(
        [
            tables[t][f"{c}_q"].to_numpy(dtype=float)
            for t, c in zip(family["table"], family["p_column"], strict=True)
        ]
    )
    assert every_q[ok] == pytest.approx(multipletests(every_p[ok], method="fdr_bh")[1])
