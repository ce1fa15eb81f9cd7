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
from collections.abc import Sequence
from typing import Any

import pandas as pd

from analysis.echoreview.rows import present, refuse_duplicates, split_runs
from core.intervals import mean_ci

QUALITY_DIMENSIONS: tuple[str, ...] = ("comprehensiveness", "specificity", "evidence_support", "consistency")
QUALITY_TEMPERATURE = 0.1  # EchoReview defines Overall Quality over judge runs at this temperature
_REVIEW_KEYS: tuple[str, ...] = ("judge", "mode", "model", "instance_id", "candidate_id", "source")
_SAMPLE_KEYS: tuple[str, ...] = ("prompt_id", "sample_idx")  # one call: a comparative reference has several


# ---- Overall Quality -----------------------------------------------------------------------------------------
def overall_quality(
    results: pd.DataFrame,
    dimensions: Sequence[str] = QUALITY_DIMENSIONS,
    rubric: str | None = "review_quality",
) -> pd.DataFrame:
    """Per-review Overall Quality from a judge results table.

    Rows are filtered to ``rubric`` (when the table has a ``rubric`` column) and to ``dimensions``; a score
    counts only where ``parse_ok`` is true and the score is finite. Keys kept: whichever of judge, mode,
    model, instance_id, candidate_id, source exist, so different judges or modes are never averaged together
    here; a judge whose runs (``run_id``) judged one review's sample twice becomes ``judge@run_id`` per run,
    and a judgment recorded twice in one run is a ValueError (`analysis.echoreview.rows`).
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
    per_sample = (
        df.groupby([*keys, *sample, "dimension"], dropna=False, observed=True)["score"]
        .mean()
        .unstack("dimension")
        .reindex(columns=list(dimensions))
    )
    complete = per_sample.notna().all(axis=1)
    sample_mean = per_sample.mean(axis=1).where(complete)
    grouped = sample_mean.groupby(level=keys, dropna=False)
    out = pd.DataFrame(
        {
            "overall": grouped.mean(),
            "n_samples": grouped.count(),
            "n_dropped": grouped.size() - grouped.count(),
            "sample_min": grouped.min(),
            "sample_max": grouped.max(),
            "sample_sd": grouped.std(ddof=1),
        }
    )
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


def quality_by_source(
    per_review: pd.DataFrame, by: Sequence[str] = ("source",), n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Mean Overall Quality per review source with a 95% bootstrap CI over reviews (unscored skipped); always
    per rater too (judge and mode, where the table has them): two raters' reviews are never one sample."""
    by = [*(k for k in present(per_review, ("judge", "mode")) if k not in by), *by]
    rows = []
    for key, g in per_review.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        m, lo, hi, n = mean_ci(g["overall"], n_boot=n_boot, seed=seed)
        rows.append(
            dict(zip(by, key, strict=True))
            | {"overall": m, "ci_lo": lo, "ci_hi": hi, "n": n, "n_unscored": int(g["overall"].isna().sum())}
            | _temperature_of(g)
        )
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
