"""The study's core quantity, computed one way for every view: candidate scores per prompt context.

The report, the paper tables, the judge card and the latent models all start from `study_candidates`: the
unperturbed rows (`unperturbed`: perturbed ones are `analysis.robustness`'s), one score per judged candidate, and a
reference scored in several generators' comparative prompts kept once per prompt context, so that each
generator is compared with the reference scored in its own prompt (`scores.join_reference`). A view that
needs the reference averaged over prompts (best-five scores, agreement on candidate scores) collapses this
table with `scores.candidate_scores`; none starts again from the rows.
"""

from __future__ import annotations

import pandas as pd

from analysis.stats.scores import CONTEXT_KEYS, ORIGINAL, candidate_scores, perturbation_names


def unperturbed(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of no robustness perturbation (`none`, or empty in a run without the column; the viewer's
    rule): the study's tables score these only, since a candidate's perturbed copies pooled with it moved its
    score (3 unperturbed and 1 padded made 2). `robustness_table` reads the perturbed rows. No-op without the
    column."""
    if "perturbation" not in results:
        return results
    keep = perturbation_names(results["perturbation"]) == ORIGINAL
    return results if keep.all() else results.loc[keep]


def study_candidates(results: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """Candidate scores of the unperturbed rows, the reference once per prompt context (`scores.CONTEXT`)."""
    return candidate_scores(unperturbed(results), CONTEXT_KEYS, reference)
