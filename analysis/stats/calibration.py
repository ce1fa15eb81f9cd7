"""Calibration of a judge's scores to the experts' scale (isotonic regression, cross-fitted).

A judge can rank candidates as the experts do and still sit on another scale (every score one point high) or
squeeze it. Per judge × mode × dimension, an isotonic map from the judge's candidate score to the experts'
consensus score (their mean over annotators) is fitted on the expert-rated candidates with K-fold
cross-fitting: each candidate's calibrated score comes from a map fitted without it, so the error after
calibration is an honest out-of-sample error. Reported: mean absolute error before and after.

For binary verdicts (the generated candidate beats the reference, the experts' strict majority as truth),
the judge's 0/1 verdict is compared with an isotonic, cross-fitted probability of an expert win from the
judge's score difference (candidate − reference): expected calibration error (ECE, 10 equal-width bins)
before and after, each with a 95% interval (`ece_interval`: exact per-bin intervals, so 28 verdicts in two
bins never read as a perfect 0.000), and the bins, with their counts, for the reliability diagram. Calibrated scores are only written on request
(`calibrated_scores`); no other table uses them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import optimize

from analysis.stats.corrected import ITEM, labels_and_predictions
from analysis.stats.humans import NO_HUMANS_CARD
from analysis.stats.spec import CardField, FigureSpec, Inputs, Section, Tables, TableSpec
from core.intervals import LEVEL, exact_interval

FOLDS = 5
BINS = 10
KEYS = ["judge", "mode", "dimension"]
COLUMNS = [
    *KEYS,
    "n",
    "mae_before",
    "mae_after",
    "n_verdicts",
    "ece_before",
    "ece_before_lo",
    "ece_before_hi",
    "ece_after",
    "ece_after_lo",
    "ece_after_hi",
]


def isotonic_predict(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    """scikit-learn's `IsotonicRegression(out_of_bounds="clip").fit(x, y).predict(at)` without importing
    scikit-learn (0.5-1 s of a report's start): y averaged over equal x (scikit-learn merges x within float
    resolution), the weighted pool-adjacent-violators fit of scipy (`scipy.optimize.isotonic_regression`, which
    scikit-learn itself calls), interpolated linearly between the fitted x and flat beyond them."""
    order = np.lexsort((y, x))
    xs, ys = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    starts = np.flatnonzero(np.r_[True, np.diff(xs) >= np.finfo(float).resolution])
    counts = np.diff(np.r_[starts, len(xs)]).astype(float)
    means = np.add.reduceat(ys, starts) / counts
    fitted = optimize.isotonic_regression(means, weights=counts, increasing=True).x
    return np.interp(np.asarray(at, dtype=float), xs[starts], fitted)


def kfold_splits(n: int, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index pairs of scikit-learn's `KFold(k, shuffle=True, random_state=seed).split` on n items:
    one shuffle of 0..n-1 by `RandomState(seed)`, cut into k consecutive folds, the first n % k one longer (each fold's indices sorted)."""
    shuffled = np.arange(n)
    np.random.RandomState(seed).shuffle(shuffled)  # noqa: NPY002 (KFold's own generator, for the same folds)
    sizes = np.full(k, n // k)
    sizes[: n % k] += 1
    out = []
    for stop, size in zip(np.cumsum(sizes), sizes, strict=True):
        test = np.sort(shuffled[stop - size : stop])
        train = np.setdiff1d(np.arange(n), test)
        out.append((train, test))
    return out


def cross_fitted(x: np.ndarray, y: np.ndarray, folds: int = FOLDS, seed: int = 0) -> np.ndarray:
    """Each item's isotonic prediction from a map fitted on the other folds (`folds` capped by n)."""
    out = np.full(len(x), np.nan)
    k = min(folds, len(x))
    if k < 2:
        return out
    for train, test in kfold_splits(len(x), k, seed):
        out[test] = isotonic_predict(x[train], y[train], x[test])
    return out


def expected_calibration_error(prob: np.ndarray, outcome: np.ndarray, bins: int = BINS) -> float:
    """ECE: Σ_b (n_b / n) |mean outcome_b − mean prob_b| over equal-width probability bins."""
    return ece_of_bins(reliability_bins(prob, outcome, bins))


def ece_of_bins(table: pd.DataFrame) -> float:
    """`expected_calibration_error` from the bins `reliability_bins` made (NaN without a bin)."""
    if table.empty:
        return float("nan")
    return float(
        (table["n"] / table["n"].sum() * (table["observed_rate"] - table["mean_predicted"]).abs()).sum()
    )


def reliability_bins(
    prob: np.ndarray, outcome: np.ndarray, bins: int = BINS, level: float = LEVEL
) -> pd.DataFrame:
    """Per non-empty bin: n, expert wins, mean predicted probability, observed frequency and its exact
    (Clopper–Pearson) interval at `level` (the reliability diagram, which shows each bin's n)."""
    prob, outcome = np.asarray(prob, dtype=float), np.asarray(outcome, dtype=float)
    ok = np.isfinite(prob) & np.isfinite(outcome)
    which = np.clip((prob[ok] * bins).astype(np.int64), 0, bins - 1)
    n = np.bincount(which, minlength=bins)
    wins = np.bincount(which, weights=outcome[ok], minlength=bins)
    present = np.flatnonzero(n)  # counted with numpy: called per judge × fit, a pandas group-by cost 0.1 s
    out = pd.DataFrame(
        {
            "bin": present,
            "n": n[present],
            "n_wins": np.round(wins[present]).astype(np.int64),
            "mean_predicted": np.bincount(which, weights=prob[ok], minlength=bins)[present] / n[present],
            "observed_rate": wins[present] / n[present],
        }
    )
    out["observed_lo"], out["observed_hi"] = exact_interval(out["n_wins"], out["n"], level)
    return out


def ece_interval(
    prob: np.ndarray, outcome: np.ndarray, bins: int = BINS, level: float = LEVEL
) -> tuple[float, float]:
    """A `level` interval for the calibration error on these bins, Σ_b (n_b / n) |θ_b − mean prob_b| with θ_b
    the bin's true expert-win rate: each non-empty bin's θ_b gets an exact interval at 1 − (1 − level) / B
    (Bonferroni over the B bins, so all hold together with probability ≥ level), and the bounds are the
    smallest and largest error over θ_b in them. Conservative, valid at any n; the predictions are held
    fixed (after calibration: the cross-fitted map). NaN without a verdict."""
    return ece_interval_of_bins(reliability_bins(prob, outcome, bins), level)


def ece_interval_of_bins(table: pd.DataFrame, level: float = LEVEL) -> tuple[float, float]:
    """`ece_interval` from the bins `reliability_bins` made."""
    if table.empty:
        return float("nan"), float("nan")
    lo, hi = exact_interval(table["n_wins"], table["n"], 1.0 - (1.0 - level) / len(table))
    p, w = table["mean_predicted"].to_numpy(), (table["n"] / table["n"].sum()).to_numpy()
    near = np.clip(lo - p, 0.0, None) + np.clip(p - hi, 0.0, None)  # 0 when the bin's mean lies inside
    far = np.maximum(np.abs(lo - p), np.abs(hi - p))
    return float((w * near).sum()), float((w * far).sum())


def shared_items(frame: pd.DataFrame) -> pd.DataFrame:
    """The labelled, scored rows of `frame` on the items every judge × mode of their dimension has: the
    table's rows compare judges, so each rests on the same items (issue 32 item 5; `n` says how many)."""
    frame = frame.loc[frame["y"].notna().to_numpy() & frame["yhat"].notna().to_numpy()]
    rater = frame["judge"].astype(str) + "\x00" + frame["mode"].astype(str)
    items = [frame[c] for c in [*ITEM, "dimension"]]
    count = rater.groupby(items).transform("nunique")
    need = rater.groupby(frame["dimension"]).transform("nunique")
    return frame.loc[count.to_numpy() == need.to_numpy()]


def calibration_table(
    cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference", seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per judge × mode × dimension: MAE and ECE before / after; the reliability bins before / after), every
    judge × mode of a dimension on the same expert-labelled items (`shared_items`)."""
    if humans is None or humans.empty:
        return pd.DataFrame(columns=COLUMNS), pd.DataFrame()
    scores, verdicts = labels_and_predictions(cands, humans, reference)
    scores, verdicts = shared_items(scores), shared_items(verdicts)
    rows, bins = [], []
    by_key = dict(
        iter(verdicts.dropna(subset=["y"]).astype({k: str for k in KEYS}).groupby(KEYS, sort=False))
    )
    for key, part in scores.groupby(KEYS, sort=True):
        x, y = part["yhat"].to_numpy(float), part["y"].to_numpy(float)
        after = cross_fitted(x, y, seed=seed)
        row = dict(zip(KEYS, key, strict=True)) | {
            "n": len(x),
            "mae_before": float(np.mean(np.abs(x - y))),
            "mae_after": float(np.nanmean(np.abs(after - y))) if np.isfinite(after).any() else np.nan,
            "n_verdicts": 0,
            **{c: np.nan for c in COLUMNS if c.startswith("ece_")},
        }
        v = by_key.get(tuple(map(str, key)), verdicts.iloc[:0])
        if len(v) >= 2:
            won, diff, truth = v["yhat"].to_numpy(float), v["diff"].to_numpy(float), v["y"].to_numpy(float)
            prob = cross_fitted(diff, truth, seed=seed)
            row |= {"n_verdicts": len(v)}
            for name, p in (("before", won), ("after", prob)):  # the bins once: ECE, its bounds, the diagram
                table = reliability_bins(p, truth)
                lo, hi = ece_interval_of_bins(table)
                row |= {f"ece_{name}": ece_of_bins(table), f"ece_{name}_lo": lo, f"ece_{name}_hi": hi}
                bins.append(table.assign(**dict(zip(KEYS, key, strict=True)), fit=name))
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
            x, y = part["yhat"].to_numpy(float), part["y"].to_numpy(float)
            out["score_calibrated"] = isotonic_predict(x[rated], y[rated], x)
        else:
            out["score_calibrated"] = np.nan
        frames.append(out)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _calibration(s: Inputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The calibration table and its reliability bins, computed once per study."""
    both: tuple[pd.DataFrame, pd.DataFrame] = s.shared(
        "calibration", lambda: calibration_table(s.cands, s.humans, s.reference)
    )
    return both


def _diagram(t: Tables, _: Inputs) -> tuple[pd.DataFrame] | None:
    bins = CALIBRATION_BINS.of(t)
    return (bins,) if bins is not None and len(bins) else None


CALIBRATION: TableSpec = TableSpec(
    "calibration",
    lambda s, _: _calibration(s)[0] if s.has_humans else None,
    tuple(COLUMNS),
    section=Section.calibration,
    figure=FigureSpec("calibration", "reliability_diagram", _diagram),
    card=CardField(
        "Calibration to the human scale (error before / after a cross-fitted isotonic map)",
        tuple(COLUMNS[1:]),
        NO_HUMANS_CARD,
        order=100,
    ),
    meanings={
        "mae_before": "mean |judge score − experts' mean| on the expert-rated candidates",
        "mae_after": "the same after the cross-fitted isotonic calibration",
        "n_verdicts": "expert-rated pairs with a strict majority",
        "ece_before": "expected calibration error (10 bins) of the judge's 0/1 win verdict against the experts' majority",
        "ece_after": "the same for the cross-fitted calibrated probability of an expert win",
    },
)
CALIBRATION_BINS: TableSpec = TableSpec(
    "calibration_bins",
    lambda s, _: _calibration(s)[1] if s.has_humans else None,
    ("bin", "n", "mean_predicted", "observed_rate"),
    meanings={
        "bin": "probability bin (tenths)",
        "mean_predicted": "mean predicted probability in the bin",
        "observed_rate": "share of expert wins in the bin",
        "n_wins": "expert wins in the bin",
        "fit": "before or after calibration",
    },
)
