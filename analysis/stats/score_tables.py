"""The tables of candidate scores per rater: their summary and the raters' agreement on them.

A sibling of `analysis.stats.scores` and `analysis.stats.humans` (both of which it reads), so that neither
imports the other to declare these tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.stats import humans as human_mod
from analysis.stats import scores
from analysis.stats.agreement import agreement_table
from analysis.stats.spec import FigureSpec, Headline, Inputs, Section, Tables, TableSpec


def score_raters(results: pd.DataFrame, humans: pd.DataFrame | None) -> pd.DataFrame:
    """Candidate scores per rater (judge [mode], human:<annotator>) for agreement and distributions."""
    frames = [scores.candidate_scores(results)]
    if humans is not None and len(humans):
        directions = scores.dimension_directions(results)
        frames.append(scores.candidate_scores(human_mod.human_results(humans, directions)))
    cols = ["judge", "mode", "instance_id", "candidate_id", "source", "dimension", "score"]
    out = pd.concat([scores.text_columns(f[cols], cols[:-1]) for f in frames], ignore_index=True)
    out.insert(0, "rater", human_mod.rater_label(out["judge"], out["mode"]))
    return out


def _score_agreement(s: Inputs, _: Tables) -> pd.DataFrame | None:
    raters = score_raters(s.cands, s.humans)
    if raters["rater"].nunique() < 2:
        return None
    raters["score"] = np.floor(raters["score"] + 0.5)  # the rubric's integer scale, half up
    keys = ["instance_id", "candidate_id", "dimension"]
    return agreement_table(raters, "rater", keys, "score", "ordinal", s.n_boot, s.seed)


SCORE_SUMMARY: TableSpec = TableSpec(
    "score_summary",
    lambda s, _: scores.score_summary(scores.candidate_scores(s.cands)),
    ("judge", "mode", "source", "dimension", "n", "mean", "sd"),
    section=Section.scores,
    figure=FigureSpec(
        "score_distributions", "score_distributions", lambda _, s: (score_raters(s.study, s.humans),)
    ),
    headline=Headline("mean", "max", "highest mean score"),
    meanings={
        "source": "generator of the candidate (the reference's source is `reference`)",
        "dimension": "rubric dimension scored",
        "n": "number of items the statistic is computed on",
        "mean": "mean",
        "sd": "standard deviation",
    },
)
SCORE_AGREEMENT: TableSpec = TableSpec(
    "score_agreement",
    _score_agreement,
    ("rater_a", "rater_b", "n", "kappa_w", "alpha"),
    section=Section.score_agreement,
    figure=FigureSpec(
        "score_agreement",
        "agreement_heatmap",
        lambda t, _: (
            SCORE_AGREEMENT.need(t),
            "kappa_w",
            "quadratic-weighted κ on candidate scores (95% CI)",
        ),
    ),
    headline=Headline("kappa_w", "max", "highest κ_w"),
    meanings={
        "rater_a": "first rater of the pair",
        "rater_b": "second rater of the pair",
        "n_raters": "raters in the comparison",
        "percent": "share of items with the same value",
        "kappa": "Cohen's κ",
        "kappa_w": "quadratic-weighted Cohen's κ (ordinal scores)",
        "rho": "Spearman ρ",
        "tau": "Kendall τ",
        "alpha": "Krippendorff's α (ordinal)",
    },
)
