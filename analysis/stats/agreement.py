"""Agreement between raters — judges and humans — on winners and on ordinal scores (docs/statistics.md).

Point estimates come from statsmodels, scipy and the `krippendorff` package. Their bootstrap CIs resample
items through the category counts (see core.intervals), using the vectorised formulas in
analysis.stats.reliability, which the tests check against the libraries to 1e-9.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import krippendorff
import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats import inter_rater

from analysis.stats.reliability import (
    Level,
    alpha_with_ci,
    disagreement_weights,
    kappa_from_tables,
    kendall_from_table,
    spearman_from_table,
)
from core.intervals import (
    fisher_z_interval,
    percentile_ci,
    resample_counts,
    trusted_bootstrap,
    wilson_interval,
)

Weights = Literal["linear", "quadratic"] | None
#: One rater's labels, item by item: a list, a pandas Series or a NumPy array (all go through np.asarray).
Ratings = Sequence[Any] | np.ndarray
_PAIR_STATS = ("percent", "kappa", "kappa_w", "rho", "tau")


def _paired(a: Ratings, b: Ratings) -> tuple[pd.Series, pd.Series]:
    """Both series, restricted to the items that both raters rated."""
    xa, xb = np.asarray(a), np.asarray(b)
    if xa.dtype.kind in "iufb" and xb.dtype.kind in "iufb":
        xa, xb = xa.astype(float), xb.astype(float)
        keep = ~(np.isnan(xa) | np.isnan(xb))
        return pd.Series(xa[keep]), pd.Series(xb[keep])
    sa, sb = pd.Series(np.asarray(a, dtype=object)), pd.Series(np.asarray(b, dtype=object))
    keep = (sa.notna() & sb.notna()).to_numpy()
    sa, sb = sa[keep].reset_index(drop=True), sb[keep].reset_index(drop=True)
    if pd.api.types.is_numeric_dtype(sa.infer_objects()) and pd.api.types.is_numeric_dtype(
        sb.infer_objects()
    ):
        return sa.astype(float), sb.astype(float)
    return sa.astype(str), sb.astype(str)


def _table(sa: pd.Series, sb: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    cats = np.unique(np.concatenate([sa.to_numpy(), sb.to_numpy()]))
    k = len(cats)
    ia, ib = np.searchsorted(cats, sa.to_numpy()), np.searchsorted(cats, sb.to_numpy())
    return np.bincount(ia * k + ib, minlength=k * k).reshape(k, k), cats


def confusion(a: Ratings, b: Ratings) -> tuple[np.ndarray, np.ndarray]:
    """Square count table (rows: a, columns: b) over the sorted union of both raters' categories."""
    return _table(*_paired(a, b))


def percent_agreement(a: Ratings, b: Ratings) -> float:
    """Share of items (rated by both) on which the two raters give the same value."""
    table, _ = confusion(a, b)
    return float(np.trace(table) / table.sum()) if table.sum() else float("nan")


def _kappa_weights(cats: np.ndarray) -> np.ndarray:
    """Category scores for weighted κ: the values themselves when numeric, else their rank."""
    return cats.astype(float) if cats.dtype.kind in "if" else np.arange(len(cats), dtype=float)


def _kappa(table: np.ndarray, cats: np.ndarray, weights: Weights) -> float:
    if len(cats) < 2:
        return float("nan")
    if weights is None:
        return float(inter_rater.cohens_kappa(table, return_results=False))
    wt = _kappa_weights(cats)
    return float(inter_rater.cohens_kappa(table, weights=wt, wt=weights, return_results=False))


def cohen_kappa(a: Ratings, b: Ratings, weights: Weights = None) -> float:
    """Cohen's κ (statsmodels); `weights` "linear"/"quadratic" weigh disagreements by the distance between the
    numeric values (or ranks, for labels). NaN when fewer than two categories occur."""
    return _kappa(*confusion(a, b), weights)


def fleiss_kappa(ratings: np.ndarray | pd.DataFrame, categories: Sequence[object] | None = None) -> float:
    """Fleiss' κ over items × raters category labels (statsmodels); items with a missing rating are dropped,
    since Fleiss' κ needs the same number of raters per item. `categories` fixes the category set (NovBench's
    A / B), so a category nobody chose still counts; with one category only, κ is NaN (undefined)."""
    frame = pd.DataFrame(ratings).dropna(axis=0, how="any")
    if len(frame) == 0:
        return float("nan")
    values = frame.to_numpy()
    if categories is None:
        table, _ = inter_rater.aggregate_raters(values)
    else:
        table = np.stack([(values == c).sum(axis=1) for c in categories], axis=1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one category only: 0 / 0
        return float(inter_rater.fleiss_kappa(table, method="fleiss"))


def krippendorff_alpha(ratings: np.ndarray | pd.DataFrame, level: Level = "ordinal") -> float:
    """Krippendorff's α over raters × items (NaN = missing), from the `krippendorff` package."""
    data = np.asarray(ratings, dtype=float)
    if np.unique(data[~np.isnan(data)]).size < 2 or ((~np.isnan(data)).sum(axis=0) >= 2).sum() == 0:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def _rank_corr(sa: pd.Series, sb: pd.Series, kind: str) -> float:
    if len(sa) < 2 or sa.dtype.kind not in "if":
        return float("nan")
    fn = stats.kendalltau if kind == "kendall" else stats.spearmanr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: scipy warns and returns NaN
        return float(fn(sa.to_numpy(), sb.to_numpy())[0])


def spearman(a: Ratings, b: Ratings) -> float:
    """Spearman's ρ over the items both raters rated (scipy)."""
    return _rank_corr(*_paired(a, b), "spearman")


def kendall(a: Ratings, b: Ratings) -> float:
    """Kendall's τ-b over the items both raters rated (scipy)."""
    return _rank_corr(*_paired(a, b), "kendall")


def pair_agreement(
    a: Ratings, b: Ratings, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Every two-rater statistic with its CI: percent (Wilson), κ and quadratic κ (bootstrap over items,
    shown only where `core.intervals.trusted_bootstrap` trusts it, else NaN and `n` says why), ρ and τ
    (Fisher z). Ordinal statistics are NaN for non-numeric labels. All come from the items' confusion
    table, so the cost does not grow with the number of items."""
    sa, sb = _paired(a, b)
    table, cats = _table(sa, sb)
    n = int(table.sum())
    if n == 0:
        return {"n": 0, **{f"{k}{s}": float("nan") for k in _PAIR_STATS for s in ("", "_lo", "_hi")}}
    numeric = cats.dtype.kind in "if"
    out: dict[str, float] = {"n": n, "percent": np.trace(table) / n}
    cells = np.flatnonzero(table)  # empty cells stay empty in every replicate: draw only the others
    boot = np.zeros((n_boot, table.size), dtype=np.int64)
    boot[:, cells] = resample_counts(table.reshape(-1)[cells], n_boot, seed)
    boot = boot.reshape(n_boot, *table.shape)
    lo, hi = wilson_interval(np.trace(table), n, level)  # a rate: Wilson at any n (core.intervals)
    out["percent_lo"], out["percent_hi"] = float(lo), float(hi)
    kappas: tuple[tuple[str, Weights], ...] = (("kappa", None), ("kappa_w", "quadratic"))
    for key, wt in kappas:
        out[key] = out[f"{key}_lo"] = out[f"{key}_hi"] = np.nan
        if len(cats) >= 2 and (wt is None or numeric):
            out[key] = _kappa(table, cats, wt)
            lo, hi = percentile_ci(
                kappa_from_tables(boot, disagreement_weights(_kappa_weights(cats), wt)), level
            )
            lo, hi = trusted_bootstrap(lo, hi, n)  # too few items or all replicates equal: no CI
            out[f"{key}_lo"], out[f"{key}_hi"] = float(lo), float(hi)
    for key, kind, fn in (("rho", "spearman", spearman_from_table), ("tau", "kendall", kendall_from_table)):
        out[key] = fn(table) if numeric else np.nan  # = scipy's on the items (tests check to 1e-9)
        out[f"{key}_lo"], out[f"{key}_hi"] = fisher_z_interval(out[key], n, kind, level)
    return {k: int(v) if k == "n" else float(v) for k, v in out.items()}


def _wide(frame: pd.DataFrame, rater_col: str, item_cols: Sequence[str], value_col: str) -> pd.DataFrame:
    keys = [*item_cols, rater_col]
    if frame.duplicated(keys).any():
        raise ValueError(f"{value_col!r} must have one value per item and rater; aggregate first")
    return frame.set_index(keys)[value_col].unstack(rater_col)


def agreement_table(
    frame: pd.DataFrame,
    rater_col: str,
    item_cols: Sequence[str],
    value_col: str,
    level: Level = "ordinal",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per rater pair (n, percent, κ, quadratic κ, ρ, τ, each with a 95% CI), plus a row
    ``(all)``/``(all)`` with Krippendorff's α (`level`) over all raters (n = items rated by at least two).

    `frame` is long: one `value_col` per rater and item (the columns `item_cols` identify an item)."""
    wide = _wide(frame, rater_col, item_cols, value_col)
    raters = sorted(wide.columns, key=str)
    numeric = all(pd.api.types.is_numeric_dtype(wide[r]) for r in raters)
    level = level if numeric else "nominal"
    rows = []
    for ra, rb in itertools.combinations(raters, 2):
        rows.append(
            {
                "rater_a": ra,
                "rater_b": rb,
                **pair_agreement(wide[ra].to_numpy(), wide[rb].to_numpy(), n_boot, seed),
            }
        )
    everyone = {"rater_a": "(all)", "rater_b": "(all)", **_alpha_cols(wide[raters], level, n_boot, seed)}
    everyone["n"] = int((wide[raters].notna().sum(axis=1) >= 2).sum())
    out = pd.DataFrame([*rows, everyone])
    out.insert(2, "n_raters", [2] * len(rows) + [len(raters)])
    return out


def _alpha_cols(wide: pd.DataFrame, level: Level, n_boot: int, seed: int) -> dict[str, float]:
    values = wide.to_numpy(dtype=object if level == "nominal" else float)
    if level == "nominal":  # labels: one shared code per label across raters
        codes, _ = pd.factorize(pd.Series(values.ravel()))
        values = np.where(codes >= 0, codes, np.nan).reshape(values.shape)
    alpha, lo, hi = alpha_with_ci(values.astype(float).T, level, n_boot, seed)
    return {"alpha": alpha, "alpha_lo": lo, "alpha_hi": hi}
