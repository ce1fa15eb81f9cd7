"""EchoReview's randomized pairwise win rate (seed paper Sec. 3.3) from `review_pairwise` results rows.

The pairwise mode asks the judge about every (generated review, other review) pair in both presentation
orders; each results row holds the verdict mapped back to the candidate (``preference``: ``a`` = the
candidate wins, ``b`` = the other review wins, ``tie``). A *comparison* is one (judge, instance, candidate,
other, dimension, sample); its outcome under two protocols:

* ``random order``: the verdict of one presentation order drawn per comparison with a seeded generator —
  the judge sees the pair once, in random order, as in EchoReview;
* ``both orders``: the verdict when both orders agree; a flip (the orders disagree) counts as a tie.

Per generator pair (the candidate's source vs the other review's source), judge and dimension: win / tie /
loss rates with 95% bootstrap CIs that resample review pairs (a pair's samples and orders are one cluster),
and the position-flip count (comparisons whose two orders disagree, out of those with both orders scored).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.echoreview.rows import present, refuse_duplicates, split_runs
from analysis.stats.modes import kinds_by_mode, modes_of
from core.intervals import percentile_ci
from core.modes import ModeKind

OUTCOME = {"a": 1, "tie": 0, "b": -1}
COMPARISON_KEYS: tuple[str, ...] = (
    "judge",
    "instance_id",
    "candidate_id",
    "source",
    "other_id",
    "dimension",
    "sample_idx",
)
PROTOCOLS: tuple[str, ...] = ("random order", "both orders")


def _opponents(results: pd.DataFrame, pairs: pd.DataFrame) -> pd.Series:
    """The other review's source: from its own rows when it was judged in the same instance, else
    "reference" (the pairwise mode's other review is the instance's reference). Keyed by (instance,
    candidate): candidate ids are only unique within an instance."""
    ids = ["instance_id", "candidate_id"]
    known = results[[*ids, "source"]].astype(str).drop_duplicates(ids)
    wanted = pairs[["instance_id", "other_id"]].astype(str).set_axis(ids, axis=1)
    found = wanted.merge(known, on=ids, how="left")["source"]  # a left merge on unique keys keeps the rows
    return pd.Series(found.fillna("reference").to_numpy(), index=pairs.index)


def comparisons(results: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """One row per comparison: the verdict in each order (``ab``, ``ba``: 1 / 0 / −1 or NaN), ``flip``,
    ``opponent`` and the outcome under each protocol (the module docstring). Runs of one judge that judged
    the same comparison are separate raters (``judge@run_id``); a verdict recorded twice in one run is a
    ValueError naming it (`analysis.echoreview.rows`), never one copy silently kept."""
    pair_modes = modes_of(kinds_by_mode(results), ModeKind.pair)  # both orders, a preference
    rows = split_runs(results[results["mode"].astype(str).isin(pair_modes)], (*COMPARISON_KEYS, "order"))
    refuse_duplicates(rows, (*COMPARISON_KEYS, "order"), "pairwise rows")  # else one copy would be dropped
    rows = rows[rows["preference"].isin(list(OUTCOME))]
    keys = present(rows, COMPARISON_KEYS)
    coded = rows.assign(_v=rows["preference"].astype(str).map(OUTCOME), order=rows["order"].astype(str))
    wide = coded.pivot_table(index=keys, columns="order", values="_v", aggfunc="first", observed=True)
    wide = wide.reindex(columns=["ab", "ba"]).reset_index()
    wide.columns.name = None
    both = wide["ab"].notna() & wide["ba"].notna()
    wide["flip"] = both & (wide["ab"] != wide["ba"])
    wide["both_known"] = both
    pick_ab = np.random.default_rng(seed).random(len(wide)) < 0.5
    first = np.where(pick_ab, wide["ab"], wide["ba"])
    other = np.where(pick_ab, wide["ba"], wide["ab"])
    wide["random order"] = np.where(np.isnan(first), other, first)  # only one order scored: that one
    wide["both orders"] = np.where(both, np.where(wide["flip"], 0, wide["ab"]), np.nan)
    wide["opponent"] = _opponents(results, wide).to_numpy()
    for col in ("source", "dimension", "judge"):
        if col in wide.columns:
            wide[col] = wide[col].astype(str)
    return wide


#: One review pair, the bootstrap's unit.
PAIR_KEYS: tuple[str, ...] = ("instance_id", "candidate_id", "other_id")


def cluster_shares(counts: np.ndarray, n_boot: int, seed: int = 0) -> np.ndarray:
    """Bootstrap replicates (n_boot × 3) of the win / tie / loss shares, resampling review pairs.

    `counts` holds one row per review pair: its win, tie and loss counts over its samples. A pair's samples
    (and both orders, already one comparison) are one unit: they share the two texts, so they are not
    independent evidence, and resampling them one by one would make the interval too narrow."""
    uniform = np.full(len(counts), 1 / len(counts))
    weights = np.random.default_rng(seed).multinomial(len(counts), uniform, n_boot)  # draws of each pair
    drawn = weights @ counts
    return drawn / drawn.sum(axis=1, keepdims=True)


def _protocol_row(g: pd.DataFrame, protocol: str, n_boot: int, seed: int) -> dict[str, float | int]:
    """n, n_pairs, and each share with its 95% cluster-bootstrap CI (NaN where nothing was scored)."""
    scored = g[g[protocol].notna()]
    out = scored[protocol].to_numpy()
    counts = np.array([(out == 1).sum(), (out == 0).sum(), (out == -1).sum()])
    pairs = present(scored, PAIR_KEYS)
    rowwise = pd.Series(np.arange(len(scored)), scored.index)  # no pair columns: each comparison its own unit
    unit = [scored[k].astype(str) for k in pairs] if pairs else [rowwise]
    per_pair = (
        pd.get_dummies(scored[protocol])
        .reindex(columns=[1.0, 0.0, -1.0], fill_value=False)
        .groupby(unit, sort=False)
        .sum()
        .to_numpy(dtype=np.int64)
    )
    row: dict[str, float | int] = {"n": int(counts.sum()), "n_pairs": len(per_pair)}
    nan = np.full(3, np.nan)
    lo, hi = percentile_ci(cluster_shares(per_pair, n_boot, seed)) if len(per_pair) else (nan, nan)
    for i, name in enumerate(("win", "tie", "loss")):
        share = counts[i] / counts.sum() if counts.sum() else np.nan
        row |= {name: share, f"{name}_lo": lo[i], f"{name}_hi": hi[i]}
    return row


def win_rates(comp: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Win / tie / loss per (judge, dimension, generator, opponent, protocol) with 95% bootstrap CIs over
    review pairs (`cluster_shares`); ``n`` counts comparisons, ``n_pairs`` the review pairs behind them."""
    by = present(comp, ("judge", "dimension", "source", "opponent"))
    rows = []
    for key, g in comp.groupby(by, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        for protocol in PROTOCOLS:
            row = dict(zip(by, key, strict=True)) | {"protocol": protocol}
            row |= _protocol_row(g, protocol, n_boot, seed)
            row |= {"n_flip": int(g["flip"].sum()), "n_both_orders": int(g["both_known"].sum())}
            rows.append(row)
    return pd.DataFrame(rows).rename(columns={"source": "generator"})
