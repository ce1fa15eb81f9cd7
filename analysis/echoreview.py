"""EchoReview metrics: Overall Quality of a review, and human/model issue-set overlap.

Overall Quality (``review_quality`` rubric, four 0–10 dimensions): per judge sample (one call: a prompt's
sample), the mean of the four dimensions; per review, the mean over its samples (EchoReview: three runs at
temperature 0.1). A sample with any of the four dimensions unscored is dropped (its mean is undefined); a
review with no complete sample is unscored (NaN), never 0. Always per rater, a judge in one mode: modes are
never averaged, and runs of one judge over the same reviews are separate raters (``judge@run_id``).

Issue overlap, per paper, on *sets of issues* (EchoReview Sec. 3.2). Statements are mapped to issues first,
since several statements may express one issue:

* human issues H: the human statements, merged where a same-side decision says two express one issue;
* each model statement expresses the human issues it was matched to; model statements matched to none
  form model-only issues (merged likewise by same-side decisions; a statement linked to a matched one
  shares its issues);
* O = H ∩ E = the human issues some model statement expresses; |H ∪ E| = |H| + |model-only issues|.

overlap = |O| / |H ∪ E|, human-only = |H \\ O| / |H|, model-only = |E \\ O| / |E|. Example: three human
issues and two model statements that both restate h0 give E = {h0}: overlap 1/3, model-only 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from analysis.echo_rows import present, refuse_duplicates, split_runs
from analysis.embeddings import SupportsEncode, cosine_matrix, model_name_of
from analysis.intervals import grouped_mean_ci, mean_ci

QUALITY_DIMENSIONS: tuple[str, ...] = ("comprehensiveness", "specificity", "evidence_support", "consistency")
QUALITY_TEMPERATURE = 0.1  # EchoReview defines Overall Quality over judge runs at this temperature
_REVIEW_KEYS: tuple[str, ...] = ("judge", "mode", "model", "instance_id", "candidate_id", "source")
_SAMPLE_KEYS: tuple[str, ...] = ("prompt_id", "sample_idx")  # one call: a comparative reference has several


# ---- Overall Quality -----------------------------------------------------------------------------------------
def overall_quality(results: pd.DataFrame, dimensions: Sequence[str] = QUALITY_DIMENSIONS,
                    rubric: str | None = "review_quality") -> pd.DataFrame:
    """Per-review Overall Quality from a judge results table.

    Rows are filtered to ``rubric`` (when the table has a ``rubric`` column) and to ``dimensions``; a score
    counts only where ``parse_ok`` is true and the score is finite. Keys kept: whichever of judge, mode,
    model, instance_id, candidate_id, source exist, so different judges or modes are never averaged together
    here; a judge whose runs (``run_id``) judged one review's sample twice becomes ``judge@run_id`` per run,
    and a judgment recorded twice in one run is a ValueError (`analysis.echo_rows`).
    Columns: the keys, ``overall`` (NaN if unscored), ``n_samples`` (complete samples used), ``n_dropped``,
    the review's spread across its samples: ``sample_min``, ``sample_max``, ``sample_sd`` (ddof 1), and the
    temperature check (`review_temperatures`): ``temperature`` and ``temperature_ok``.
    """
    df = results
    if rubric is not None and "rubric" in df.columns:
        df = df[df["rubric"] == rubric]
    df = df[df["dimension"].isin(list(dimensions))].copy()
    score = pd.to_numeric(df["score"], errors="coerce")
    if "parse_ok" in df.columns:
        score = score.where(df["parse_ok"].fillna(False).astype(bool))
    df["score"] = score
    judgment = [*_REVIEW_KEYS, *_SAMPLE_KEYS, "dimension"]
    df = split_runs(df, judgment)
    refuse_duplicates(df, judgment, "review_quality rows")  # a groupby mean would average the copies
    keys, sample = present(df, _REVIEW_KEYS), present(df, _SAMPLE_KEYS)
    per_sample = (df.groupby([*keys, *sample, "dimension"], dropna=False, observed=True)["score"].mean()
                  .unstack("dimension").reindex(columns=list(dimensions)))
    complete = per_sample.notna().all(axis=1)
    sample_mean = per_sample.mean(axis=1).where(complete)
    grouped = sample_mean.groupby(level=keys, dropna=False)
    out = pd.DataFrame({"overall": grouped.mean(), "n_samples": grouped.count(),
                        "n_dropped": grouped.size() - grouped.count(), "sample_min": grouped.min(),
                        "sample_max": grouped.max(), "sample_sd": grouped.std(ddof=1)})
    return out.join(review_temperatures(df, keys)).reset_index()


def review_temperatures(rows: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per review (`keys`): the ``temperature`` its samples were recorded at (NaN when unknown or mixed) and
    ``temperature_ok``: every sample at T = 0.1, where Overall Quality is defined. A judge the provider runs
    at another temperature (gpt-5 and other reasoning models take only 1.0: judge.quirks) fails the check."""
    recorded = rows["temperature"] if "temperature" in rows else pd.Series(math.nan, index=rows.index)
    temps = pd.to_numeric(recorded, errors="coerce")
    grouped = temps.groupby([rows[k] for k in keys], dropna=False)
    low, high, known = grouped.min(), grouped.max(), grouped.count() == grouped.size()
    same = known & (low == high)
    ok = same & ((low - QUALITY_TEMPERATURE).abs() < 1e-9)
    return pd.DataFrame({"temperature": low.where(same), "temperature_ok": ok.astype(bool)})


def quality_by_source(per_review: pd.DataFrame, by: Sequence[str] = ("source",), n_boot: int = 2000,
                      seed: int = 0) -> pd.DataFrame:
    """Mean Overall Quality per review source with a 95% bootstrap CI over reviews (unscored skipped); always
    per rater too (judge and mode, where the table has them): two raters' reviews are never one sample."""
    by = [*(k for k in present(per_review, ("judge", "mode")) if k not in by), *by]
    rows = []
    for key, g in per_review.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        m, lo, hi, n = mean_ci(g["overall"], n_boot=n_boot, seed=seed)
        rows.append(dict(zip(by, key, strict=True)) | {"overall": m, "ci_lo": lo, "ci_hi": hi, "n": n,
                                          "n_unscored": int(g["overall"].isna().sum())} | _temperature_of(g))
    return pd.DataFrame(rows)


def _temperature_of(reviews: pd.DataFrame) -> dict[str, Any]:
    """A group's recorded temperature (NaN when unknown or mixed) and whether all its reviews are at T = 0.1."""
    if "temperature_ok" not in reviews:
        return {"temperature": math.nan, "temperature_ok": False}
    temps = reviews["temperature"]
    same = temps.notna().all() and temps.nunique() == 1
    return {
        "temperature": float(temps.iloc[0]) if same else math.nan,
        "temperature_ok": bool(reviews["temperature_ok"].all()),
    }


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


def issue_overlap(human: Sequence[str], model: Sequence[str], matches: Sequence[tuple[int, int]],
                  same_human: Sequence[tuple[int, int]] = (), same_model: Sequence[tuple[int, int]] = (),
                  n_unscored: int = 0) -> dict[str, float]:  # fmt: skip
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
        "n_human": n_h, "n_model": n_e, "n_human_issues": n_h_issues, "n_model_issues": n_e_issues,
        "n_shared": len(shared), "n_unscored": n_unscored,
    }


def macro_overlap(per_paper: pd.DataFrame, by: Sequence[str] = (), n_boot: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
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
    return out.assign(n_unscored=[int(t["n_unscored"]) for t in totals],
                      n_papers_unscored=[int(t["n_papers_unscored"]) for t in totals])
