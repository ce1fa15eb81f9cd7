"""Issue 32 items 5 and 6 through the report command (in process): every table that compares raters rests on the items all
compared raters scored, with n per rater, and rates keep honest intervals at small n."""

from __future__ import annotations

from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats import inter_rater
from statsmodels.stats.proportion import proportion_confint

from analysis.stats.agreement import pair_agreement
from analysis.stats.calibration import ece_interval, expected_calibration_error, reliability_bins
from analysis.stats.reliability import alpha_with_ci, fleiss_with_ci
from core.intervals import BOOT_MIN_N, exact_interval, trusted_bootstrap, wilson_interval
from tests.support.report_run import report_without_figures
from tests.support.study_folders import DIMENSIONS, sample_candidates, write_fake_run

#: Generated candidates the experts rate (10) and the judges score (j1 7 of them, j2 6 of j1's 7).
PAIRS = [c for _, c, source, _ in sample_candidates() if source != "reference"][:10]
J1, J2 = set(PAIRS[:7]), set(PAIRS[:6])


def planted_study(tmp: Path) -> tuple[Path, Path]:
    """A two-judge run folder and a labels file: 3 experts rate 10 pairs on every dimension; the judges
    leave pairs unscored (j1 3, j2 4), so only 6 pairs are scored by every rater. On those 6 the experts
    prefer the reference; on the 4 the judges did not score, the generated candidate."""
    scored = {"j1": J1, "j2": J2}
    gen = set(PAIRS)

    def scorer(judge: str, cand: str, dim: str, k: int) -> float | None:
        if cand in gen and cand not in scored[judge]:
            return None  # unscored: a budget stop or an unparsed answer
        return 1.0 if cand.endswith(":ref") else 2.0

    root = tmp / "runs"
    for judge in ("j1", "j2"):
        write_fake_run(root / judge, judge, "independent", scorer)
    instances = {c: i for i, c, _, _ in sample_candidates()}
    sources = {c: s for _, c, s, _ in sample_candidates()}
    rows = []
    for a, expert in enumerate(("expert_a", "expert_b", "expert_c")):
        for p, cand in enumerate(PAIRS):
            inst = instances[cand]
            # judged pairs: mostly losses for the generated candidate; unjudged pairs: wins
            gen_score = 3 if cand not in J2 else (0 if (p + a) % 3 else 2)
            for cid, score in ((f"{inst}:ref", 1), (cand, gen_score)):
                for dim in DIMENSIONS:
                    rows.append((expert, inst, cid, sources[cid], dim, score))
    labels = pd.DataFrame(
        rows, columns=["annotator", "instance_id", "candidate_id", "source", "dimension", "score"]
    )
    labels = labels.drop_duplicates(["annotator", "instance_id", "candidate_id", "dimension"])
    path = tmp / "humans.csv"
    labels.to_csv(path, index=False)
    return root, path


def report(tmp: Path, root: Path, humans: Path) -> Path:
    """The report command's tables (in this process, figures undrawn: only tables are read here)."""
    out = tmp / "report"
    argv = [str(root), "--humans", str(humans), "--out", str(out), "--n-boot", "50"]
    assert report_without_figures(argv) == 0
    return out / "tables"


def test_every_rater_row_rests_on_the_same_pairs(tmp_path: Path) -> None:
    tables = report(tmp_path, *planted_study(tmp_path))
    rates = pd.read_csv(tables / "expert_vs_judge.csv")
    rates = rates.loc[rates["dimension"] == "originality"].set_index("rater")
    raters = [f"human:expert_{x}" for x in "abc"] + ["j1 [independent]", "j2 [independent]"]
    assert rates.loc[raters, "n"].tolist() == [6] * 5  # before: experts 10, j1 7, j2 6
    # on the 6 shared pairs each expert prefers the reference on 4 (before: 4 of 10 with 4 extra wins)
    assert (rates.loc[raters[:3], "gen_win"] <= 2 / 6 + 1e-9).all()
    winners = pd.read_csv(tables / "winner_agreement.csv")
    pairs = winners.loc[winners["kind"] != "all"]
    judged = pairs.loc[~pairs["rater_a"].eq("human:majority") & ~pairs["rater_b"].eq("human:majority")]
    assert set(judged["n"]) == {6 * len(DIMENSIONS)}  # before: expert vs j1 on 7 pairs per dimension
    agree = pd.read_csv(tables / "human_agreement.csv")
    assert set(agree["n"]) == {7}  # the 6 pairs and their reference, for both judges (before: j1 8, j2 7)
    latent = pd.read_csv(tables / "latent_competence.csv")
    assert set(latent["n_items"]) == {6 * len(DIMENSIONS)}  # before: experts 30, j1 21, j2 18


def test_exact_and_wilson_intervals_are_statsmodels_s() -> None:
    k, n = np.array([0, 3, 7, 0]), np.array([3, 3, 20, 0])
    for method, fn in (("beta", exact_interval), ("wilson", wilson_interval)):
        lo, hi = fn(k, n)
        ref_lo, ref_hi = proportion_confint(k[:3], n[:3], alpha=0.05, method=method)
        assert lo[:3] == pytest.approx(ref_lo) and hi[:3] == pytest.approx(ref_hi)
        assert np.isnan(lo[3]) and np.isnan(hi[3])
    # by hand: 3 of 3, exact lower bound (α/2)^(1/3) = 0.025^(1/3)
    assert exact_interval(3, 3)[0] == pytest.approx(0.025 ** (1 / 3))


def test_a_bootstrap_ci_is_shown_only_where_it_can_be_trusted() -> None:
    lo, hi = trusted_bootstrap([0.1, 0.1, 0.5], [0.4, 0.4, 0.5], [BOOT_MIN_N - 1, BOOT_MIN_N, 100])
    assert np.isnan(lo[0]) and (lo[1], hi[1]) == (0.1, 0.4) and np.isnan(lo[2])  # few units; degenerate
    few = pair_agreement([1, 0, 1, 1, 0], [1, 0, 1, 0, 0], n_boot=200)
    assert few["n"] == 5 and np.isnan(few["kappa_lo"]) and np.isnan(few["kappa_w_hi"])
    assert 0 < few["percent_lo"] < few["percent"] < few["percent_hi"] < 1  # a rate: Wilson at any n
    same = pair_agreement([1, 0] * 20, [1, 0] * 20, n_boot=200)  # every replicate κ = 1: no CI
    assert same["kappa"] == 1.0 and np.isnan(same["kappa_lo"]) and same["percent_lo"] < 1.0
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 60)
    many = pair_agreement(a, np.where(rng.random(60) < 0.7, a, rng.integers(0, 3, 60)), n_boot=200)
    assert many["kappa_lo"] < many["kappa"] < many["kappa_hi"]


def test_ece_gets_an_interval_that_covers_and_a_perfect_small_sample_is_not_perfect() -> None:
    truth = np.array([1] * 14 + [0] * 14, dtype=float)
    assert expected_calibration_error(truth, truth) == 0.0  # 28 verdicts, all right: ECE 0.000
    lo, hi = ece_interval(truth, truth)
    assert lo == 0.0 and hi > 0.2  # ... but 14 per bin cannot rule out an error of a fifth
    bins = reliability_bins(truth, truth)
    assert bins["n"].tolist() == [14, 14] and bins["observed_lo"].iloc[1] < 1.0
    # planted: predictions p, truth drawn at p + 0.15 (capped), true ECE known; 200 replicates
    rng = np.random.default_rng(1)
    p = rng.uniform(0.05, 0.8, 80)
    theta = np.clip(p + 0.15, 0, 1)
    b = np.clip((p * 10).astype(int), 0, 9)
    covered = 0
    for _ in range(200):
        y = (rng.random(80) < theta).astype(float)
        w = np.bincount(b, minlength=10) / 80
        mean_p = np.bincount(b, weights=p, minlength=10) / np.maximum(np.bincount(b, minlength=10), 1)
        mean_t = np.bincount(b, weights=theta, minlength=10) / np.maximum(np.bincount(b, minlength=10), 1)
        true = float((w * np.abs(mean_t - mean_p)).sum())
        lo, hi = ece_interval(p, y)
        covered += lo <= true <= hi
    assert covered / 200 >= 0.95


def test_alpha_and_fleiss_cis_need_boot_min_n_units() -> None:
    """Krippendorff's α and Fleiss' κ keep their point estimates at any n (krippendorff, statsmodels), but
    their bootstrap CIs are NaN below `BOOT_MIN_N` units (for α: units with ≥ 2 ratings) and shown above."""
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, size=60)
    ratings = np.clip(truth[:, None] + rng.integers(-1, 2, size=(60, 3)), 0, 3).astype(
        float
    )  # items × raters
    for n, shown in ((BOOT_MIN_N - 1, False), (BOOT_MIN_N, True), (60, True)):
        part = ratings[:n]
        alpha, a_lo, a_hi = alpha_with_ci(part.T, "ordinal", n_boot=200)
        assert alpha == pytest.approx(krippendorff.alpha(part.T, level_of_measurement="ordinal"), abs=1e-9)
        kappa, k_lo, k_hi, n_items = fleiss_with_ci(part, n_boot=200)
        table, _ = inter_rater.aggregate_raters(part)
        assert n_items == n and kappa == pytest.approx(inter_rater.fleiss_kappa(table), abs=1e-9)
        if shown:
            assert a_lo < alpha < a_hi and k_lo < kappa < k_hi
        else:
            assert np.isnan([a_lo, a_hi, k_lo, k_hi]).all()
    # α's n counts units with ≥ 2 ratings: BOOT_MIN_N - 1 such units plus 30 single-rated ones get no CI
    sparse = ratings[: BOOT_MIN_N - 1 + 30].copy()
    sparse[BOOT_MIN_N - 1 :, 1:] = np.nan
    assert np.isfinite(alpha_with_ci(sparse.T, "ordinal", n_boot=200)[0])
    assert np.isnan(alpha_with_ci(sparse.T, "ordinal", n_boot=200)[1:]).all()
