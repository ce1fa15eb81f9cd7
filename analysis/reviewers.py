"""Judges against real reviewers: `python -m analysis.reviewers RUN_DIR --reviews coling2020_reviews.jsonl`.

The judge rated each paper's originality (``paper_originality`` rubric, ``experiment=coling_originality``);
the COLING 2020 reviewers gave each paper integer Originality scores 1–5. Per judge:

* **Spearman ρ / Kendall τ** between the judge's per-paper score (mean over its samples) and the per-paper
  mean reviewer score (Fisher-z CIs).
* **Weighted κ** (quadratic) between the judge and each review, after the scale mapping ``SCALE_MAPPING``:
  the rubric asks on the reviewers' own 1–5 Originality scale, so the mapping is the identity, applied to
  the judge's per-paper mean rounded half up to an integer (bootstrap CIs over reviews).
* **Accept/reject agreement**: the judge "accepts" a paper when its score is ≥ ``ACCEPT_AT`` (3, the scale's
  "respectable"); percent agreement and Cohen's κ with the decision. The reviewers' own mean, thresholded
  the same way, is the reference row. Papers with an empty decision are left out and counted
  (``n_no_decision``).
* **Ceiling**: the reviewers' agreement with each other on papers with two or more reviews (every pair of
  reviews of a paper): percent, quadratic κ, ρ, τ, and Krippendorff's α (ordinal) over all their reviews.

The reference and ceiling rows are given on all reviewed papers and, when a judge rated fewer (``limit=``),
again on the papers it rated; the ``papers`` column names each row's papers.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.load.collect import load_results
from analysis.robustness import note_perturbed, unperturbed
from analysis.stats.agreement import krippendorff_alpha, pair_agreement
from analysis.stats.scores import usable_mask
from core.cells import md_cell, write_csv
from experiments.datasets.coling import load_coling_records, review_scores
from experiments.datasets.fetch import data_or_path

SCALE_MAPPING = "judge 1-5 -> reviewer 1-5: identity (same scale); judge per-paper mean rounded half up"
ACCEPT_AT = 3.0
STATS = ("percent", "kappa", "kappa_w", "rho", "tau")


def judge_scores(results: pd.DataFrame, dimension: str = "originality") -> pd.DataFrame:
    """Per (judge, paper): the mean of the judge's parsed scores over its samples, and how many there were.
    A judge run in several modes is one rater per mode (``judge [mode]``): its modes are never averaged."""
    results = unperturbed(results)  # robustness perturbations are analysis.robustness's, not a rating
    rows = results[(results["dimension"] == dimension).to_numpy() & usable_mask(results)]  # unknown = parsed
    judge = rows["judge"].astype(str)
    if "mode" in rows and (rows.groupby(judge, observed=True)["mode"].nunique() > 1).any():
        judge = judge + " [" + rows["mode"].astype(str) + "]"
    rows = rows.assign(
        score=pd.to_numeric(rows["score"], errors="coerce"),
        instance_id=rows["instance_id"].astype(str),
        judge=judge,
    ).dropna(subset=["score"])
    out = rows.groupby(["judge", "instance_id"])["score"].agg(judge_score="mean", n_samples="count")
    return out.reset_index().rename(columns={"instance_id": "paper_id"})


def round_half_up(x: pd.Series) -> pd.Series:
    """The scale mapping's rounding (3.5 -> 4, 2.5 -> 3; numpy's round would give 4 and 2)."""
    return np.floor(x.astype(float) + 0.5)


def _row(comparison: str, stats: dict[str, float], keep: Sequence[str] = STATS) -> dict[str, Any]:
    row: dict[str, Any] = {"comparison": comparison, "n": int(stats.get("n", 0))}
    for k in STATS:
        for s in ("", "_lo", "_hi"):
            row[f"{k}{s}"] = stats.get(f"{k}{s}", math.nan) if k in keep else math.nan
    return row


def ceiling(reviews: pd.DataFrame, seed: int = 0) -> dict[str, Any]:
    """Reviewers vs reviewers on papers with ≥ 2 reviews: every pair of reviews of one paper."""
    multi = reviews.groupby("paper_id").filter(lambda g: len(g) >= 2)
    pairs = [
        (a, b)
        for _, g in multi.groupby("paper_id")
        for a, b in itertools.combinations(g["score"].tolist(), 2)
    ]
    first, second = ([p[i] for p in pairs] for i in (0, 1))
    row = _row(
        f"reviewer vs reviewer ({multi['paper_id'].nunique()} papers with >= 2 reviews)",
        pair_agreement(first, second, seed=seed),
    )
    wide = multi.assign(k=multi.groupby("paper_id").cumcount()).pivot(
        index="k", columns="paper_id", values="score"
    )
    row["alpha_ordinal"] = krippendorff_alpha(wide.to_numpy(dtype=float)) if len(pairs) else math.nan
    return row


def _decided(per_paper: pd.DataFrame) -> pd.Series:
    """Papers with a decision: an empty or missing one is no third class (every rater would 'disagree')."""
    return per_paper["decision"].fillna("").astype(str).str.strip() != ""


def _decision_row(
    judge: str, comparison: str, accept: pd.Series, per_paper: pd.DataFrame, seed: int
) -> dict[str, Any]:
    """`accept` (paper -> Accept/Reject) against the decision, on the papers with one; the others counted."""
    decided = _decided(per_paper.loc[accept.index])
    decision = per_paper.loc[accept.index[decided], "decision"].astype(str).str.strip()
    row = _row(comparison, pair_agreement(accept[decided], decision, seed=seed), keep=("percent", "kappa"))
    return {"judge": judge, **row, "n_no_decision": int((~decided).sum())}


def judge_rows(
    judge: str, g: pd.DataFrame, reviews: pd.DataFrame, per_paper: pd.DataFrame, seed: int
) -> list[dict[str, Any]]:
    """One judge's rows of the module docstring's table, on the reviewed papers it rated."""
    both = g.set_index("paper_id").join(per_paper, how="inner")
    each = reviews.merge(g, on="paper_id", how="inner")
    accept = pd.Series(np.where(both["judge_score"] >= ACCEPT_AT, "Accept", "Reject"), index=both.index)
    return [
        {
            "judge": judge,
            **_row(
                "judge vs mean reviewer",
                pair_agreement(both["judge_score"], both["reviewer_mean"], seed=seed),
                keep=("rho", "tau"),
            ),
        },
        {
            "judge": judge,
            **_row(
                "judge (mapped) vs each review",
                pair_agreement(round_half_up(each["judge_score"]), each["score"], seed=seed),
                keep=("percent", "kappa_w", "rho", "tau"),
            ),
        },
        _decision_row(judge, f"judge accept (score >= {ACCEPT_AT:g}) vs decision", accept, per_paper, seed),
    ]


def reviewer_rows(reviews: pd.DataFrame, per_paper: pd.DataFrame, seed: int) -> list[dict[str, Any]]:
    """The reviewers' reference row (their mean, thresholded) and their ceiling, on the papers given."""
    accept = pd.Series(
        np.where(per_paper["reviewer_mean"] >= ACCEPT_AT, "Accept", "Reject"), index=per_paper.index
    )
    return [
        _decision_row("reviewers", f"reviewer mean >= {ACCEPT_AT:g} vs decision", accept, per_paper, seed),
        {"judge": "reviewers", **ceiling(reviews, seed)},
    ]


def compare(judged: pd.DataFrame, reviews: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The module docstring's table for every judge, then the reviewers' reference and ceiling rows on all
    papers and, like for like, on each set of papers the judges rated when that is not all of them (a
    ``limit=`` run). The ``papers`` column says which papers each row is computed on."""
    per_paper = reviews.groupby("paper_id").agg(
        reviewer_mean=("score", "mean"), decision=("decision", "first")
    )
    reviewed = frozenset(per_paper.index)
    by_judge = [(str(judge), g) for judge, g in judged.groupby("judge")]
    rated = {judge: frozenset(g["paper_id"]) & reviewed for judge, g in by_judge}
    sets: dict[frozenset[str], list[str]] = {}
    for judge, ids in rated.items():
        sets.setdefault(ids, []).append(judge)
    names = {
        ids: f"all {len(ids)}" if ids == reviewed else f"the {len(ids)} {', '.join(js)} rated"
        for ids, js in sets.items()
    }
    rows = [
        {**r, "papers": names[rated[judge]]}
        for judge, g in by_judge
        for r in judge_rows(judge, g, reviews, per_paper, seed)
    ]
    for ids in (reviewed, *(ids for ids in sets if ids != reviewed)):
        rows += [
            {**r, "papers": names.get(ids, f"all {len(ids)}")}
            for r in reviewer_rows(reviews[reviews["paper_id"].isin(ids)], per_paper.loc[sorted(ids)], seed)
        ]
    table = pd.DataFrame(rows)
    return table[["judge", "papers", *(c for c in table if c not in ("judge", "papers"))]]


def check_inputs(
    records: list[dict[str, Any]],
    reviews: pd.DataFrame,
    judged: pd.DataFrame,
    aspect: str,
    root: Path,
    reviews_path: Path,
) -> pd.DataFrame:
    """The judges to compare: those that rated some reviewed paper. A ValueError when the comparison would be
    all empty: no review scores `aspect` (a misspelt --aspect; the aspects found are listed), or no judge rated
    a paper the reviews cover (a run of another dataset). Judges of another study in the folder (a multirun
    root) are dropped with one `note:` line, not an error: the others still compare."""
    if reviews.empty:
        found = sorted({str(k) for r in records for rev in r["reviews"] for k in rev["scores"]})
        raise ValueError(
            f"{reviews_path}: no review has a score for --aspect {aspect!r}; aspects found: {found}"
        )
    reviewed = set(reviews["paper_id"])
    apart = sorted(j for j, g in judged.groupby("judge") if not reviewed & set(g["paper_id"]))
    if apart and len(apart) == judged["judge"].nunique():
        raise ValueError(
            f"{root}: judge(s) {apart} rated no paper reviewed in {reviews_path} "
            "(is this a run of experiment=coling_originality?)"
        )
    if apart:
        print(
            f"note: {root}: left out judge(s) {apart}: they rated no paper reviewed in {reviews_path}",
            file=sys.stderr,
        )
    return judged[~judged["judge"].isin(apart)]


def markdown(table: pd.DataFrame, aspect: str) -> str:
    """The comparison table with its scale mapping stated."""
    lines = [
        f"| judge | papers | comparison | n | {' | '.join(STATS)} | α (ordinal) |",
        "|---|---|---|---|" + "---|" * 6,
    ]
    for _, r in table.iterrows():
        cells = [
            f"{r[k]:.3f} [{r[f'{k}_lo']:.3f}, {r[f'{k}_hi']:.3f}]" if pd.notna(r[k]) else "–" for k in STATS
        ]
        alpha = r.get("alpha_ordinal", math.nan)
        alpha_txt = f"{alpha:.3f}" if pd.notna(alpha) else "–"
        undecided = r.get("n_no_decision", math.nan)
        n = (
            f"{r['n']} (+{int(undecided)} without a decision, left out)"
            if pd.notna(undecided) and undecided
            else r["n"]
        )
        lines.append(
            f"| {md_cell(r['judge'])} | {md_cell(r['papers'])} | {r['comparison']} | {n} | "
            + " | ".join(cells)
            + f" | {alpha_txt} |"
        )
    return "\n".join(lines) + (
        f"\n\nReviewer aspect: {aspect}. Scale mapping: {SCALE_MAPPING}. κ_w: quadratic. "
        "CIs: Fisher z for ρ and τ, bootstrap over items for percent and κ. Papers: those "
        "a row is computed on; compare a judge with the reviewers' rows on the same papers."
        "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="run or multirun folder of experiment=coling_originality")
    parser.add_argument(
        "--reviews",
        default="data:coling2020_reviews.jsonl",
        help="coling2020_reviews.jsonl (default: the fetched file, see experiments.datasets.fetch)",
    )
    parser.add_argument("--aspect", default="Originality", help="the reviewers' score to compare with")
    parser.add_argument("--dimension", default="originality", help="the judge's rubric dimension")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        args.reviews = data_or_path(args.reviews)
        records = load_coling_records(args.reviews)
        reviews = review_scores(records, args.aspect)
        results = load_results(args.root)
        note_perturbed(results, unperturbed(results))
        judged = judge_scores(results, args.dimension)
        if judged.empty:
            raise ValueError(f"{args.root}: no parsed '{args.dimension}' scores in these results")
        judged = check_inputs(records, reviews, judged, args.aspect, args.root, args.reviews)
    except (FileNotFoundError, ValueError) as exc:  # DatasetError is a ValueError
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    table = compare(judged, reviews)
    out = args.out or args.root
    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / "reviewers.csv")
    text = markdown(table, args.aspect)
    (out / "reviewers.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
