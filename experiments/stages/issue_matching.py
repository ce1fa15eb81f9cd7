"""EchoReview's issue matching: which human and model review statements express one issue, and the per-paper
issue-set ratios (overlap, human-only, model-only; EchoReview Sec. 3.2, defined in analysis.echoreview.metrics) and
their macro averages over papers.

Run by the issues stage (experiments.stages.issues) as it judges, and read by the analysis (analysis.echoreview.metrics's
macro averages): it lives below both, so the experiment does not import the analysis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from core.intervals import grouped_mean_ci
from judge.local.embeddings import SupportsEncode, cosine_matrix, model_name_of


# ---- issue matching ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatchDecision:
    """One (human issue, model issue) pair as decided by a back-end, kept for audit.

    ``decision`` is True/False, or None when the back-end gave no usable answer (an unscored judge call);
    None is never counted as a match. ``similarity`` is the cosine for the embedding back-end.
    """

    human_idx: int
    model_idx: int
    decision: bool | None
    similarity: float | None
    method: str


def decisions_frame(decisions: Sequence[MatchDecision]) -> pd.DataFrame:
    """Decisions as a table (for saving next to the scores)."""
    return pd.DataFrame(
        [asdict(d) for d in decisions], columns=["human_idx", "model_idx", "decision", "similarity", "method"]
    )


def matched_pairs(decisions: Sequence[MatchDecision]) -> list[tuple[int, int]]:
    """The (human_idx, model_idx) pairs decided as the same issue."""
    return [(d.human_idx, d.model_idx) for d in decisions if d.decision is True]


def match_by_embedding(
    human: Sequence[str], model: Sequence[str], embedder: SupportsEncode, threshold: float = 0.7
) -> list[MatchDecision]:
    """Every pair's cosine and its decision (cosine ≥ threshold)."""
    if not human or not model:
        return []
    vecs = np.asarray(embedder.encode([*human, *model]))
    cos = cosine_matrix(vecs[: len(human)], vecs[len(human) :])
    method = f"embedding:{model_name_of(embedder)}@{threshold}"
    return [
        MatchDecision(i, j, bool(cos[i, j] >= threshold), float(cos[i, j]), method)
        for i in range(len(human))
        for j in range(len(model))
    ]


def match_by_judge(
    human: Sequence[str],
    model: Sequence[str],
    decide: Callable[[str, str], bool | None],
    method: str = "judge:issue_match",
) -> list[MatchDecision]:
    """Ask ``decide(human_issue, model_issue)`` for every pair; None is recorded as unscored."""
    out = []
    for i, h in enumerate(human):
        for j, m in enumerate(model):
            d = decide(h, m)
            out.append(MatchDecision(i, j, None if d is None else bool(d), None, method))
    return out


def _groups(n: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Connected-component label of each of n statements under "same issue" pairs (scipy)."""
    if n == 0:
        return np.zeros(0, dtype=int)
    rows, cols = zip(*pairs, strict=True) if pairs else ((), ())
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def _check(pairs: Sequence[tuple[int, int]], n_a: int, n_b: int, what: str) -> None:
    for a, b in pairs:
        if not (0 <= a < n_a and 0 <= b < n_b):
            raise IndexError(f"{what} ({a}, {b}) out of range for {n_a} / {n_b} statements")


def issue_overlap(
    human: Sequence[str],
    model: Sequence[str],
    matches: Sequence[tuple[int, int]],
    same_human: Sequence[tuple[int, int]] = (),
    same_model: Sequence[tuple[int, int]] = (),
    n_unscored: int = 0,
) -> dict[str, float]:
    """overlap, human_only, model_only for one paper on issue sets (module docstring); NaN where a
    denominator is 0. ``matches`` are (human, model) statement pairs; ``same_*`` pairs within one side.

    ``n_unscored``: matching calls of this paper (across or within a side) that came back unscored. Any
    makes the three ratios NaN (the paper is left out of the macro averages): an unknown decision is not
    "different issues", which would lower the overlap and raise human-only and model-only."""
    n_h, n_e = len(human), len(model)
    _check(matches, n_h, n_e, "match")
    _check(same_human, n_h, n_h, "same_human")
    _check(same_model, n_e, n_e, "same_model")
    h_issue, m_group = _groups(n_h, same_human), _groups(n_e, same_model)
    expressed: dict[int, set[int]] = {int(g): set() for g in m_group}
    for h, m in matches:
        expressed[int(m_group[m])].add(int(h_issue[h]))
    shared = set().union(*expressed.values()) if expressed else set()
    n_h_issues, n_new = len(set(h_issue.tolist())), sum(not v for v in expressed.values())
    n_e_issues, union = len(shared) + n_new, n_h_issues + n_new
    known = n_unscored == 0
    return {
        "overlap": len(shared) / union if union and known else math.nan,
        "human_only": (n_h_issues - len(shared)) / n_h_issues if n_h_issues and known else math.nan,
        "model_only": n_new / n_e_issues if n_e_issues and known else math.nan,
        "n_human": n_h,
        "n_model": n_e,
        "n_human_issues": n_h_issues,
        "n_model_issues": n_e_issues,
        "n_shared": len(shared),
        "n_unscored": n_unscored,
    }


def macro_overlap(
    per_paper: pd.DataFrame, by: Sequence[str] = (), n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Macro-average (each paper weighs the same) of the three ratios, with 95% bootstrap CIs over papers.

    ``per_paper`` has one row per paper (and per ``by`` group, e.g. the generator) with the columns of
    ``issue_overlap``. NaN ratios (empty issue sets, unscored matching calls) are left out of that ratio's
    mean and counted in ``_n``; with an ``n_unscored`` column, ``n_unscored`` sums the unscored calls and
    ``n_papers_unscored`` counts the papers left out for them.
    """
    ratios = {col: col for col in ("overlap", "human_only", "model_only")}
    out = grouped_mean_ci(per_paper, by, ratios, "n_papers", n_boot=n_boot, seed=seed)
    if "n_unscored" not in per_paper:
        return out
    calls = per_paper["n_unscored"].fillna(0).astype(int)
    frame = per_paper.assign(n_unscored=calls, n_papers_unscored=(calls > 0).astype(int))
    sums = frame.groupby(list(by), sort=True, dropna=False) if by else [((), frame)]
    totals = [g[["n_unscored", "n_papers_unscored"]].sum() for _, g in sums]
    return out.assign(
        n_unscored=[int(t["n_unscored"]) for t in totals],
        n_papers_unscored=[int(t["n_papers_unscored"]) for t in totals],
    )
