"""Corrected (prediction-powered) estimates, analysis.stats.corrected: coverage on a planted biased judge, the
library's own numbers, and the report's table on a study with experts."""

from __future__ import annotations

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report.build import compute_tables
from analysis.stats.corrected import corrected_estimates, declare_design, estimate
from analysis.stats.scores import CONTEXT_KEYS, candidate_scores


def biased_judge(seed: int, n: int = 4000, labelled: int = 600, truth: float = 0.35, bias: float = 0.12):
    """True wins at rate `truth`; the judge also calls a win on a share of the true losses, enough to raise
    its win rate by `bias`. The first `labelled` items carry the experts' (true) label."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < truth).astype(float)
    extra = (rng.random(n) < bias / (1 - truth)) & (y == 0)
    yhat = np.maximum(y, extra.astype(float))
    return y[:labelled], yhat[:labelled], yhat[labelled:], truth


def test_planted_bias_corrected_covers_and_judge_only_does_not() -> None:
    covered = judge_covered = narrower = 0
    for seed in range(200):
        y, yhat, rest, truth = biased_judge(seed)
        got = estimate(y, yhat, rest)
        covered += got.corrected[1] <= truth <= got.corrected[2]
        judge_covered += got.judge_only[1] <= truth <= got.judge_only[2]
        narrower += (got.corrected[2] - got.corrected[1]) < (got.human_only[2] - got.human_only[1])
    assert covered / 200 >= 0.93
    assert judge_covered / 200 < 0.10
    assert narrower == 200


def test_estimates_are_the_library_s_and_effective_n_follows_the_widths() -> None:
    y, yhat, rest, _ = biased_judge(1)
    got = estimate(y, yhat, rest)
    lo, hi = ppi_mean_ci(y, yhat, rest, alpha=0.05)
    assert got.corrected[1:] == pytest.approx((float(lo[0]), float(hi[0])))
    h_lo, h_hi = classical_mean_ci(y, alpha=0.05)
    assert got.human_only == pytest.approx((y.mean(), h_lo, h_hi))
    assert got.judge_only[0] == pytest.approx(np.concatenate([yhat, rest]).mean())
    width_ratio = (h_hi - h_lo) / (got.corrected[2] - got.corrected[1])
    assert got.n_effective == pytest.approx(600 * width_ratio**2)
    assert got.n_effective > 600  # the judge's labels are worth more expert labels than were given


def test_report_has_corrected_estimates_per_judge_and_dimension() -> None:
    study = synthetic_results(n_instances=12, seed=4)
    humans = declare_design(synthetic_humans(study, seed=5), "random", "synthetic")
    tables = compute_tables(study, humans, n_boot=20)
    table = tables["corrected_estimates"]
    assert set(table["quantity"]) <= {"win_rate", "mean_score"} and len(table)
    direct = corrected_estimates(candidate_scores(study, CONTEXT_KEYS, "reference"), humans)
    assert len(direct) == len(table)
    assert (table["corrected_lo"] <= table["corrected"]).all() and (
        table["corrected"] <= table["corrected_hi"]
    ).all()
