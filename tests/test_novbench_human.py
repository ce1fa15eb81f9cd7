"""NovBench human validation (App. D): planted pairs whose Agreement, rho and kappa are computed by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from scipy.stats import t as student_t

from analysis.novbench.human import VOTE_OPTIONS, Combination, strict_majority, validate, validation_table
from analysis.novbench.metrics import dist_acc
from analysis.stats.agreement import fleiss_kappa
from experiments.datasets.novbench import load_human_pairs
from experiments.datasets.validation import DatasetError

# 6 pairs, 4 annotators. Human preference = share(A) - share(B).
VOTES = np.array(
    [
        list("AAAA"),  # +1
        list("AAAB"),  # +0.5
        list("AABB"),  # 0: no strict majority -> excluded, counted
        list("ABBB"),  # -0.5
        list("BBBB"),  # -1
        list("AAAB"),
    ],  # +0.5
    dtype=object,
)
DIFF = [0.3, -0.1, 0.2, -0.2, -0.4, 0.0]  # metric A - B: agree, disagree, (excluded), agree, agree, tie


def test_strict_majority() -> None:
    assert strict_majority(["A", "A", "B"]) == "A"
    assert strict_majority(["A", "B"]) is None and strict_majority(["B", "B"]) == "B"
    assert strict_majority(["A", "A", "B", "B"]) is None


def test_planted_agreement_rho_kappa_by_hand() -> None:
    res = validate(DIFF, VOTES, n_boot=500, seed=1)
    # Agreement (Eq. 8): pairs with a majority 1, 2, 4, 5, 6 (3 has none; 6 a metric tie, a miss) -> hits 1, 4, 5
    assert res["agreement"] == pytest.approx(3 / 5)
    assert (res["n_pairs"], res["n_no_majority"], res["n_metric_tie"], res["n_agreement"]) == (6, 1, 1, 5)
    # rho over pairs with a majority (1, 2, 4, 5, 6): diff ranks [5, 3, 2, 1, 4], preference
    # (1, .5, -.5, -1, .5) ranks [5, 3.5, 2, 1, 3.5]; centred: [2, 0, -1, -2, 1] and [2, .5, -1, -2, .5]
    # -> 9.5 / sqrt(10 * 9.5) = sqrt(0.95)
    assert res["rho"] == pytest.approx(math.sqrt(0.95))
    # its p-value: t = rho * sqrt((n - 2) / (1 - rho^2)) = sqrt(.95 * 3 / .05) = sqrt(57) on 3 df, two-sided
    assert res["rho_p"] == pytest.approx(2 * student_t.sf(math.sqrt(57), 3))
    # Fleiss: P_i = 1, .5, 1/3, .5, 1, .5 -> Pbar = 23/36; p_A = 13/24, p_B = 11/24 -> Pe = 290/576
    # kappa = (368 - 290) / (576 - 290) = 78/286 = 3/11
    assert res["kappa"] == pytest.approx(3 / 11)
    assert fleiss_kappa(VOTES, VOTE_OPTIONS) == pytest.approx(3 / 11)
    for k in ("agreement", "rho", "kappa"):
        assert res[f"{k}_lo"] <= res[k] <= res[f"{k}_hi"]
    assert validate(DIFF, VOTES, n_boot=500, seed=1) == res  # seeded


def test_agreement_per_eq8_counts_metric_ties_as_misses() -> None:
    """Issue 24, item 5: the dev pairs' shape. 50 pairs, 2 without a strict majority; of the 48 left the metric
    agrees on 31, disagrees on 13 and ties on 4. Dividing by the 44 decided pairs read 70.5%; Eq. 8 divides
    by all 48 with a majority: 31/48 = 64.6%, the 4 ties reported beside it."""
    votes = np.array([list("AAAB")] * 32 + [list("BBBA")] * 16 + [list("AABB")] * 2, dtype=object)
    on_a = [0.2] * 25 + [-0.2] * 5 + [0.0] * 2  # majority A: 25 agree, 5 disagree, 2 ties
    on_b = [-0.3] * 6 + [0.3] * 8 + [0.0] * 2  # majority B: 6 agree, 8 disagree, 2 ties
    diff = np.array(on_a + on_b + [0.1, -0.1])  # the last two, no majority: outside Eq. 8
    res = validate(diff, votes, n_boot=50)
    assert (res["n_pairs"], res["n_no_majority"], res["n_agreement"], res["n_metric_tie"]) == (50, 2, 48, 4)
    assert res["agreement"] == pytest.approx(31 / 48) and round(100 * res["agreement"], 1) == 64.6
    assert round(100 * 31 / 44, 1) == 70.5  # the old reading: ties left out of the denominator
    pref = np.where(votes[:48, 0] == "A", 0.5, -0.5)  # 3-1 either way
    expected = spearmanr(diff[:48], pref)
    assert res["rho"] == pytest.approx(expected.statistic) and res["rho_p"] == pytest.approx(expected.pvalue)


def test_perfect_annotators_and_metric() -> None:
    votes = np.array([["A", "A"], ["B", "B"], ["A", "A"], ["B", "B"]], dtype=object)
    res = validate([1.0, -2.0, 0.5, -0.1], votes, n_boot=200)
    # diff ranks [4, 1, 3, 2] vs preference ranks [3.5, 1.5, 3.5, 1.5]: 4 / sqrt(5 * 4)
    assert res["agreement"] == 1.0 and res["rho"] == pytest.approx(4 / math.sqrt(20))
    assert res["kappa"] == pytest.approx(1.0)
    # an undefined metric prefers nothing: a miss
    nan = validate([float("nan"), -2.0, 0.5, -0.1], votes, n_boot=50)
    assert nan["n_undefined"] == 1 and nan["n_agreement"] == 4 and nan["agreement"] == pytest.approx(3 / 4)


def test_combination_rescales_declares_and_rejects() -> None:
    scores = pd.DataFrame(
        {
            "relevance": [5.0, 3.0, 0.0],
            "correctness": [1.0, 0.5, 0.0],
            "coverage": [0.0, 0.5, 0.0],
            "clarity": [0.5, 0.5, 0.0],
        }
    )
    default = Combination()
    # (5-1)/4 + 1 + 0 + .5 = 2.5 ; (3-1)/4 + .5 + .5 + .5 = 2.0 ; failed (relevance 0 clips to 0) = 0
    assert default(scores).tolist() == pytest.approx([2.5, 2.0, 0.0])
    assert default.describe() == "(relevance-1)/4 + correctness + coverage + clarity"
    custom = Combination.parse("relevance=2, clarity")
    assert custom(scores).tolist() == pytest.approx([2.5, 1.5, 0.0])
    assert custom.describe() == "2*(relevance-1)/4 + clarity"
    for bad in ("fluency", "relevance=x", "", "relevance=0", "relevance=-1", "clarity=nan", "coverage=inf"):
        with pytest.raises(ValueError):
            Combination.parse(bad)
    votes = np.array([["A"], ["B"], ["A"]], dtype=object)
    table = validation_table(
        scores,
        scores.iloc[[1, 0, 2]].reset_index(drop=True),
        votes,
        {"combined": default, "relevance": Combination({"relevance": 1.0})},
        n_boot=20,
    )
    # diffs (combined): .5, -.5, 0 -> pairs 1, 2 agree, pair 3 a tie (a miss under Eq. 8)
    assert table["agreement"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert table["n_metric_tie"].tolist() == [1, 1]


def test_equal_shares_that_differ_in_the_last_bit_are_a_metric_tie() -> None:
    """DistAcc of (5,1,0) and of (4,2,3) against (6,1,2) are both exactly 7/9, but summed in floating point they
    differ by 1.1e-16: the pair is a metric tie, not a preference (review 6, F1)."""
    human = {"positive": 6, "neutral": 1, "negative": 2}
    a = dist_acc({"positive": 5, "neutral": 1, "negative": 0}, human)
    b = dist_acc({"positive": 4, "neutral": 2, "negative": 3}, human)
    assert a != b and abs(a - b) < 1e-15  # the noise this test is about
    votes = np.array([["A", "A"], ["A", "A"], ["B", "B"]], dtype=object)
    res = validate([a - b, 0.5, -0.5], votes, n_boot=20)
    assert res["agreement"] == pytest.approx(2 / 3) and res["n_agreement"] == 3 and res["n_metric_tie"] == 1
    # rho ranks the tie as 0: diffs [0, .5, -.5] against preferences [1, 1, -1]
    assert res["rho"] == pytest.approx(spearmanr([0.0, 0.5, -0.5], [1, 1, -1]).statistic)


def test_scaling_every_weight_changes_no_tie_or_preference() -> None:
    """The tie tolerance follows the combination's total weight (review 7, F7): weights of 1e-10 made every
    pair a tie under an absolute 1e-9, and weights of 1e9 made last-bit noise a preference."""
    half = {"relevance": 3.0, "correctness": 0.5, "coverage": 0.5, "clarity": 0.5}
    a = pd.DataFrame([{**half, "correctness": 1.0}, {**half, "correctness": 0.0}, half])
    human = {
        "positive": 6,
        "neutral": 1,
        "negative": 2,
    }  # both shares are 7/9, 1.1e-16 apart in floating point
    a.loc[2, "correctness"] = dist_acc({"positive": 5, "neutral": 1, "negative": 0}, human)
    b = pd.DataFrame(
        [half, half, {**half, "correctness": dist_acc({"positive": 4, "neutral": 2, "negative": 3}, human)}]
    )  # pair 3: a tie in the last bit
    votes = np.array([["A", "A"], ["B", "B"], ["A", "A"]], dtype=object)
    tables = [
        validation_table(a, b, votes, {"c": Combination(dict.fromkeys(half, w))}, n_boot=10)
        for w in (1.0, 1e-10, 1e9)
    ]
    for t in tables:  # pairs 1 and 2 agree with the humans (0.5 apart, times the weight); pair 3 is a tie
        row = t.iloc[0]
        assert (row["agreement"], row["n_agreement"], row["n_metric_tie"]) == (2 / 3, 3, 1), row.to_dict()


def _pair(i: int, vote_a: str, vote_b: str) -> dict[str, object]:
    return {
        "id": i,
        "review_text": "Positive:\nThe approach is new.",
        "introduction": "We propose X.\nWe show Y.\n",
        "original_text_1": "Positive:\nThe approach is new to the field.",
        "original_text_2": "Positive:\nNone",
        "annotator_3": vote_a,
        "annotator_4": vote_b,
    }


def test_load_human_pairs_reports_file_line(tmp_path: Path) -> None:
    good = tmp_path / "pairs.jsonl"
    good.write_text("\n".join(json.dumps(_pair(i, "A", "B")) for i in range(2)) + "\n")
    pairs = load_human_pairs(good)
    assert pairs[0]["source"] == ["We propose X.", "We show Y."] and pairs[0]["votes"] == {
        "annotator_3": "A",
        "annotator_4": "B",
    }
    bad = tmp_path / "bad.jsonl"
    rows = [_pair(1, "A", "A"), {**_pair(2, "A", "A"), "annotator_4": "C"}, {"id": 3}]
    bad.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n")
    with pytest.raises(DatasetError) as err:
        load_human_pairs(bad)
    assert f"{bad}:2: annotator_4: must be 'A' or 'B', got 'C'" in err.value.problems
    assert any(p.startswith(f"{bad}:3: review_text") for p in err.value.problems)
    assert any(p.startswith(f"{bad}:4:") for p in err.value.problems)


def test_cli_bad_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from analysis.novbench.report import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    assert main(["--human-pairs", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}:1:") and err.count("\n") == 1
    assert main(["--human-pairs", str(bad), "--combine", "fluency"]) == 2


@pytest.mark.slow
def test_cli_on_planted_pairs_with_real_encoders(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    from analysis.novbench.report import main

    pairs = tmp_path / "pairs.jsonl"  # A is a real evaluation, B a failed generation: every metric prefers A
    pairs.write_text(
        "\n".join(json.dumps(_pair(i, "A", "A")) for i in range(3))
        + "\n"
        + json.dumps(_pair(9, "A", "B"))
        + "\n"
    )
    assert (
        main(
            [
                "--human-pairs",
                str(pairs),
                "--clarity",
                "released",
                "--n-boot",
                "50",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    table = pd.read_csv(tmp_path / "out" / "novbench_human.csv").set_index("metric")
    assert table.loc["combined", "agreement"] == 1.0 and table.loc["combined", "n_no_majority"] == 1
    md = (tmp_path / "out" / "novbench_human.md").read_text()
    assert "clarity_variant: released" in md and "unit: sentence" in md and "failed_policy: zero" in md
    assert "relevance_model: sentence-transformers/all-mpnet-base-v2" in md  # SPICED's base, the default
    assert "coverage_model: sentence-transformers/all-MiniLM-L6-v2" in md  # the released code's
