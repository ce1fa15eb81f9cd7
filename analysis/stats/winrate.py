"""Clear win / tie / loss of each generator against the reference (docs/statistics.md).

Per instance and dimension, a generator's best-of-K is compared with the reference's score: better is a
win, equal a tie, worse a loss. Rates are over instances, each with a 95% Wilson interval (statsmodels),
which stays honest at small n where a bootstrap collapses (3 wins of 3: [0.44, 1.00], not [1.00, 1.00]).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from analysis.stats.scores import (
    BEST_CONTEXT_KEYS,
    CONTEXT,
    CONTEXT_KEYS,
    DIRECTION,
    best_of_k,
    candidate_scores,
    combination_names,
    combined_pairs,
    direction,
    join_reference,
    lower_is_better,
    text_columns,
)
from analysis.stats.spec import FigureSpec, Headline, Section, TableSpec
from core.intervals import LEVEL, wilson_interval

#: How several judges' scores are combined into one (`combine`); None = each judge on its own.
CombineMethod = Literal["mean", "unanimous", "majority"]
Combine = CombineMethod | None
#: Scores closer than this are equal (means of integer scores can differ in the last bit).
TIE_TOL = 1e-9
ITEM_KEYS: tuple[str, ...] = ("instance_id", "source", "dimension")


def check_reference(results: pd.DataFrame, reference: str, where: object) -> None:
    """A ValueError listing the sources present when no candidate of `results` (read from `where`) has the
    reference's source: every comparison would silently be empty and the reference scored as a generator."""
    sources = sorted(results["source"].dropna().astype(str).unique())
    if reference not in sources:
        raise ValueError(
            f"--reference {reference!r}: no candidate in {where} has that source; sources present: {sources}"
        )


def _outcome(out: pd.DataFrame) -> pd.DataFrame:
    """`outcome` from `gen_best` vs `ref_best` in the dimension's direction (1 win, 0 tie, -1 loss)."""
    diff = (out["gen_best"] - out["ref_best"]).to_numpy() * direction(out)
    out["outcome"] = np.select([diff > TIE_TOL, diff < -TIE_TOL], [1, -1], 0).astype(np.int8)
    if isinstance(out["source"].dtype, pd.CategoricalDtype):
        out["source"] = out["source"].cat.remove_unused_categories()
    return out


def _compare(best: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Join each generator's best-of-K with the reference score of the same judge, mode, instance, dimension
    (in comparative mode, the reference scored in that generator's own prompt: `join_reference`)."""
    is_ref = (best["source"] == reference).to_numpy()
    keys = ["judge", "mode", "instance_id", "dimension"]
    ref = best.loc[is_ref, [*keys, CONTEXT, "best"]].rename(columns={"best": "ref_best"})
    gen = best.loc[~is_ref].rename(columns={"best": "gen_best"})
    return _outcome(join_reference(gen, ref, keys))


def _combined_mean_outcomes(cands: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Best-of-K on the combined candidate scores, compared with the reference's combined score over the
    same judges as that best candidate (ties on the score broken by the larger margin)."""
    pairs = combined_pairs(cands, reference)
    sign = direction(pairs)
    pairs = pairs.assign(_s=pairs["score"] * sign, _m=(pairs["score"] - pairs["ref_score"]) * sign)
    keys = ["judge", "mode", "instance_id", "source", "dimension", DIRECTION]
    pairs["k"] = pairs.groupby(keys, observed=True, sort=False)["score"].transform("size")
    best = pairs.sort_values(["_s", "_m"], ascending=False, kind="stable").drop_duplicates(keys)
    best = best.rename(columns={"score": "gen_best", "ref_score": "ref_best"})
    return _outcome(best[[*keys, "gen_best", "k", "ref_best", "n_judges"]].reset_index(drop=True))


def _judge_counts(outcomes: pd.DataFrame, combine: str) -> pd.DataFrame:
    """Per item: wins `_w`, losses `_l` and judges `_n` among its per-judge outcomes, the judges that rated
    its dimension in that mode (`_need`), and the combination's name as `judge`."""
    keys = ["mode", *ITEM_KEYS]
    o = outcomes["outcome"].to_numpy()
    frame = outcomes[keys].assign(_w=(o == 1).astype(np.int32), _l=(o == -1).astype(np.int32), _n=1)
    agg = frame.groupby(keys, observed=True, sort=False)[["_w", "_l", "_n"]].sum().reset_index()
    n_judges = outcomes.groupby(["mode", "dimension"], observed=True)["judge"].nunique().rename("_need")
    agg = agg.merge(n_judges.reset_index(), on=["mode", "dimension"], how="left")
    agg.insert(
        0, "judge", agg["dimension"].astype(str).map(combination_names(outcomes, combine)).astype(object)
    )
    return agg


def _vote(outcomes: pd.DataFrame, combine: str) -> pd.DataFrame:
    """Combine per-judge outcomes: `unanimous` (win/loss only if every judge agrees, else tie) or `majority`
    (win/loss if more than half of the judges say so, else tie). Items not judged by every judge that
    rated their dimension in that mode are dropped (`vote_excluded` counts them), so that "every judge"
    means the same set for all items of a dimension (judges split by rubric combine per rubric)."""
    agg = _judge_counts(outcomes, combine)
    agg = agg.loc[agg["_n"].to_numpy() == agg["_need"].to_numpy()]
    w, loss, n = (agg[c].to_numpy() for c in ("_w", "_l", "_n"))
    if combine == "unanimous":
        win_mask, loss_mask = w == n, loss == n
    else:
        win_mask, loss_mask = 2 * w > n, 2 * loss > n
    out = agg[["judge", "mode", *ITEM_KEYS]].copy()
    out["n_judges"] = n
    out["outcome"] = np.select([win_mask, loss_mask], [1, -1], 0).astype(np.int8)
    return out


def vote_excluded(outcomes: pd.DataFrame, combine: str) -> pd.DataFrame:
    """Per combination × mode × generator × dimension: `n_excluded`, the items `_vote` drops because some
    judge left them unscored (so a combined rate never rests on fewer instances without saying so)."""
    agg = _judge_counts(outcomes, combine)
    agg["n_excluded"] = (agg["_n"].to_numpy() < agg["_need"].to_numpy()).astype(np.int64)
    keys = ["judge", "mode", "source", "dimension"]
    return agg.groupby(keys, observed=True, sort=False)["n_excluded"].sum().reset_index()


def mean_excluded(
    results: pd.DataFrame, outcomes: pd.DataFrame, reference: str = "reference"
) -> pd.DataFrame:
    """Per combination × mode × generator × dimension: `n_excluded`, the instances some judge compared (a
    candidate and the reference scored) that the `mean` combination left out because no candidate rests on
    every judge (`scores.combined_pairs`); as `vote_excluded` counts them for the votes."""
    cands = candidate_scores(results, CONTEXT_KEYS, reference)
    items = ["judge", "mode", "instance_id", "source", "dimension"]
    compared = text_columns(
        combined_pairs(cands, reference, every_judge=False)[items], items
    ).drop_duplicates()
    kept = text_columns(outcomes[items], items).drop_duplicates().assign(_kept=True)
    compared = compared.merge(kept, on=items, how="left")
    compared["n_excluded"] = compared["_kept"].isna().to_numpy().astype(np.int64)
    keys = ["judge", "mode", "source", "dimension"]
    return compared.groupby(keys, sort=False)["n_excluded"].sum().reset_index()


def instance_outcomes(
    results: pd.DataFrame, reference: str = "reference", combine: Combine = None
) -> pd.DataFrame:
    """Per judge × mode × instance × generator × dimension: `outcome` 1 (win), 0 (tie), -1 (loss).

    With `combine="mean"` the judges' candidate scores are averaged (over the judges that scored both the
    candidate and the reference, see `combined_pairs`) before best-of-K, and `judge` becomes e.g.
    ``mean(a+b)``.
    """
    if combine not in (None, "mean", "unanimous", "majority"):
        raise ValueError(f"combine must be None, 'mean', 'unanimous' or 'majority', not {combine!r}")
    cands = candidate_scores(results, CONTEXT_KEYS, reference)
    if combine == "mean":
        return _combined_mean_outcomes(cands, reference)
    out = _compare(best_of_k(cands, BEST_CONTEXT_KEYS), reference)
    if combine in ("unanimous", "majority"):
        out = _vote(out, combine)
    return out


def outcome_rates(outcomes: pd.DataFrame, by: Sequence[str], level: float = LEVEL) -> pd.DataFrame:
    """Win/tie/loss rates per `by` group with Wilson intervals over the group's instances (each instance
    one independent unit; `core.intervals.wilson_interval`)."""
    codes = 1 - outcomes["outcome"].to_numpy().astype(np.int64)  # win 0, tie 1, loss 2
    frame = outcomes[list(by)].assign(_c=codes)
    counts = frame.groupby([*by, "_c"], observed=True).size().unstack("_c", fill_value=0)
    counts = counts.reindex(columns=[0, 1, 2], fill_value=0)
    table = counts.to_numpy()
    n = table.sum(axis=1)
    out = counts.index.to_frame(index=False)
    out["n"] = n
    for j, name in enumerate(("win", "tie", "loss")):
        out[f"n_{name}"] = table[:, j]
    for j, name in enumerate(("win", "tie", "loss")):
        out[name] = table[:, j] / n
        out[f"{name}_lo"], out[f"{name}_hi"] = wilson_interval(table[:, j], n, level)
    return out


def win_tie_loss(
    results: pd.DataFrame,
    reference: str = "reference",
    by: Sequence[str] = ("judge", "mode", "source", "dimension"),
    combine: Combine = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Win/tie/loss rates of each generator vs `reference`, with 95% Wilson intervals over instances and n
    (`n_boot` and `seed` are accepted for the callers' one signature; no rate is resampled).

    Combined judges also get `n_judges_min` (the fewest judges any of the group's items rests on) and
    `n_excluded` (items left out because some judge left them unscored: a vote needs every judge's verdict,
    `mean` every judge's score on at least one of the generator's candidates and on the reference)."""
    if combine in ("unanimous", "majority"):
        per_judge = instance_outcomes(results, reference)
        outcomes = _vote(per_judge, combine)
        excluded = vote_excluded(per_judge, combine)
    else:
        outcomes = instance_outcomes(results, reference, combine)  # refuses an unknown `combine`
        if combine is None:
            return outcome_rates(outcomes, by)
        excluded = mean_excluded(results, outcomes, reference)
    rates = _with_judges_min(outcome_rates(outcomes, by), outcomes, by)
    keys = [k for k in by if k in excluded]
    excluded = excluded.groupby(keys, observed=True)["n_excluded"].sum().reset_index()
    out = rates.merge(excluded, on=keys, how="outer")
    counts = ["n", "n_win", "n_tie", "n_loss", "n_excluded"]  # a group every item of which was dropped: n = 0
    return out.fillna({c: 0 for c in counts}).astype({c: np.int64 for c in counts})


def _with_judges_min(rates: pd.DataFrame, outcomes: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """`rates` with `n_judges_min`: the fewest judges behind any item of each group."""
    least = outcomes.groupby(list(by), observed=True)["n_judges"].min().rename("n_judges_min").reset_index()
    return rates.merge(least, on=list(by), how="left")


WINRATE: TableSpec = TableSpec(
    "winrate",
    lambda s, _: win_tie_loss(s.cands, s.reference, n_boot=s.n_boot, seed=s.seed),
    ("judge", "mode", "source", "dimension", "n", "win", "tie", "loss"),
    section=Section.winrate,
    figure=FigureSpec("winrate", "winrate_bars", lambda t, s: (WINRATE.need(t), lower_is_better(s))),
    headline=Headline("win", "max", "highest win rate"),
    meanings={
        "n_win": "instances won",
        "n_tie": "instances tied",
        "n_loss": "instances lost",
        "win": "share of instances where the generator's best-of-K beats the reference",
        "tie": "share tied",
        "loss": "share lost",
    },
)
