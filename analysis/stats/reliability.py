"""Vectorised κ, Fleiss' κ and Krippendorff's α for bootstrap replicates.

The libraries compute one estimate at a time; a bootstrap needs thousands. These formulas work on count
tables with a leading replicate axis. Each is checked against statsmodels / krippendorff to 1e-9 in
tests/test_analysis_reliability.py. Items are grouped into rating *patterns* (identical count vectors), and
a replicate is a multinomial draw over patterns — the same as resampling items with replacement.
"""

from __future__ import annotations

from typing import Literal

import krippendorff
import numpy as np
from statsmodels.stats import inter_rater

from core.intervals import percentile_ci, resample_counts, trusted_bootstrap

Level = Literal["nominal", "ordinal", "interval"]

#: Above this many cells of the package's dense (units × values × values) array, α's point estimate comes
#: from the pattern formula below instead (equal to the package's to 1e-9, see the tests), which is cheaper.
_MAX_DENSE_CELLS = 1_000_000


def disagreement_weights(scores: np.ndarray, weights: Literal["linear", "quadratic"] | None) -> np.ndarray:
    """K × K disagreement weights: 1 off the diagonal (unweighted), |i − j| or (i − j)² in category scores."""
    scores = np.asarray(scores, dtype=float)
    diff = np.abs(scores[:, None] - scores[None, :])
    if weights is None:
        return (diff > 0).astype(float)
    return diff if weights == "linear" else diff**2


def kappa_from_tables(tables: np.ndarray, wmat: np.ndarray) -> np.ndarray:
    """Weighted Cohen's κ = 1 − Σ w·O / Σ w·E for count tables of shape (..., K, K)."""
    tables = np.asarray(tables, dtype=float)
    n = tables.sum(axis=(-2, -1), keepdims=True)
    with np.errstate(all="ignore"):
        p = tables / n
        expected = p.sum(axis=-1)[..., :, None] * p.sum(axis=-2)[..., None, :]
        return 1.0 - (wmat * p).sum(axis=(-2, -1)) / (wmat * expected).sum(axis=(-2, -1))


def spearman_from_table(table: np.ndarray) -> float:
    """Spearman's ρ from a count table of two discrete ratings: Pearson's r of the mid-ranks (as scipy)."""
    table = np.asarray(table, dtype=float)
    n = table.sum()
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    rank_r = np.cumsum(rows) - rows + (rows + 1) / 2  # mid-rank of each row category
    rank_c = np.cumsum(cols) - cols + (cols + 1) / 2
    dr, dc = rank_r - (rows @ rank_r) / n, rank_c - (cols @ rank_c) / n
    with np.errstate(all="ignore"):
        return float((dr @ table @ dc) / np.sqrt((rows @ dr**2) * (cols @ dc**2)))


def kendall_from_table(table: np.ndarray) -> float:
    """Kendall's τ-b from a count table of two ordered discrete ratings (as scipy's default)."""
    table = np.asarray(table, dtype=float)
    n = table.sum()
    # below_right[i, j] = Σ table[i' > i, j' > j]; below_left[i, j] = Σ table[i' > i, j' < j]
    tail = np.cumsum(np.cumsum(table[::-1, ::-1], axis=0), axis=1)[::-1, ::-1]
    below_right = np.zeros_like(table)
    below_right[:-1, :-1] = tail[1:, 1:]
    head = np.cumsum(np.cumsum(table[::-1, :], axis=0), axis=1)[::-1, :]
    below_left = np.zeros_like(table)
    below_left[:-1, 1:] = head[1:, :-1]
    concordant, discordant = (table * below_right).sum(), (table * below_left).sum()
    pairs = n * (n - 1) / 2
    ties_r = (table.sum(axis=1) * (table.sum(axis=1) - 1) / 2).sum()
    ties_c = (table.sum(axis=0) * (table.sum(axis=0) - 1) / 2).sum()
    with np.errstate(all="ignore"):
        return float((concordant - discordant) / np.sqrt((pairs - ties_r) * (pairs - ties_c)))


def value_counts(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(units × values) rating counts and the sorted values, from raters × units data with NaN missing."""
    data = np.asarray(data, dtype=float)
    mask = ~np.isnan(data)
    values = np.unique(data[mask])
    unit = np.broadcast_to(np.arange(data.shape[1]), data.shape)[mask]
    code = np.searchsorted(values, data[mask])
    v = len(values)
    counts = np.bincount(unit * v + code, minlength=data.shape[1] * v).reshape(data.shape[1], v)
    return counts, values


def _patterns(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct count vectors and how many units have each.

    Rows are packed into one integer (base = largest count + 1) when that fits in 62 bits, which is much
    faster than `np.unique(axis=0)`.
    """
    counts = np.asarray(counts, dtype=np.int64)
    base = int(counts.max()) + 1 if counts.size else 2
    if counts.shape[1] * np.log2(max(base, 2)) < 62:
        key = counts @ (base ** np.arange(counts.shape[1], dtype=np.int64))
        _, first, freq = np.unique(key, return_index=True, return_counts=True)
        return counts[first], freq
    return np.unique(counts, axis=0, return_counts=True)


def coincidences(patterns: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Krippendorff coincidence matrices (..., V, V) for `weights` (..., P) units per pattern (P, V)."""
    m = patterns.sum(axis=1).astype(float)
    per_unit = patterns[:, :, None] * patterns[:, None, :] - patterns[:, :, None] * np.eye(patterns.shape[1])
    per_unit = per_unit / (m - 1)[:, None, None]
    return np.tensordot(weights, per_unit, axes=([-1], [0]))


def alpha_from_coincidences(o: np.ndarray, values: np.ndarray, level: Level) -> np.ndarray:
    """α = 1 − Σ o·δ / Σ e·δ for coincidence matrices (..., V, V) (Krippendorff 2011)."""
    n_v = o.sum(axis=-2)
    n = n_v.sum(axis=-1)[..., None, None]
    e = (n_v[..., :, None] * n_v[..., None, :] - n_v[..., :, None] * np.eye(len(values))) / (n - 1)
    if level == "nominal":
        delta = 1.0 - np.eye(len(values))
    elif level == "interval":
        delta = (values[:, None] - values[None, :]) ** 2
    elif level == "ordinal":  # (Σ_{g=c..k} n_g − (n_c + n_k)/2)², written with cumulative sums
        cum = np.cumsum(n_v, axis=-1)
        delta = (cum[..., None, :] - cum[..., :, None] + (n_v[..., :, None] - n_v[..., None, :]) / 2) ** 2
    else:
        raise ValueError(f"level must be nominal, ordinal or interval, not {level!r}")
    with np.errstate(all="ignore"):
        return 1.0 - (o * delta).sum(axis=(-2, -1)) / (e * delta).sum(axis=(-2, -1))


def alpha_with_ci(
    data: np.ndarray, level: Level = "ordinal", n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> tuple[float, float, float]:
    """Krippendorff's α over raters × units (NaN missing) with a bootstrap CI over units (NaN below
    `core.intervals.BOOT_MIN_N` units with ≥ 2 ratings, see `alpha_from_counts`)."""
    counts, values = value_counts(data)
    return alpha_from_counts(counts, values, level, n_boot, seed, ci)


def alpha_from_counts(
    counts: np.ndarray,
    values: np.ndarray,
    level: Level = "ordinal",
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> tuple[float, float, float]:
    """α and its bootstrap CI from (units × values) rating counts; units with < 2 ratings add nothing.

    The estimate is the `krippendorff` package's, unless its dense array would exceed 1M cells; then the
    same formula as the bootstrap's (tested equal to the package to 1e-9) gives it at a fraction of the cost.
    The CI is shown only where `core.intervals.trusted_bootstrap` trusts it (≥ `BOOT_MIN_N` units with ≥ 2
    ratings, not degenerate), else NaN: a handful of units' replicates say nothing about sampling error.
    """
    counts = counts[counts.sum(axis=1) >= 2]
    present = counts.sum(axis=0) > 0
    counts, values = counts[:, present], np.asarray(values)[present]
    if len(values) < 2 or len(counts) == 0:
        return float("nan"), float("nan"), float("nan")
    patterns, freq = _patterns(counts)
    if len(counts) * len(values) ** 2 <= _MAX_DENSE_CELLS:
        point = float(
            krippendorff.alpha(value_counts=counts, value_domain=values, level_of_measurement=level)
        )
    else:
        point = float(alpha_from_coincidences(coincidences(patterns, freq.astype(float)), values, level))
    boot = resample_counts(freq, n_boot, seed).astype(float)
    lo, hi = percentile_ci(alpha_from_coincidences(coincidences(patterns, boot), values, level), ci)
    lo, hi = trusted_bootstrap(lo, hi, len(counts))  # too few units or all replicates equal: no CI
    return point, float(lo), float(hi)


def fleiss_from_patterns(patterns: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Fleiss' κ for `weights` (..., P) items per category-count pattern (P, K), all rows with m raters."""
    m = patterns[0].sum()
    n_items = weights.sum(axis=-1)
    p_j = (weights @ patterns) / (n_items[..., None] * m)
    p_i = ((patterns**2).sum(axis=1) - m) / (m * (m - 1))
    p_bar = (weights @ p_i) / n_items
    p_e = (p_j**2).sum(axis=-1)
    with np.errstate(all="ignore"):
        return (p_bar - p_e) / (1.0 - p_e)


def fleiss_with_ci(
    ratings: np.ndarray, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> tuple[float, float, float, int]:
    """Fleiss' κ (statsmodels) over items × raters with a bootstrap CI over items, and n items.

    Items with a missing rating are dropped (Fleiss' κ assumes the same raters per item). The CI is NaN
    where `core.intervals.trusted_bootstrap` does not trust it (< `BOOT_MIN_N` items, or degenerate).
    """
    ratings = np.asarray(ratings, dtype=float)
    ratings = ratings[~np.isnan(ratings).any(axis=1)]
    if len(ratings) == 0 or ratings.shape[1] < 2 or np.unique(ratings).size < 2:
        return float("nan"), float("nan"), float("nan"), len(ratings)
    table, _ = inter_rater.aggregate_raters(ratings)
    point = float(inter_rater.fleiss_kappa(table, method="fleiss"))
    patterns, freq = _patterns(table)
    boot = resample_counts(freq, n_boot, seed).astype(float)
    lo, hi = percentile_ci(fleiss_from_patterns(patterns, boot), ci)
    lo, hi = trusted_bootstrap(lo, hi, len(ratings))  # too few items or all replicates equal: no CI
    return point, float(lo), float(hi), len(ratings)
