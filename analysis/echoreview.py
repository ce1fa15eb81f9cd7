"""EchoReview metrics: Overall Quality of a review, and human/model issue-set overlap.

Overall Quality (``review_quality`` rubric, four 0–10 dimensions): per judge sample, the mean of the four
dimensions; per review, the mean over its samples (EchoReview: three runs at temperature 0.1). A sample
with any of the four dimensions unscored is dropped (its mean is undefined); a review with no complete
sample is unscored (NaN), never 0.

Issue overlap, per paper, with H the human issues, E the model's and O the matched pairs:
overlap = |O| / |H ∪ E| with |H ∪ E| = |H| + |E| − |O|, human-only = |H \\ O| / |H|,
model-only = |E \\ O| / |E|. Matching is one-to-one: the pairwise "same issue" decisions form a bipartite
graph and |O| is the size of a maximum matching, so one human issue can absorb at most one model issue
(otherwise a model that restates one point five times would look five times as aligned).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from analysis.embeddings import SupportsEncode, cosine_matrix, model_name_of
from analysis.intervals import grouped_mean_ci, mean_ci

QUALITY_DIMENSIONS: tuple[str, ...] = ("comprehensiveness", "specificity", "evidence_support", "consistency")
_REVIEW_KEYS: tuple[str, ...] = ("run_id", "judge", "model", "instance_id", "candidate_id", "source")


# ---- Overall Quality -----------------------------------------------------------------------------------------
def overall_quality(results: pd.DataFrame, dimensions: Sequence[str] = QUALITY_DIMENSIONS,
                    rubric: str | None = "review_quality") -> pd.DataFrame:
    """Per-review Overall Quality from a judge results table.

    Rows are filtered to ``rubric`` (when the table has a ``rubric`` column) and to ``dimensions``; a score
    counts only where ``parse_ok`` is true and the score is finite. Keys kept: whichever of run_id, judge,
    model, instance_id, candidate_id, source exist, so different judges are never averaged together here.
    Columns: the keys, ``overall`` (NaN if unscored), ``n_samples`` (complete samples used), ``n_dropped``.
    """
    df = results
    if rubric is not None and "rubric" in df.columns:
        df = df[df["rubric"] == rubric]
    df = df[df["dimension"].isin(list(dimensions))].copy()
    score = pd.to_numeric(df["score"], errors="coerce")
    if "parse_ok" in df.columns:
        score = score.where(df["parse_ok"].fillna(False).astype(bool))
    df["score"] = score
    keys = [k for k in _REVIEW_KEYS if k in df.columns]
    per_sample = (df.groupby([*keys, "sample_idx", "dimension"], dropna=False)["score"].mean()
                  .unstack("dimension").reindex(columns=list(dimensions)))
    complete = per_sample.notna().all(axis=1)
    sample_mean = per_sample.mean(axis=1).where(complete)
    grouped = sample_mean.groupby(level=keys, dropna=False)
    out = pd.DataFrame({"overall": grouped.mean(), "n_samples": grouped.count(),
                        "n_dropped": grouped.size() - grouped.count()})
    return out.reset_index()


def quality_by_source(per_review: pd.DataFrame, by: Sequence[str] = ("source",), n_boot: int = 2000,
                      seed: int = 0) -> pd.DataFrame:
    """Mean Overall Quality per review source with a 95% bootstrap CI over reviews (unscored skipped)."""
    rows = []
    for key, g in per_review.groupby(list(by), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        m, lo, hi, n = mean_ci(g["overall"], n_boot=n_boot, seed=seed)
        rows.append(dict(zip(by, key, strict=True)) | {"overall": m, "ci_lo": lo, "ci_hi": hi, "n": n,
                                          "n_unscored": int(g["overall"].isna().sum())})
    return pd.DataFrame(rows)


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
    return pd.DataFrame([asdict(d) for d in decisions],
                        columns=["human_idx", "model_idx", "decision", "similarity", "method"])


def matched_pairs(decisions: Sequence[MatchDecision]) -> list[tuple[int, int]]:
    """The (human_idx, model_idx) pairs decided as the same issue."""
    return [(d.human_idx, d.model_idx) for d in decisions if d.decision is True]


def match_by_embedding(human: Sequence[str], model: Sequence[str], embedder: SupportsEncode,
                       threshold: float = 0.7) -> list[MatchDecision]:
    """Every pair's cosine and its decision (cosine ≥ threshold)."""
    if not human or not model:
        return []
    vecs = np.asarray(embedder.encode([*human, *model]))
    cos = cosine_matrix(vecs[: len(human)], vecs[len(human):])
    method = f"embedding:{model_name_of(embedder)}@{threshold}"
    return [MatchDecision(i, j, bool(cos[i, j] >= threshold), float(cos[i, j]), method)
            for i in range(len(human)) for j in range(len(model))]


def match_by_judge(human: Sequence[str], model: Sequence[str], decide: Callable[[str, str], bool | None],
                   method: str = "judge:issue_match") -> list[MatchDecision]:
    """Ask ``decide(human_issue, model_issue)`` for every pair; None is recorded as unscored."""
    out = []
    for i, h in enumerate(human):
        for j, m in enumerate(model):
            d = decide(h, m)
            out.append(MatchDecision(i, j, None if d is None else bool(d), None, method))
    return out


def max_bipartite_matching(pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """A maximum one-to-one subset of ``pairs`` (augmenting paths; issue lists are small)."""
    adj: dict[int, list[int]] = {}
    for h, m in dict.fromkeys(pairs):
        adj.setdefault(h, []).append(m)
    owner: dict[int, int] = {}  # model idx -> human idx

    def augment(h: int, seen: set[int]) -> bool:
        for m in adj[h]:
            if m not in seen:
                seen.add(m)
                if m not in owner or augment(owner[m], seen):
                    owner[m] = h
                    return True
        return False

    for h in sorted(adj):
        augment(h, set())
    return sorted((h, m) for m, h in owner.items())


def issue_overlap(human: Sequence[str], model: Sequence[str], matches: Sequence[tuple[int, int]]
                  ) -> dict[str, float]:
    """overlap, human_only, model_only for one paper (module docstring); NaN where a denominator is 0."""
    n_h, n_e = len(human), len(model)
    for h, m in matches:
        if not (0 <= h < n_h and 0 <= m < n_e):
            raise IndexError(f"match ({h}, {m}) out of range for {n_h} human / {n_e} model issues")
    n_o = len(max_bipartite_matching(matches))
    union = n_h + n_e - n_o
    return {
        "overlap": n_o / union if union else math.nan,
        "human_only": (n_h - n_o) / n_h if n_h else math.nan,
        "model_only": (n_e - n_o) / n_e if n_e else math.nan,
        "n_human": n_h, "n_model": n_e, "n_matched": n_o,
    }


def macro_overlap(per_paper: pd.DataFrame, by: Sequence[str] = (), n_boot: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
    """Macro-average (each paper weighs the same) of the three ratios, with 95% bootstrap CIs over papers.

    ``per_paper`` has one row per paper (and per ``by`` group, e.g. the generator) with the columns of
    ``issue_overlap``. NaN ratios (empty issue sets) are left out of that ratio's mean and counted in ``_n``.
    """
    ratios = {col: col for col in ("overlap", "human_only", "model_only")}
    return grouped_mean_ci(per_paper, by, ratios, "n_papers", n_boot=n_boot, seed=seed)
