"""The study's core quantity, computed one way for every view: candidate scores per prompt context.

The report, the paper tables, the judge card and the latent models all start from `study_candidates`: the
unperturbed rows (perturbed ones are `analysis.robustness`'s), one score per judged candidate, and a
reference scored in several generators' comparative prompts kept once per prompt context, so that each
generator is compared with the reference scored in its own prompt (`scores.join_reference`). A view that
needs the reference averaged over prompts (best-five scores, agreement on candidate scores) collapses this
table with `scores.candidate_scores`; none starts again from the rows.
"""

from __future__ import annotations

import pandas as pd

from analysis.robustness import unperturbed
from analysis.stats.scores import CONTEXT_KEYS, candidate_scores


def study_candidates(results: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """Candidate scores of the unperturbed rows, the reference once per prompt context (`scores.CONTEXT`)."""
    return candidate_scores(unperturbed(results), CONTEXT_KEYS, reference)
