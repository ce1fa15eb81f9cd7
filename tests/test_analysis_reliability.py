"""The vectorised formulas behind the bootstrap CIs, checked against the libraries on random data (1e-9),
and the multinomial bootstrap checked against resampling instances by index."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats import inter_rater

from analysis.stats.agreement import confusion
from analysis.stats.reliability import (
    _patterns,
    alpha_from_coincidences,
    alpha_with_ci,
    coincidences,
    disagreement_weights,
    fleiss_from_patterns,
    fleiss_with_ci,
    kappa_from_tables,
    kendall_from_table,
    spearman_from_table,
    value_counts,
)
from core.intervals import fisher_z_interval, percentile_ci, resample_counts, t_interval, wilson_interval


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_from_tables_matches_statsmodels(weights: str | None) -> None:
    rng = np.random.default_rng(0)
    for _ in range(40):
        k = int(rng.integers(2, 7))
        table = rng.integers(0, 20, size=(k, k))
        scores = np.sort(rng.choice(np.arange(1, 20), size=k, replace=False)).astype(float)
        if weights is None:
            expected = inter_rater.cohens_kappa(table, return_results=False)
        else:
            expected = inter_rater.cohens_kappa(table, weights=scores, wt=weights, return_results=False)
        got = kappa_from_tables(table, disagreement_weights(scores, weights))
        assert got == pytest.approx(expected, abs=1e-9)
    stacked = rng.integers(1, 9, size=(5, 3, 3))  # a leading replicate axis
    singles = [kappa_from_tables(t, disagreement_weights(np.arange(3.0), None)) for t in stacked]
    assert kappa_from_tables(stacked, disagreement_weights(np.arange(3.0), None)) == pytest.approx(singles)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_from_coincidences_matches_the_package(level: str) -> None:
    rng = np.random.default_rng(1)
    for _ in range(25):
        data = rng.integers(1, int(rng.integers(3, 8)), size=(int(rng.integers(2, 6)), 50)).astype(float)
        data[rng.random(data.shape) < 0.35] = np.nan
        counts, values = value_counts(data)
        patterns, freq = _patterns(counts[counts.sum(axis=1) >= 2])
        got = alpha_from_coincidences(coincidences(patterns, freq.astype(float)), values, level)
        assert got == pytest.approx(krippendorff.alpha(data, level_of_measurement=level), abs=1e-9)


def test_alpha_with_ci_point_and_interval() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(1, 6, 200)
    data = np.vstack([np.clip(truth + rng.integers(-1, 2, 200), 1, 5) for _ in range(3)]).astype(float)
    alpha, lo, hi = alpha_with_ci(data, "ordinal", n_boot=400, seed=0)
    assert alpha == pytest.approx(krippendorff.alpha(data, level_of_measurement="ordinal"), abs=1e-12)
    assert lo < alpha < hi and hi - lo < 0.2
    assert np.isnan(alpha_with_ci(np.array([[1.0, 1.0], [1.0, 1.0]]))[0])  # one value only: undefined


def test_fleiss_from_patterns_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for _ in range(25):
        data = rng.integers(0, 4, size=(int(rng.integers(5, 60)), int(rng.integers(2, 6))))
        table, _ = inter_rater.aggregate_raters(data)
        patterns, freq = _patterns(table)
        got = fleiss_from_patterns(patterns, freq.astype(float))
        assert got == pytest.approx(inter_rater.fleiss_kappa(table), abs=1e-9)
    kappa, lo, hi, n = fleiss_with_ci(rng.integers(0, 3, size=(80, 3)), n_boot=300)
    assert n == 80 and lo <= kappa <= hi


@pytest.mark.filterwarnings("ignore:An input array is constant")
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=3, max_size=40))
def test_rank_correlations_from_the_table_match_scipy(pairs: list[tuple[int, int]]) -> None:
    a, b = (np.array(x, dtype=float) for x in zip(*pairs, strict=True))
    table, _ = confusion(a, b)
    assert spearman_from_table(table) == pytest.approx(stats.spearmanr(a, b)[0], abs=1e-9, nan_ok=True)
    assert kendall_from_table(table) == pytest.approx(stats.kendalltau(a, b)[0], abs=1e-9, nan_ok=True)


def test_packed_patterns_equal_numpy_unique() -> None:
    rng = np.random.default_rng(4)
    counts = rng.integers(0, 4, size=(500, 6))
    patterns, freq = _patterns(counts)
    expected, expected_freq = np.unique(counts, axis=0, return_counts=True)
    order = np.lexsort(patterns.T[::-1])
    assert (patterns[order] == expected).all() and (freq[order] == expected_freq).all()
    wide = rng.integers(0, 200, size=(50, 12))  # 12 · log2(200) > 62 bits: the np.unique fallback
    assert _patterns(wide)[1].sum() == 50


def test_multinomial_bootstrap_equals_resampling_instances() -> None:
    # 40 instances: 22 wins, 10 ties, 8 losses. Resampling instances by index and counting categories
    # must give the same distribution as one multinomial draw per replicate.
    outcomes = np.array([0] * 22 + [1] * 10 + [2] * 8)
    rng = np.random.default_rng(5)
    by_index = np.stack([np.bincount(outcomes[rng.integers(0, 40, 40)], minlength=3) for _ in range(20000)])
    by_counts = resample_counts(np.bincount(outcomes), 20000, seed=6)
    assert by_counts.shape == (20000, 3) and (by_counts.sum(axis=1) == 40).all()
    assert by_counts.mean(axis=0) == pytest.approx(by_index.mean(axis=0), rel=0.02)
    assert by_counts.std(axis=0) == pytest.approx(by_index.std(axis=0), rel=0.05)
    # Multinomial(n, p) variance n·p·(1 − p): 40 · .55 · .45 = 9.9 for the wins
    assert by_counts[:, 0].var() == pytest.approx(9.9, rel=0.05)


def test_resample_counts_by_group_and_empty_group() -> None:
    counts = np.array([[5, 0, 0], [0, 0, 0], [1, 1, 1]])
    boot = resample_counts(counts, 100, seed=0)
    assert boot.shape == (100, 3, 3)
    assert (boot[:, 0] == [5, 0, 0]).all() and (boot[:, 1] == 0).all() and (boot[:, 2].sum(axis=1) == 3).all()


def test_interval_helpers_by_hand() -> None:
    # t interval: mean 10, sd 2, n 4 -> 10 ± t(.975, 3)·2/2 = 10 ± 3.182446
    lo, hi = t_interval(np.array([10.0]), np.array([2.0]), np.array([4]))
    assert lo[0] == pytest.approx(10 - 3.182446305, abs=1e-6) and hi[0] == pytest.approx(
        10 + 3.182446305, abs=1e-6
    )
    # Wilson, 0 of 5: upper = z²/(n + z²) = 3.8415/8.8415 = .43448
    lo, hi = wilson_interval(np.array([0]), np.array([5]))
    assert lo[0] == pytest.approx(0.0, abs=1e-12) and hi[0] == pytest.approx(0.434482, abs=1e-5)
    assert np.isnan(wilson_interval(np.array([0]), np.array([0]))[0][0])
    # Fisher z for ρ = .5, n = 28: se = sqrt((1 + .125)/25) = .212132; tanh(atanh(.5) ± 1.959964·se)
    lo, hi = fisher_z_interval(0.5, 28)
    z, half = np.arctanh(0.5), 1.959963985 * np.sqrt(1.125 / 25)
    assert (lo, hi) == pytest.approx((np.tanh(z - half), np.tanh(z + half)), abs=1e-9)
    lo, hi = percentile_ci(np.array([[1.0, np.nan], [2.0, np.nan], [3.0, np.nan]]), 0.5)
    assert lo[0] == pytest.approx(1.5) and hi[0] == pytest.approx(2.5) and np.isnan(lo[1])
