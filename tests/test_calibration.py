"""Calibration to the experts' scale (analysis.stats.calibration): a planted shifted judge is corrected out of
sample, ECE by hand, the isotonic fit is scikit-learn's, and the report shows it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.isotonic import IsotonicRegression

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report.build import build_figures, compute_tables
from analysis.stats.calibration import (
    calibrated_scores,
    calibration_table,
    cross_fitted,
    expected_calibration_error,
    isotonic_predict,
    kfold_splits,
)


def shifted_judge(n: int = 60, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Experts score generated candidates 0–2 and the reference 1; the judge gives every candidate the
    experts' score + 1 (same order, wrong scale)."""
    rng = np.random.default_rng(seed)
    rows, humans = [], []
    for i in range(n):
        truth = {"ref": 1, "gen": int(rng.integers(0, 3))}
        for cand, score in truth.items():
            source = "reference" if cand == "ref" else "g"
            rows.append(
                {
                    "judge": "j",
                    "mode": "independent",
                    "instance_id": f"i{i}",
                    "candidate_id": f"i{i}:{cand}",
                    "source": source,
                    "dimension": "d",
                    "score": score + 1.0,
                    "higher_is_better": True,
                }
            )
            humans += [
                {
                    "annotator": a,
                    "instance_id": f"i{i}",
                    "candidate_id": f"i{i}:{cand}",
                    "source": source,
                    "dimension": "d",
                    "score": score,
                }
                for a in ("x", "y")
            ]
    return pd.DataFrame(rows), pd.DataFrame(humans)


def test_a_shifted_judge_is_calibrated_out_of_sample() -> None:
    cands, humans = shifted_judge()
    table, bins = calibration_table(cands, humans)
    row = table.iloc[0]
    assert row["n"] == 60 and row["mae_before"] == pytest.approx(1.0)
    assert row["mae_after"] < 0.05  # the isotonic map learns "minus one" from the other folds
    assert set(bins["fit"]) == {"before", "after"}
    written = calibrated_scores(cands, humans)
    assert (written["score_calibrated"] == written["score"] - 1).all()


def test_ece_by_hand_and_isotonic_is_sklearn_s() -> None:
    prob = np.array([0.05, 0.05, 0.95, 0.95, 0.55])
    outcome = np.array([0, 1, 1, 1, 0])
    # bins: [0, .1): mean p .05, observed .5 (2 items); [.9, 1]: .95 vs 1 (2); [.5, .6): .55 vs 0 (1)
    assert expected_calibration_error(prob, outcome) == pytest.approx((2 * 0.45 + 2 * 0.05 + 1 * 0.55) / 5)
    x = np.arange(20, dtype=float)
    y = (x > 9).astype(float)
    got = cross_fitted(x, y, folds=2, seed=0)
    from sklearn.model_selection import KFold

    for train, test in KFold(2, shuffle=True, random_state=0).split(x):
        iso = IsotonicRegression(out_of_bounds="clip").fit(x[train], y[train])
        assert got[test] == pytest.approx(iso.predict(x[test]))


def test_isotonic_and_folds_are_sklearn_s_on_ties_and_any_n() -> None:
    """The scipy-based fit (no scikit-learn import at start-up) predicts what scikit-learn's does, on scores
    with many ties, points outside the fitted range and one distinct x; the folds are KFold's."""
    from sklearn.model_selection import KFold

    rng = np.random.default_rng(3)
    for n in (2, 3, 7, 40, 101):
        x = rng.integers(0, 6, n).astype(float) / 2  # judge scores: many ties
        y = np.clip(x + rng.normal(0, 1.5, n), 0, 3)
        at = np.linspace(-1.0, 4.0, 23)
        want = IsotonicRegression(out_of_bounds="clip").fit(x, y).predict(at)
        np.testing.assert_allclose(isotonic_predict(x, y, at), want, rtol=0, atol=1e-12)
        for k in {2, min(5, n)}:
            ours = kfold_splits(n, k, seed=n)
            theirs = list(KFold(k, shuffle=True, random_state=n).split(x))
            assert [(list(a), list(b)) for a, b in ours] == [(list(a), list(b)) for a, b in theirs]
    flat = np.full(4, 2.0)
    assert (isotonic_predict(flat, np.array([0.0, 1, 2, 3]), np.array([0.0, 5])) == 1.5).all()


def test_report_has_calibration_and_its_reliability_diagram() -> None:
    study = synthetic_results(n_instances=12, seed=4)
    humans = synthetic_humans(study, seed=5)
    tables = compute_tables(study, humans, n_boot=20)
    assert len(tables["calibration"]) and {"mae_before", "mae_after", "ece_before", "ece_after"} <= set(
        tables["calibration"]
    )
    figures = build_figures(study, tables, humans)
    assert figures["calibration"] is not None
