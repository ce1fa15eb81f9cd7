"""Confidence intervals shared by the analysis modules.

Bootstrap CIs here resample *units* (instances, items) with replacement, vectorised. Every statistic we
bootstrap is a function of how many units fall into each of a few categories (win/tie/loss, a cell of a
confusion table, a pattern of ratings on one item), and resampling N units with replacement makes those
category counts exactly Multinomial(N, observed shares). So one multinomial draw per replicate replaces an
N-long index vector: the same bootstrap distribution, at a cost independent of N.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import special
from statsmodels.stats.proportion import proportion_confint

from core.choices import positive_int as positive_int  # re-exported: the commands' --n-boot type

LEVEL = 0.95
#: The fewest units a percentile bootstrap CI is shown on. Below it, or when every replicate gives the same
#: value (all wins, one category), the replicates' spread says nothing about the sampling error (n = 3 all
#: wins gave [1.000, 1.000]); such a CI is left out (NaN) and the table's n says why. Rates never need it:
#: they get Wilson or exact intervals at any n (issue 32 item 6).
BOOT_MIN_N = 20


def resample_counts(
    counts: np.ndarray, n_boot: int, seed: int | list[int] | np.random.Generator = 0
) -> np.ndarray:
    """Bootstrap replicates of category counts: shape (n_boot, *counts.shape).

    `counts[..., c]` is how many units of one group fall into category c. Groups with no unit give zeros.
    With several groups and an integer seed each group draws from its own stream, seeded by the seed and its
    counts: identical groups (two judges with the same outcomes) get identical replicates and CIs, and a
    group's CI does not move when another group is added or removed.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.ndim > 1 and not isinstance(seed, np.random.Generator):
        flat = counts.reshape(-1, counts.shape[-1])
        draws = np.empty((n_boot, *flat.shape), dtype=np.int64)
        unique, inverse = np.unique(flat, axis=0, return_inverse=True)
        base = seed if isinstance(seed, list) else [seed]
        for i, row in enumerate(unique):
            draws[:, inverse.ravel() == i] = resample_counts(row, n_boot, [*base, *row.tolist()])[:, None]
        return draws.reshape(n_boot, *counts.shape)
    rng = np.random.default_rng(seed)
    n = counts.sum(axis=-1)
    safe = np.where(n[..., None] > 0, counts, 1)
    p = safe / safe.sum(axis=-1, keepdims=True)
    draws = rng.multinomial(n, p, size=(n_boot, *counts.shape[:-1]))
    return draws


def percentile_ci(boot: np.ndarray, level: float = LEVEL, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of bootstrap replicates along `axis`, ignoring undefined (NaN) replicates."""
    tail = (1.0 - level) / 2.0
    boot = np.asarray(boot, dtype=float)
    if boot.shape[axis] == 0:
        nan = np.full(tuple(np.delete(np.array(boot.shape), axis)), np.nan)
        return nan, nan.copy()
    if not np.isnan(boot).any():
        lo, hi = np.quantile(boot, [tail, 1.0 - tail], axis=axis)
        return lo, hi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN, which is what we want
        lo, hi = np.nanquantile(boot, [tail, 1.0 - tail], axis=axis)
    return lo, hi


def t_interval(
    mean: npt.ArrayLike, sd: npt.ArrayLike, n: npt.ArrayLike, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Student-t interval for a mean (NaN where n < 2)."""
    mean, sd, n = (np.asarray(x, dtype=float) for x in (mean, sd, n))
    with np.errstate(all="ignore"):
        half = special.stdtrit(np.where(n > 1, n - 1, np.nan), 0.5 + level / 2.0) * sd / np.sqrt(n)
    return mean - half, mean + half


def wilson_interval(
    successes: npt.ArrayLike, n: npt.ArrayLike, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval for a proportion (statsmodels); NaN where n == 0."""
    successes, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    safe = np.where(n > 0, n, 1.0)
    lo, hi = proportion_confint(successes, safe, alpha=1.0 - level, method="wilson")
    bad = n <= 0
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def exact_interval(
    successes: npt.ArrayLike, n: npt.ArrayLike, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Clopper–Pearson (exact binomial) interval for a proportion (statsmodels' "beta"); NaN where n == 0.
    Conservative: it covers at least `level` at every n, where a few units must not read as certain."""
    successes, n = np.asarray(successes, dtype=float), np.asarray(n, dtype=float)
    safe = np.where(n > 0, n, 1.0)
    lo, hi = proportion_confint(successes, safe, alpha=1.0 - level, method="beta")
    bad = n <= 0
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def trusted_bootstrap(
    lo: npt.ArrayLike, hi: npt.ArrayLike, n: npt.ArrayLike, min_n: int = BOOT_MIN_N
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap bounds where they can be trusted, NaN elsewhere: at least `min_n` units and a
    non-degenerate interval (hi > lo). See `BOOT_MIN_N`."""
    lo, hi, n = (np.asarray(x, dtype=float) for x in (lo, hi, n))
    with np.errstate(invalid="ignore"):
        ok = (n >= min_n) & (hi > lo)
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def fisher_z_interval(r: float, n: int, kind: str = "spearman", level: float = LEVEL) -> tuple[float, float]:
    """CI of a rank correlation through Fisher's z.

    Standard errors: Bonett & Wright (2000) for Spearman, sqrt((1 + r^2/2) / (n - 3)); Fieller et al. (1957)
    for Kendall, sqrt(0.437 / (n - 4)).
    """
    if not np.isfinite(r) or n < 5:
        return float("nan"), float("nan")
    se = np.sqrt(0.437 / (n - 4)) if kind == "kendall" else np.sqrt((1 + r * r / 2) / (n - 3))
    z = np.arctanh(np.clip(r, -0.999999999, 0.999999999))
    q = special.ndtri(0.5 + level / 2.0)
    return float(np.tanh(z - q * se)), float(np.tanh(z + q * se))


def mean_ci(
    values: Iterable[float], n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float, int]:
    """(mean, CI low, CI high, n) with a seeded percentile bootstrap; NaNs are dropped first."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=np.float64)
    if x.size == 0:
        return math.nan, math.nan, math.nan, 0
    boots = x[np.random.default_rng(seed).integers(0, x.size, (n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return float(x.mean()), float(lo), float(hi), int(x.size)


def grouped_mean_ci(
    frame: pd.DataFrame,
    by: Sequence[str],
    columns: Mapping[str, str],
    count: str,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per `by` group (one overall row when `by` is empty): its size as `count` and, for each
    column -> label, ``<label>``, ``<label>_lo``, ``<label>_hi`` (`mean_ci`) and ``<label>_n``."""
    by = list(by)
    groups = frame.groupby(by, sort=True, dropna=False) if by else [((), frame)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(by, key, strict=True)) | {count: len(g)}
        for col, label in columns.items():
            m, lo, hi, n = mean_ci(g[col], n_boot=n_boot, seed=seed)
            row |= {label: m, f"{label}_lo": lo, f"{label}_hi": hi, f"{label}_n": n}
        rows.append(row)
    return pd.DataFrame(rows)
