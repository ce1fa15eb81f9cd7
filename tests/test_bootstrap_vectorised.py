"""Vectorised resampling (issue 35 item 1): every bootstrap draws its replicates as one weight matrix over
items and computes them with array operations. Each is checked here against the loop it replaces (a
`reference_*` copy of the old code, kept only in this file) on planted data with fixed seeds: the same
interval within Monte Carlo error, the same values where both use the same draws, and coverage over planted
replicates."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import krippendorff
import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import MACE
from statsmodels.stats import inter_rater
from statsmodels.stats.multitest import multipletests

from analysis import latent
from analysis.stats import consistency, illusion, latent_models, null_ranges
from analysis.stats.agreement import cohen_kappa, pair_agreement
from analysis.stats.reliability import alpha_with_ci, fleiss_with_ci
from analysis.stats.study import study_candidates
from tests.support.planted import planted_comparative

N_BOOT = 2000
#: Two percentile endpoints at 2,000 replicates differ by about 0.01 between seeds on these data.
TOL = 0.02


def _interval(reps: np.ndarray) -> tuple[float, float]:
    lo, hi = np.nanquantile(reps, [0.025, 0.975])
    return float(lo), float(hi)


def _ratings(seed: int, n: int = 150, agree: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """Two raters on a 1–5 scale: b copies a with probability `agree`, else draws at random."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, n).astype(float)
    b = np.where(rng.random(n) < agree, a, rng.integers(1, 6, n)).astype(float)
    return a, b


def reference_kappa_loop(
    a: np.ndarray, b: np.ndarray, weights: str | None, n_boot: int, seed: int
) -> tuple[float, float]:
    """The textbook loop: items drawn with replacement, statsmodels' κ per replicate."""
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, len(a), len(a))
        reps[i] = cohen_kappa(a[idx], b[idx], weights=weights)  # type: ignore[arg-type]
    return _interval(reps)


@pytest.mark.parametrize(("key", "weights"), [("kappa", None), ("kappa_w", "quadratic")])
def test_kappa_intervals_equal_the_loop(key: str, weights: str | None) -> None:
    a, b = _ratings(1)
    got = pair_agreement(a, b, n_boot=N_BOOT, seed=3)
    lo, hi = reference_kappa_loop(a, b, weights, N_BOOT, seed=4)
    assert got[f"{key}_lo"] == pytest.approx(lo, abs=TOL)
    assert got[f"{key}_hi"] == pytest.approx(hi, abs=TOL)


def reference_alpha_loop(data: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """Units (columns) drawn with replacement, the `krippendorff` package's ordinal α per replicate."""
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, data.shape[1], data.shape[1])
        reps[i] = krippendorff.alpha(reliability_data=data[:, idx], level_of_measurement="ordinal")
    return _interval(reps)


def reference_fleiss_loop(ratings: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    """Items (rows) drawn with replacement, statsmodels' Fleiss κ per replicate."""
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    for i in range(n_boot):
        idx = rng.integers(0, len(ratings), len(ratings))
        table, _ = inter_rater.aggregate_raters(ratings[idx])
        reps[i] = inter_rater.fleiss_kappa(table, method="fleiss")
    return _interval(reps)


def test_alpha_and_fleiss_intervals_equal_the_loop() -> None:
    a, b = _ratings(2)
    c = np.where(np.random.default_rng(5).random(len(a)) < 0.5, a, b)
    three = np.stack([a, b, c])  # raters × units
    _, lo, hi = alpha_with_ci(three, "ordinal", N_BOOT, seed=6)
    ref = reference_alpha_loop(three, N_BOOT, seed=7)
    assert (lo, hi) == pytest.approx(ref, abs=TOL)
    _, lo, hi, _ = fleiss_with_ci(three.T, N_BOOT, seed=8)
    assert (lo, hi) == pytest.approx(reference_fleiss_loop(three.T, N_BOOT, seed=9), abs=TOL)


def reference_shift_loop(paired: pd.DataFrame, n_boot: int, seed: int) -> tuple[float, float]:
    """Instances drawn with replacement, both outcomes kept together, Δ win rate per replicate."""
    change = (paired["after"].to_numpy() == 1).astype(float) - (paired["before"].to_numpy() == 1)
    rng = np.random.default_rng(seed)
    reps = np.array([change[rng.integers(0, len(change), len(change))].mean() for _ in range(n_boot)])
    return _interval(reps)


def test_paired_shift_interval_equals_the_loop() -> None:
    rng = np.random.default_rng(10)
    before = rng.choice([-1, 0, 1], 120, p=[0.4, 0.2, 0.4])
    after = np.where(rng.random(120) < 0.7, before, rng.choice([-1, 0, 1], 120, p=[0.2, 0.2, 0.6]))
    paired = pd.DataFrame({"judge": "j", "source": "g", "dimension": "d", "before": before, "after": after})
    got = illusion.paired_shift(paired, ["judge", "source", "dimension"], N_BOOT, seed=11).iloc[0]
    lo, hi = reference_shift_loop(paired, N_BOOT, seed=12)
    assert (got["delta_win_lo"], got["delta_win_hi"]) == pytest.approx((lo, hi), abs=TOL)


def test_kappa_interval_covers_the_planted_kappa() -> None:
    """200 planted studies of 80 items (b copies a with probability 0.6 on 5 equally likely categories, so
    κ = 0.6): the vectorised percentile interval covers 0.6 in about 95% of them."""
    covered = 0
    for seed in range(200):
        a, b = _ratings(100 + seed, n=80)
        got = pair_agreement(a, b, n_boot=400, seed=seed)
        covered += got["kappa_lo"] <= 0.6 <= got["kappa_hi"]
    assert 0.90 <= covered / 200 <= 0.99


# --- MACE: the vectorised EM against crowd-kit, and its batched refits against the loop of refits ---


def _mace_labels(seed: int, n_items: int = 40) -> pd.DataFrame:
    """Win / tie / loss labels of 4 raters on `n_items` items: two good (80% right), one fair (60%), one
    spammer (uniform), true labels uniform; rows in a shuffled order."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(-1, 2, n_items)
    rows = []
    for rater, right in (("a", 0.8), ("b", 0.8), ("c", 0.6), ("d", 0.0)):
        label = np.where(rng.random(n_items) < right, truth, rng.integers(-1, 2, n_items))
        rows.append(
            pd.DataFrame({"task": [f"t{i:03d}" for i in range(n_items)], "worker": rater, "label": label})
        )
    frame = pd.concat(rows, ignore_index=True)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True).assign(kind="judge")


def _crowdkit(labels: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MACE(n_restarts=1, n_iter=50, random_state=0).fit(labels[["task", "worker", "label"]])
    names = pd.factorize(labels["worker"])[1]
    return pd.Series(model.spamming_[:, 1], index=names), model.probas_


def test_mace_em_equals_crowdkit() -> None:
    """Known value: with rows in sorted (worker, label, task) order, so that crowd-kit's factorised codes and
    its sorted strategy counts agree, crowd-kit's competences and posteriors are ours to 1e-6."""
    labels = _mace_labels(0)
    ordered = labels.sort_values(["worker", "label", "task"]).reset_index(drop=True)
    competence, probas = _crowdkit(ordered)
    fit = latent_models.mace(labels)
    assert fit.parameter is not None
    assert competence.to_numpy() == pytest.approx(
        fit.parameter.reindex(competence.index).to_numpy(), abs=1e-6
    )
    ours = fit.posteriors.reindex(index=probas.index, columns=probas.columns).to_numpy()
    assert ours == pytest.approx(probas.to_numpy(), abs=1e-6)


def test_mace_does_not_depend_on_row_order() -> None:
    """crowd-kit 1.4 indexes its strategy counts in sorted order against first-seen codes, so shuffling
    the rows moved a rater's competence by 0.1–0.26 on the sample study; ours is the same in any order, and
    ranks the spammer last."""
    labels = _mace_labels(1)
    first = latent_models.fitted(latent_models.mace(labels).parameter, "competence")
    again = latent_models.fitted(
        latent_models.mace(labels.iloc[::-1].reset_index(drop=True)).parameter, "competence"
    )
    assert again.reindex(first.index).to_numpy() == pytest.approx(first.to_numpy(), abs=1e-12)
    assert first.idxmin() == "d"


def reference_refit_loop(
    labels: pd.DataFrame, fitter: Callable[[pd.DataFrame], latent_models.LatentFit], n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The old `competence_table` refit loop: per replicate, items resampled (`latent._resample`) and the
    model fitted again; (accuracy, competence) replicates, raters in sorted order."""
    raters = pd.Index(sorted(labels["worker"].unique()))
    rng = np.random.default_rng(seed)
    acc, par = np.full((n_boot, len(raters)), np.nan), np.full((n_boot, len(raters)), np.nan)
    for b in range(n_boot):
        boot = fitter(latent._resample(labels, rng))
        acc[b] = boot.accuracy.reindex(raters).to_numpy()
        par[b] = boot.parameter.reindex(raters).to_numpy()  # type: ignore[union-attr]
    return acc, par


def test_mace_refits_equal_the_loop_of_refits() -> None:
    """One weighted EM for all replicates against one EM per resampled table: per rater the same replicate
    distribution of accuracy and competence within Monte Carlo error (120 replicates each: means within
    0.03, standard deviations within 25%)."""
    labels = _mace_labels(2)
    raters = pd.Index(sorted(labels["worker"].unique()))
    acc, par = latent._mace_refit_boot(labels, raters, 120, seed=0)
    ref_acc, ref_par = reference_refit_loop(labels, latent_models.mace, 120, seed=1)
    for new, old in ((acc, ref_acc), (par, ref_par)):
        assert np.nanmean(new, axis=0) == pytest.approx(np.nanmean(old, axis=0), abs=0.03)
        assert np.nanstd(new, axis=0) == pytest.approx(np.nanstd(old, axis=0), rel=0.25)


def test_weighted_mace_is_the_fit_on_repeated_items() -> None:
    """Weights stand for repeated items: an item of weight 2 fits as the item twice under two task names."""
    labels = _mace_labels(3, n_items=30)
    tasks, names = pd.factorize(labels["task"], sort=True)
    workers, w_names = pd.factorize(labels["worker"], sort=True)
    codes, l_names = pd.factorize(labels["label"], sort=True)
    weights = np.ones(len(names))
    weights[:5] = 2.0
    weights[5:8] = 0.0
    shape = (len(names), len(w_names), len(l_names))
    fit = latent_models.mace_em(tasks, workers, codes, shape, weights=weights[None, :])
    repeated = pd.concat(
        [labels.loc[labels["task"].isin(names[5:8]) == False]]  # noqa: E712
        + [labels.loc[labels["task"].isin(names[:5])].assign(task=lambda f: f["task"] + "#2")],
        ignore_index=True,
    )
    direct = latent_models.fitted(latent_models.mace(repeated).parameter, "competence")
    assert fit.spamming[0, :, 1] == pytest.approx(direct.reindex(w_names).to_numpy(), abs=1e-9)


# --- the card's null ranges: the same replicates as the loops they replace ---


def reference_position_null(results: pd.DataFrame, perms: np.ndarray) -> np.ndarray:
    """The old loop: per replicate, the slots' positions permuted (`perms`, one row per replicate), merged
    back onto the rows and `consistency.position_bias` run again; the furthest position's excess."""
    rows = results.loc[results["position"].notna().to_numpy()]
    prompt = ["judge", "mode", *consistency._prompt_keys(rows), "dimension"]
    slots = rows[[*prompt, "candidate_id", "position"]].drop_duplicates([*prompt, "candidate_id"])
    slots = slots.reset_index(drop=True)
    others = rows.drop(columns="position")
    out = []
    for perm in perms:
        new = slots.assign(position=slots["position"].to_numpy()[perm])
        shown = others.merge(new, on=[*prompt, "candidate_id"], how="left")
        out.append(consistency.furthest_position(consistency.position_bias(shown))["excess"].to_numpy())
    return np.array(out)


def test_position_null_equals_the_loop_on_the_same_permutations() -> None:
    """The same permutations through the old merge-and-recompute loop and the new weighted counts give the
    same replicates to 1e-12."""
    results = planted_comparative(bias=0.3, seed=4, n_prompts=25)
    stat = null_ranges._position(results, ["comparative"])
    _, new = stat(20, np.random.default_rng(0))
    # the permutations the new code drew, in the old code's slot order
    rows = results.loc[results["position"].notna().to_numpy()]
    prompt = ["judge", "mode", *consistency._prompt_keys(rows), "dimension"]
    slots = rows[[*prompt, "candidate_id"]].drop_duplicates().reset_index(drop=True)
    groups = slots.groupby(prompt, sort=False, observed=True).ngroup().to_numpy()
    perms = null_ranges.permute_within(groups, 20, np.random.default_rng(0))
    old = reference_position_null(results, perms)
    assert new.to_numpy()[0] == pytest.approx(old[:, 0], abs=1e-12)


def test_permute_within_draws_uniform_permutations_within_groups() -> None:
    groups = np.array([0, 0, 0, 1, 1, 2])
    perms = null_ranges.permute_within(groups, 6000, np.random.default_rng(1))
    assert (groups[perms] == groups).all()  # nothing leaves its group
    _, counts = np.unique(perms[:, :3], axis=0, return_counts=True)
    assert len(counts) == 6 and counts.min() > 850 and counts.max() < 1150  # 3! orders, 1000 each


def reference_mode_shift_null(paired: pd.DataFrame, n_reps: int, rng: np.random.Generator) -> np.ndarray:
    """The old loop: per replicate, each item's two verdicts swapped with probability ½ and
    `illusion.paired_shift` run again; its `delta_win`."""
    out = []
    for _ in range(n_reps):
        swap = rng.random(len(paired)) < 0.5
        p = paired.assign(
            before=np.where(swap, paired["after"], paired["before"]),
            after=np.where(swap, paired["before"], paired["after"]),
        )
        out.append(illusion.paired_shift(p, [*illusion.MODE_SHIFT_KEYS, "mode"], n_boot=1)["delta_win"])
    return np.array(out)


def test_mode_shift_null_equals_the_loop() -> None:
    """The same generator stream gives the same swaps, so the replicates are the loop's to 1e-12."""
    rng = np.random.default_rng(13)
    n = 90
    frame = pd.DataFrame(
        {
            "judge": "j",
            "instance_id": [f"i{i}" for i in range(n)],
            "candidate_id": "c1",
            "source": "gen",
            "dimension": "originality",
            "higher_is_better": True,
            "score": rng.integers(1, 6, n).astype(float),
        }
    )
    ref = frame.assign(candidate_id="ref", source="reference", score=3.0)
    cands = pd.concat(
        [
            pd.concat([frame, ref]).assign(mode="independent"),
            pd.concat([frame.assign(score=rng.integers(1, 6, n).astype(float)), ref]).assign(
                mode="comparative"
            ),
        ],
        ignore_index=True,
    )
    stat = null_ranges._mode_shift(cands, "reference", [("independent", "comparative")])
    _, new = stat(40, np.random.default_rng(7))
    paired = illusion.mode_pairs(cands, "reference", ("independent", "comparative")).assign(
        mode="comparative"
    )
    old = reference_mode_shift_null(paired, 40, np.random.default_rng(7))
    assert new.to_numpy()[0] == pytest.approx(old[:, 0], abs=1e-12)


def test_holm_is_statsmodels_holm() -> None:
    p = np.random.default_rng(14).random(17) ** 3
    assert null_ranges.holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)


def test_the_card_null_ranges_still_flag_a_planted_position_bias() -> None:
    results = planted_comparative(bias=0.8, seed=1)
    table = null_ranges.null_ranges(results, study_candidates(results), n_reps=200, fields=("position_bias",))
    assert bool(table["flag"].iloc[0]) and table["value"].iloc[0] > table["null_hi"].iloc[0]
