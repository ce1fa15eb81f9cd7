"""What the judgments cost, as the manifest counts it, read from the results rows.

A row's `cost_usd` is its call's cost: the completion's price (NaN when the model has no price), 0 for a call
that got no completion or a twin that shared another call's answer (`experiments.rows.call_cost`), and for
a cached replay the price of the answer it replays (paid when the answer was first made; the manifest's Tally
and the Runs table count it, so a run's cost does not depend on what the cache held).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# what a call with no completion writes and a completed call does not: no finish reason and no tokens
NO_COMPLETION = ("finish_reason", "prompt_tokens", "completion_tokens")


def no_completion(results: pd.DataFrame) -> np.ndarray:
    """Rows whose call got no completion, on positive evidence only: no finish reason and zero prompt and
    completion tokens and no answer text (rows_for writes None, 0, 0, "" for it; a billed completion has tokens,
    and a provider that reports neither usage nor finish reason still sends the answer). Empty text or zero
    latency alone is no evidence (a batch answer without created_at, a null content); without the columns, none."""
    if not set(NO_COMPLETION) <= set(results):
        return np.zeros(len(results), dtype=bool)
    tokens = [results[c].to_numpy(dtype=float, na_value=np.nan) == 0 for c in NO_COMPLETION[1:]]
    none = results["finish_reason"].isna().to_numpy() & tokens[0] & tokens[1]
    if "raw" in results:  # and no answer text: an answer without usage or finish reason is still an answer
        raw = results["raw"]
        none &= (raw.isna() | (raw.astype("string").str.len() == 0)).to_numpy()
    return none


def call_costs(results: pd.DataFrame) -> pd.Series:
    """`cost_usd` per row as float. Files written before rows.call_cost hold NaN for a call that got no
    completion: such a row counts 0, as the manifest does; any other NaN stays unknown. Only the rows of
    missing cost are inspected (the check ran over every row: 0.55 s on 1M rows)."""
    if "cost_usd" not in results:
        return pd.Series(np.nan, index=results.index)
    cost = results["cost_usd"].to_numpy(dtype=float, na_value=np.nan, copy=True)
    missing = np.flatnonzero(np.isnan(cost))
    if len(missing):
        facts = results[[c for c in (*NO_COMPLETION, "raw") if c in results]].iloc[missing]
        cost[missing[no_completion(facts)]] = 0.0
    return pd.Series(cost, index=results.index, name="cost_usd")


def per_1k(calls: pd.DataFrame) -> float:
    """USD per 1,000 paid judgments, from one row per call: the spend over the calls that were paid for, i.e.
    that got a completion with a price of their own. A failed call and a twin ($0, no request of its own) are
    not judgments anyone paid for; a cached replay is (it keeps its answer's price). NaN when any cost is
    unknown or no call got a completion; 0 for a free model. Twins carry no marker in the rows, only their
    $0, so a paid call is one of positive cost."""
    if "cost_usd" not in calls or not len(calls):
        return float("nan")
    cost = calls["cost_usd"].to_numpy(dtype=float, na_value=np.nan)
    if np.isnan(cost).any() or no_completion(calls).all():
        return float("nan")
    paid = cost > 0
    return float(cost[paid].mean() * 1000) if paid.any() else 0.0
