"""Calibration of a judge's scores to the experts' scale (isotonic regression, cross-fitted).

A judge can rank candidates as the experts do and still sit on another scale (every score one point high) or
squeeze it. Per judge × mode × dimension, an isotonic map from the judge's candidate score to the experts'
consensus score (their mean over annotators) is fitted on the expert-rated candidates with K-fold
cross-fitting: each candidate's calibrated score comes from a map fitted without it, so the error after
calibration is an honest out-of-sample error. Reported: mean absolute error before and after.

For binary verdicts (the generated candidate beats the reference, the experts' strict majority as truth),
the judge's 0/1 verdict is compared with an isotonic, cross-fitted probability of an expert win from the
judge's score difference (candidate − reference): expected calibration error (ECE, 10 equal-width bins)
before and after, and the bins for the reliability diagram. Calibrated scores are only written on request
(`calibrated_scores`); no other table uses them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import KFold

from analysis.stats.corrected import labels_and_predictions

FOLDS = 5
BINS = 10
KEYS = ["judge", "mode", "dimension"]
COLUMNS = [*KEYS, "n", "mae_before", "mae_after", "n_verdicts", "ece_before", "ece_after"]


def cross_fitted(x: np.ndarray, y: np.ndarray, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Each item's isotonic prediction from a map fitted on the other folds (`folds` capped by n)."""
    out = np.full(len(x), np.nan)
    k = min(folds, len(x))
    if k < 2:
        return out
    for train, test in KFold(k, shuffle=True, random_state=seed).split(x):
        iso = IsotonicRegression(out_of_bounds="clip").fit(x[train], y[train])
        out[test] = iso.predict(x[test])
    return out


def expected_calibration_error(prob: np.ndarray, outcome: np.ndarray, bins: int = BINS) -> float:
    """ECE: Σ_b (n_b / n) |mean outcome_b − mean prob_b| over equal-width probability bins."""
    table = reliability_bins(prob, outcome, bins)
    if table.empty:
        return float("nan")
    return float(
        (table["n"] / table["n"].sum() * (table["observed_rate"] - table["mean_predicted"]).abs()).sum()
    )


def reliability_bins(prob: np.ndarray, outcome: np.ndarray, bins: int = BINS) -> pd.DataFrame:
    """Per non-empty bin: n, mean predicted probability and observed frequency (the reliability diagram)."""
    prob, outcome = np.asarray(prob, dtype=float), np.asarray(outcome, dtype=float)
    ok = np.isfinite(prob) & np.isfinite(outcome)
    which = np.clip((prob[ok] * bins).astype(int), 0, bins - 1)
    frame = pd.DataFrame({"bin": which, "p": prob[ok], "o": outcome[ok]})
    out = frame.groupby("bin").agg(n=("p", "size"), mean_predicted=("p", "mean"), observed_rate=("o", "mean"))
    return out.reset_index()


def calibration_table(
    cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference", seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per judge × mode × dimension: MAE and ECE before / after; the reliability bins before / after)."""
    if humans is None or humans.empty:
        return pd.DataFrame(columns=COLUMNS), pd.DataFrame()
    scores, verdicts = labels_and_predictions(cands, humans, reference)
    rows, bins = [], []
    for key, part in scores.dropna(subset=["y"]).groupby(KEYS, sort=True):
        x, y = part["yhat"].to_numpy(float), part["y"].to_numpy(float)
        after = cross_fitted(x, y, seed=seed)
        row = dict(zip(KEYS, key, strict=True)) | {
            "n": len(x),
            "mae_before": float(np.mean(np.abs(x - y))),
            "mae_after": float(np.nanmean(np.abs(after - y))) if np.isfinite(after).any() else np.nan,
            "n_verdicts": 0,
            "ece_before": np.nan,
            "ece_after": np.nan,
        }
        v = verdicts.loc[(verdicts[KEYS].astype(str) == list(map(str, key))).all(axis=1)].dropna(subset=["y"])
        if len(v) >= 2:
            won, diff, truth = v["yhat"].to_numpy(float), v["diff"].to_numpy(float), v["y"].to_numpy(float)
            prob = cross_fitted(diff, truth, seed=seed)
            row |= {
                "n_verdicts": len(v),
                "ece_before": expected_calibration_error(won, truth),
                "ece_after": expected_calibration_error(prob, truth),
            }
            for name, p in (("before", won), ("after", prob)):
                bins.append(reliability_bins(p, truth).assign(**dict(zip(KEYS, key, strict=True)), fit=name))
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS), (
        pd.concat(bins, ignore_index=True) if bins else pd.DataFrame()
    )


def calibrated_scores(
    cands: pd.DataFrame, humans: pd.DataFrame, reference: str = "reference"
) -> pd.DataFrame:
    """Every generated candidate's judge score with `score_calibrated`: the isotonic map fitted on all the
    expert-rated candidates of its judge × mode × dimension (for downstream use; the report never reads it)."""
    scores, _ = labels_and_predictions(cands, humans, reference)
    frames = []
    for _, part in scores.groupby(KEYS, sort=True):
        rated = part["y"].notna().to_numpy()
        out = part.drop(columns="y").rename(columns={"yhat": "score"})
        if rated.sum() >= 2:
            iso = IsotonicRegression(out_of_bounds="clip").fit(part.loc[rated, "yhat"], part.loc[rated, "y"])
            out["score_calibrated"] = iso.predict(part["yhat"].to_numpy(float))
        else:
            out["score_calibrated"] = np.nan
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
