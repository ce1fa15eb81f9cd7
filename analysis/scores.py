"""Candidate scores, best-of-K and per-judge score summaries (DESIGN.md, "Statistics").

A judge's score for a candidate is the mean over its samples; unscored samples (NaN score or parse_ok False)
are dropped, and a candidate with no scored sample is left out. Best-of-K keeps, per generator and instance,
the best candidate on each dimension: the max, or the min where lower is better.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.intervals import t_interval

#: Dimensions on which a lower score is better (the rubric asks how source-bound / how diagnostic a text is).
LOWER_IS_BETTER: frozenset[str] = frozenset({"source_boundedness", "diagnostic_framing"})

CANDIDATE_KEYS: tuple[str, ...] = ("judge", "mode", "instance_id", "candidate_id", "source", "dimension")
BEST_KEYS: tuple[str, ...] = ("judge", "mode", "instance_id", "source", "dimension")
SUMMARY_KEYS: tuple[str, ...] = ("judge", "mode", "source", "dimension")


def direction(dimensions: pd.Series, lower_is_better: Iterable[str] = LOWER_IS_BETTER) -> np.ndarray:
    """+1 where higher is better, -1 where lower is better, aligned with `dimensions`.

    Multiplying a score by its direction turns every dimension into higher-is-better.
    """
    lower = frozenset(lower_is_better)
    if isinstance(dimensions.dtype, pd.CategoricalDtype):
        cats = dimensions.cat.categories
        per_cat = np.where(np.isin(np.asarray(cats, dtype=object), list(lower)), -1.0, 1.0)
        codes = dimensions.cat.codes.to_numpy()
        return np.where(codes >= 0, per_cat[codes], 1.0)
    return np.where(dimensions.isin(list(lower)).to_numpy(), -1.0, 1.0)


def map_distinct(series: pd.Series, fn: Callable[[Any], Any]) -> np.ndarray:
    """`fn` applied once per distinct value of `series` (fast on categoricals); NaN where missing."""
    codes, uniques = pd.factorize(series)
    mapped = np.array([fn(u) for u in uniques] + [np.nan], dtype=object)
    return mapped[codes]  # code -1 (missing) picks the trailing NaN


def usable_mask(results: pd.DataFrame) -> np.ndarray:
    """Rows whose answer parsed (parse_ok not False; a table without parse_ok is all usable)."""
    if "parse_ok" not in results:
        return np.ones(len(results), dtype=bool)
    return results["parse_ok"].fillna(True).astype(bool).to_numpy()


def scored_rows(results: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows that carry a usable score (score not NaN, parse_ok not False), optionally only `columns`."""
    ok = results["score"].notna().to_numpy() & usable_mask(results)
    return results.loc[ok, list(columns) if columns is not None else slice(None)]


def group_ids(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Group number of every row (groups numbered in the order of their key codes) and each group's first row.

    Works on category codes, so it is several times faster than a pandas groupby on many categorical keys;
    a missing key value is a group of its own.
    """
    codes, sizes = [], []
    for key in keys:
        col = frame[key]
        if isinstance(col.dtype, pd.CategoricalDtype):
            c, n = col.cat.codes.to_numpy().astype(np.int64), len(col.cat.categories)
        else:
            c, uniques = pd.factorize(col)
            n = len(uniques)
        codes.append(np.where(c < 0, n, c))
        sizes.append(n + 1)
    combined, size = np.zeros(len(frame), dtype=np.int64), 1
    for c, n in zip(codes, sizes, strict=True):
        if size * n >= 2**62:  # re-number (keeping the order) before the packed key overflows
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)
            size = int(combined.max()) + 1
        combined, size = combined * n + c, size * n
    if size <= 8 * len(combined) + 1_000_000:  # dense re-numbering: cheaper than hashing
        seen = np.zeros(size, dtype=bool)
        seen[combined] = True
        ids = (np.cumsum(seen) - 1)[combined]
    else:
        ids = np.unique(combined, return_inverse=True)[1]
    first = np.empty(ids.max() + 1 if len(ids) else 0, dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids))[::-1]  # reversed, so the first occurrence is written last
    return ids, first


def split_groups(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple, np.ndarray]]:
    """(key values, row positions) of every group of `frame` by `keys`, in `group_ids` order."""
    ids, first = group_ids(frame, keys)
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(len(first) + 1))
    key_values = frame[list(keys)].iloc[first].itertuples(index=False, name=None)
    return [(key, order[bounds[g] : bounds[g + 1]]) for g, key in enumerate(key_values)]


def candidate_scores(results: pd.DataFrame, keys: Sequence[str] = CANDIDATE_KEYS) -> pd.DataFrame:
    """One row per judged candidate: `score` (mean of scored samples), `sd`, `n_scored`.

    Pairwise rows have no score and so never appear here.
    """
    rows = scored_rows(results, [*keys, "score"])
    ids, first = group_ids(rows, keys)
    score = rows["score"].to_numpy(dtype=float)
    n = np.bincount(ids, minlength=len(first))
    mean = np.bincount(ids, weights=score, minlength=len(first)) / n
    squares = np.bincount(ids, weights=(score - mean[ids]) ** 2, minlength=len(first))
    with np.errstate(all="ignore"):
        sd = np.where(n > 1, np.sqrt(squares / (n - 1)), np.nan)
    out = rows.iloc[first][list(keys)].reset_index(drop=True)
    return out.assign(score=mean, sd=sd, n_scored=n)


def best_of_k(
    cands: pd.DataFrame,
    lower_is_better: Iterable[str] = LOWER_IS_BETTER,
    keys: Sequence[str] = BEST_KEYS,
) -> pd.DataFrame:
    """Best candidate score per `keys` (generator × instance × dimension × judge × mode): `best`, `k`.

    `k` is how many scored candidates the best was taken over (1 for the reference).
    """
    signed = cands["score"].to_numpy() * direction(cands["dimension"], lower_is_better)
    frame = cands[list(keys)].assign(_signed=signed)
    grouped = frame.groupby(list(keys), observed=True, sort=False)["_signed"]
    out = grouped.agg(best="max", k="size").reset_index()
    out["best"] = out["best"] * direction(out["dimension"], lower_is_better)
    return out


def score_summary(cands: pd.DataFrame, by: Sequence[str] = SUMMARY_KEYS, level: float = 0.95) -> pd.DataFrame:
    """Mean ± sd of candidate scores per judge × mode × source × dimension, with a t-interval for the mean."""
    grouped = cands.groupby(list(by), observed=True, sort=True)["score"]
    out = grouped.agg(n="size", mean="mean", sd="std").reset_index()
    out["ci_lo"], out["ci_hi"] = t_interval(out["mean"], out["sd"], out["n"], level)
    return out
