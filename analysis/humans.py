"""Human labels as raters: the same outcome pipeline as judges, plus majority vote and inter-human reliability.

The labels file has one row per annotator × candidate × dimension (`annotator, instance_id, candidate_id,
source, dimension, score`). Each annotator becomes a rater ``human:<annotator>`` in mode ``human``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from analysis.reliability import alpha_with_ci, fleiss_with_ci
from analysis.scores import LOWER_IS_BETTER, group_ids
from analysis.winrate import ITEM_KEYS, instance_outcomes

HUMAN_COLUMNS: tuple[str, ...] = ("annotator", "instance_id", "candidate_id", "source", "dimension", "score")
PREFIX = "human:"
MAJORITY = "human:majority"
HUMAN_MODE = "human"


def check_humans(humans: pd.DataFrame) -> pd.DataFrame:
    """The labels with the required columns, a float score, and string ids; a clear error otherwise."""
    missing = [c for c in HUMAN_COLUMNS if c not in humans.columns]
    if missing:
        raise ValueError(f"human labels lack column(s) {missing}; need {list(HUMAN_COLUMNS)}")
    out = humans.loc[:, list(HUMAN_COLUMNS)].copy()
    for col in HUMAN_COLUMNS[:-1]:
        out[col] = out[col].astype(str)
    out["score"] = pd.to_numeric(out["score"], errors="coerce")
    return out


def human_results(humans: pd.DataFrame) -> pd.DataFrame:
    """Human labels shaped like a results table (judge ``human:<annotator>``, mode ``human``, one sample)."""
    h = check_humans(humans)
    return pd.DataFrame(
        {
            "judge": PREFIX + h["annotator"],
            "model": "human",
            "mode": HUMAN_MODE,
            "instance_id": h["instance_id"],
            "candidate_id": h["candidate_id"],
            "source": h["source"],
            "dimension": h["dimension"],
            "sample_idx": 0,
            "score": h["score"],
            "parse_ok": h["score"].notna(),
        }
    )


def majority_outcomes(outcomes: pd.DataFrame, name: str = MAJORITY) -> pd.DataFrame:
    """Plurality outcome over raters per item; items where two outcomes tie for most are excluded
    (ties excluded, as in NovBench)."""
    counts = outcomes.groupby([*ITEM_KEYS, "outcome"], observed=True).size().unstack("outcome", fill_value=0)
    counts = counts.reindex(columns=[1, 0, -1], fill_value=0)
    table = counts.to_numpy()
    top = table.max(axis=1)
    unique = (table == top[:, None]).sum(axis=1) == 1
    out = counts.index.to_frame(index=False).loc[unique].reset_index(drop=True)
    out["outcome"] = np.array([1, 0, -1], dtype=np.int8)[table[unique].argmax(axis=1)]
    out["n_raters"] = table[unique].sum(axis=1)
    out.insert(0, "mode", HUMAN_MODE)
    out.insert(0, "judge", name)
    return out


def rater_label(judge: pd.Series, mode: pd.Series) -> pd.Series:
    """``judge [mode]`` for judges, the bare ``human:...`` name for humans."""
    pairs = pd.DataFrame({"judge": judge.to_numpy(), "mode": mode.to_numpy()})
    ids, first = group_ids(pairs, ["judge", "mode"])
    labels = [
        str(j) if m == HUMAN_MODE else f"{j} [{m}]" for j, m in pairs.iloc[first].itertuples(index=False)
    ]
    return pd.Series(np.asarray(labels, dtype=object)[ids], index=judge.index)


def rater_outcomes(
    results: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    lower_is_better: Iterable[str] = LOWER_IS_BETTER,
) -> pd.DataFrame:
    """Win/tie/loss outcomes per rater (judge × mode, each annotator, and the human majority) and item."""
    frames = [instance_outcomes(results, reference, None, lower_is_better)]
    if humans is not None and len(humans):
        human = instance_outcomes(human_results(humans), reference, None, lower_is_better)
        frames += [human, majority_outcomes(human)]
    cols = ["judge", "mode", *ITEM_KEYS, "outcome"]
    out = pd.concat([f[cols].astype({c: str for c in cols[:-1]}) for f in frames], ignore_index=True)
    out.insert(0, "rater", rater_label(out["judge"], out["mode"]))
    out.insert(
        1,
        "kind",
        np.where(
            out["mode"] != HUMAN_MODE, "judge", np.where(out["judge"] == MAJORITY, "majority", "expert")
        ),
    )
    return out


def human_reliability(humans: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Inter-annotator reliability per dimension: Fleiss' κ (items all annotators scored) and ordinal α."""
    h = check_humans(humans)
    rows = []
    for dim, part in h.groupby("dimension", sort=True):
        wide = part.groupby(["instance_id", "candidate_id", "annotator"])["score"].mean().unstack("annotator")
        kappa, k_lo, k_hi, n_items = fleiss_with_ci(wide.to_numpy(), n_boot, seed)
        alpha, a_lo, a_hi = alpha_with_ci(wide.to_numpy().T, "ordinal", n_boot, seed)
        rows.append(
            {
                "dimension": dim,
                "n_annotators": wide.shape[1],
                "n_items_all": n_items,
                "fleiss_kappa": kappa,
                "fleiss_lo": k_lo,
                "fleiss_hi": k_hi,
                "n_items": int((wide.notna().sum(axis=1) >= 2).sum()),
                "alpha_ordinal": alpha,
                "alpha_lo": a_lo,
                "alpha_hi": a_hi,
            }
        )
    return pd.DataFrame(rows)
