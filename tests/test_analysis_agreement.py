"""analysis.stats.agreement: hand-computed cases (arithmetic in the comments) and library cross-checks."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats import inter_rater

from analysis.stats.agreement import (
    agreement_table,
    cohen_kappa,
    confusion,
    fleiss_kappa,
    kendall,
    krippendorff_alpha,
    pair_agreement,
    percent_agreement,
    spearman,
)


def test_percent_agreement_ignores_items_missing_a_rating() -> None:
    # items rated by both: (1,1) (2,2) (3,1) -> 2 of 3 agree
    assert percent_agreement([1, 2, 3, np.nan], [1, 2, 1, 2]) == pytest.approx(2 / 3)
    assert percent_agreement(["win", "tie", None], ["win", "loss", "tie"]) == pytest.approx(1 / 2)


def test_cohen_kappa_two_categories_by_hand() -> None:
    a = ["y"] * 6 + ["n"] * 4
    b = ["y", "y", "y", "y", "n", "n", "n", "n", "n", "y"]
    # table: yy 4, yn 2, ny 1, nn 3 -> p_o = 7/10; p_e = .6*.5 + .4*.5 = .5; κ = (.7 - .5) / (1 - .5) = .4
    table, cats = confusion(a, b)
    assert list(cats) == ["n", "y"] and table.tolist() == [[3, 1], [2, 4]]
    assert cohen_kappa(a, b) == pytest.approx(0.4, abs=1e-12)


def test_weighted_kappa_by_hand() -> None:
    a, b = [1, 1, 2, 3], [1, 2, 2, 1]
    # pairs (1,1) (1,2) (2,2) (3,1); p_o = 2/4; marginals a (.5,.25,.25), b (.5,.5,0)
    # unweighted: p_e = .5*.5 + .25*.5 + .25*0 = .375 -> κ = (.5 - .375) / .625 = .2
    assert cohen_kappa(a, b) == pytest.approx(0.2, abs=1e-12)
    # quadratic: Σw·O/n = (1 + 4)/4 = 1.25; Σw·E = .25*1 + .125*1 + .125*4 + .125*1 = 1 -> κ = 1 - 1.25 = -.25
    assert cohen_kappa(a, b, "quadratic") == pytest.approx(-0.25, abs=1e-12)
    # linear: Σw·O/n = (1 + 2)/4 = .75; Σw·E = .25 + .125 + .25 + .125 = .75 -> κ = 0
    assert cohen_kappa(a, b, "linear") == pytest.approx(0.0, abs=1e-12)


def test_weighted_kappa_uses_the_values_as_category_scores() -> None:
    # categories {1, 2, 5}: disagreement 1 vs 5 weighs (5 - 1)^2 = 16, not (index 2 - 0)^2 = 4
    a, b = [1, 2, 5, 5, 1], [2, 1, 5, 1, 1]
    table, cats = confusion(a, b)
    expected = inter_rater.cohens_kappa(
        table, weights=cats.astype(float), wt="quadratic", return_results=False
    )
    assert cohen_kappa(a, b, "quadratic") == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn_on_random_data(weights: str | None) -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(20, 200))
        a = rng.integers(1, 6, n)
        b = np.clip(a + rng.integers(-2, 3, n), 1, 5)
        b[:5] = [1, 2, 3, 4, 5]  # every category occurs, so value and index distances coincide
        assert cohen_kappa(a, b, weights) == pytest.approx(cohen_kappa_score(a, b, weights=weights), abs=1e-9)


def test_fleiss_kappa_by_hand_and_against_statsmodels() -> None:
    ratings = np.array([[0, 0, 0], [1, 1, 1], [0, 0, 1], [0, 1, 1]])
    # P_i = (Σ n_ij² − 3) / 6: 1, 1, (4+1−3)/6 = 1/3, 1/3 -> P̄ = 2/3; p = (.5, .5) -> P_e = .5
    # κ = (2/3 − .5) / (1 − .5) = 1/3
    assert fleiss_kappa(ratings) == pytest.approx(1 / 3, abs=1e-12)
    rng = np.random.default_rng(3)
    for _ in range(20):
        data = rng.integers(0, 4, size=(int(rng.integers(10, 80)), int(rng.integers(2, 6))))
        table, _ = inter_rater.aggregate_raters(data)
        assert fleiss_kappa(data) == pytest.approx(inter_rater.fleiss_kappa(table), abs=1e-9)
    with_missing = np.vstack([ratings, [[0, np.nan, 1]]])  # the incomplete item is dropped
    assert fleiss_kappa(with_missing) == pytest.approx(1 / 3, abs=1e-12)


def test_krippendorff_alpha_by_hand_and_published_example() -> None:
    # units (1,1) (1,2) (2,2) (2,2): coincidences o = [[2,1],[1,4]], n_1 = 3, n_2 = 5, n = 8
    # nominal α = 1 − (n − 1)·(o_12 + o_21) / (2·n_1·n_2) = 1 − 7·2/30 = 16/30
    data = np.array([[1, 1, 2, 2], [1, 2, 2, 2]], dtype=float)
    assert krippendorff_alpha(data, "nominal") == pytest.approx(16 / 30, abs=1e-12)
    # Krippendorff's reliability-data example (3 coders, 15 units, missing values)
    nan = np.nan
    example = [
        [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
        [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
        [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
    ]
    assert krippendorff_alpha(example, "nominal") == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(example, "interval") == pytest.approx(0.810845, abs=1e-6)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_alpha_matches_the_package_with_missing_values(level: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(10):
        data = rng.integers(1, 6, size=(4, 40)).astype(float)
        data[rng.random(data.shape) < 0.3] = np.nan
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert krippendorff_alpha(data, level) == pytest.approx(expected, abs=1e-9)


def test_spearman_and_kendall_by_hand() -> None:
    a, b = [1, 2, 3, 4], [1, 3, 2, 4]
    # d = (0, −1, 1, 0), Σd² = 2 -> ρ = 1 − 6·2 / (4·15) = .8
    assert spearman(a, b) == pytest.approx(0.8, abs=1e-12)
    # 6 pairs, one discordant (2,3) -> τ = (5 − 1)/6 = 2/3
    assert kendall(a, b) == pytest.approx(2 / 3, abs=1e-12)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))  # constant rater: undefined


def test_pair_agreement_matches_the_single_statistics() -> None:
    rng = np.random.default_rng(5)
    a = rng.integers(1, 6, 300).astype(float)
    b = np.clip(a + rng.integers(-1, 2, 300), 1, 5)
    a[:10] = np.nan
    got = pair_agreement(a, b, n_boot=300, seed=1)
    keep = ~np.isnan(a)
    assert got["n"] == 290
    assert got["percent"] == pytest.approx(percent_agreement(a, b), abs=1e-12)
    assert got["kappa"] == pytest.approx(cohen_kappa(a, b), abs=1e-12)
    assert got["kappa_w"] == pytest.approx(cohen_kappa(a, b, "quadratic"), abs=1e-12)
    assert got["rho"] == pytest.approx(stats.spearmanr(a[keep], b[keep])[0], abs=1e-9)
    assert got["tau"] == pytest.approx(stats.kendalltau(a[keep], b[keep])[0], abs=1e-9)
    for key in ("percent", "kappa", "kappa_w", "rho", "tau"):
        assert got[f"{key}_lo"] <= got[key] <= got[f"{key}_hi"]
    assert pair_agreement(a, b, n_boot=300, seed=1) == got  # seeded


def test_pair_agreement_on_labels_and_on_nothing() -> None:
    got = pair_agreement(["win", "tie", "win"], ["win", "win", "win"], n_boot=50)
    assert got["percent"] == pytest.approx(2 / 3) and np.isnan(got["rho"]) and np.isnan(got["kappa_w"])
    empty = pair_agreement([np.nan], [1.0], n_boot=50)
    assert empty["n"] == 0 and np.isnan(empty["kappa"])


def test_agreement_table_rows_and_all_raters_alpha() -> None:
    rng = np.random.default_rng(2)
    truth = rng.integers(1, 6, 60)
    rows = []
    for rater, noise in (("r1", 0), ("r2", 1), ("r3", 2)):
        values = np.clip(truth + rng.integers(-noise, noise + 1, 60), 1, 5).astype(float)
        rows += [
            {"rater": rater, "item": i, "dim": "x", "v": v}
            for i, v in enumerate(values)
            if i % 7 or rater != "r3"
        ]
    frame = pd.DataFrame(rows)
    table = agreement_table(frame, "rater", ["item", "dim"], "v", n_boot=200)
    assert list(zip(table["rater_a"], table["rater_b"], strict=True)) == [
        ("r1", "r2"),
        ("r1", "r3"),
        ("r2", "r3"),
        ("(all)", "(all)"),
    ]
    wide = frame.pivot(index=["item", "dim"], columns="rater", values="v")
    r1r2 = table.iloc[0]
    assert r1r2["n"] == 60 and r1r2["kappa_w"] == pytest.approx(
        cohen_kappa(wide["r1"], wide["r2"], "quadratic")
    )
    assert table.iloc[1]["n"] == 60 - 9  # r3 skipped items 0, 7, …, 56
    everyone = table.iloc[-1]
    assert everyone["n_raters"] == 3 and everyone["n"] == 60
    expected = krippendorff.alpha(wide.to_numpy().T, level_of_measurement="ordinal")
    assert everyone["alpha"] == pytest.approx(expected, abs=1e-9)
    assert everyone["alpha_lo"] <= everyone["alpha"] <= everyone["alpha_hi"]


def test_agreement_table_rejects_duplicate_ratings() -> None:
    frame = pd.DataFrame({"rater": ["a", "a", "b"], "item": [1, 1, 1], "v": [1, 2, 3]})
    with pytest.raises(ValueError, match="one value per item and rater"):
        agreement_table(frame, "rater", ["item"], "v")
