"""EchoReview's randomized pairwise win rate and the report CLI, on hand-made results rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.echoreview.metrics import QUALITY_DIMENSIONS
from analysis.echoreview.pairwise import comparisons, win_rates
from analysis.echoreview.report import main

# (instance, verdict shown A-first "ab", verdict shown B-first "ba"), already mapped back to the candidate
PLANTED = [
    ("p1", "a", "a"),  # both orders: win
    ("p2", "a", "b"),  # a position flip: both orders -> tie
    ("p3", "b", "b"),  # loss
    ("p4", "tie", None),
]  # the other order unscored: both orders undefined, random order -> tie


def pairwise_rows() -> pd.DataFrame:
    rows = []
    for inst, ab, ba in PLANTED:
        for order, pref in (("ab", ab), ("ba", ba)):
            rows.append(
                {
                    "judge": "j",
                    "mode": "pairwise",
                    "rubric": "review_pairwise",
                    "instance_id": inst,
                    "candidate_id": f"{inst}:gen",
                    "source": "gen",
                    "other_id": f"{inst}:human",
                    "order": order,
                    "dimension": "overall_quality",
                    "sample_idx": 0,
                    "score": np.nan,
                    "preference": pref,
                    "parse_ok": pref is not None,
                }
            )
    return pd.DataFrame(rows)


def test_comparisons_and_win_rates_by_hand() -> None:
    comp = comparisons(pairwise_rows(), seed=3).set_index("instance_id")
    assert comp["flip"].tolist() == [False, True, False, False]
    assert comp.loc["p1", "random order"] == 1 and comp.loc["p3", "random order"] == -1
    assert comp.loc["p4", "random order"] == 0 and comp.loc["p2", "random order"] in (1, -1)
    assert comp["both orders"].tolist()[:3] == [1, 0, -1] and np.isnan(comp.loc["p4", "both orders"])
    assert (comp["opponent"] == "reference").all()
    table = win_rates(comparisons(pairwise_rows(), seed=3), n_boot=400).set_index("protocol")
    both = table.loc["both orders"]
    # 3 comparisons with both orders: win 1/3, tie 1/3 (the flip), loss 1/3; flips 1 of 3
    assert (both["n"], both["win"], both["tie"], both["loss"]) == (
        3,
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
        pytest.approx(1 / 3),
    )
    assert (both["n_flip"], both["n_both_orders"]) == (1, 3) and both["generator"] == "gen"
    assert both["win_lo"] <= both["win"] <= both["win_hi"]
    rand = table.loc["random order"]
    assert (
        rand["n"] == 4
        and rand["tie"] == pytest.approx(0.25)
        and rand["win"] + rand["loss"] == pytest.approx(0.75)
    )


def test_an_opponent_is_looked_up_in_its_own_instance() -> None:
    """Ids are unique within an instance only: `r1` is a judged human review in i1 but i2's reference."""

    def row(inst: str, cand: str, source: str, other: str, order: str) -> dict[str, object]:
        return {
            "judge": "j",
            "mode": "pairwise",
            "instance_id": inst,
            "candidate_id": cand,
            "source": source,
            "other_id": other,
            "order": order,
            "dimension": "overall_quality",
            "sample_idx": 0,
            "preference": "a",
            "parse_ok": True,
        }

    rows = pd.DataFrame(
        [row("i1", "r1", "human", "r0", o) for o in ("ab", "ba")]
        + [row("i1", "g1", "gen", "r1", o) for o in ("ab", "ba")]
        + [row("i2", "g1", "gen", "r1", o) for o in ("ab", "ba")]
    )
    comp = comparisons(rows).set_index(["instance_id", "candidate_id"])["opponent"]
    assert comp.to_dict() == {("i1", "g1"): "human", ("i1", "r1"): "reference", ("i2", "g1"): "reference"}


def test_report_cli_writes_both_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quality = [
        {
            "judge": "j",
            "mode": "independent",
            "rubric": "review_quality",
            "instance_id": "p1",
            "candidate_id": "p1:gen",
            "source": "gen",
            "dimension": d,
            "sample_idx": k,
            "score": float(v),
            "parse_ok": True,
            "preference": None,
            "order": None,
            "other_id": None,
        }
        for k, v in enumerate((6, 7, 8))
        for d in QUALITY_DIMENSIONS
    ]
    run = tmp_path / "run"
    run.mkdir()
    table = pd.concat([pairwise_rows(), pd.DataFrame(quality)])
    table.assign(higher_is_better=True).to_csv(run / "results.csv", index=False)  # as a real run writes it
    assert main([str(run), "--n-boot", "100"]) == 0
    per_review = pd.read_csv(run / "echoreview_quality_per_review.csv")
    assert per_review.loc[0, "overall"] == pytest.approx(7.0) and per_review.loc[
        0, "sample_sd"
    ] == pytest.approx(1.0)
    assert set(pd.read_csv(run / "echoreview_pairwise.csv")["protocol"]) == {"random order", "both orders"}
    assert "Randomized pairwise win rate" in (run / "echoreview.md").read_text()
    capsys.readouterr()
    assert main([str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_a_verdict_recorded_twice_is_refused_not_one_copy_kept() -> None:
    """p1's A-first verdict twice in one run, once "a" and once "b": keeping the first made p1 a win."""
    rows = pairwise_rows()
    twice = pd.concat([rows, rows.iloc[[0]].assign(preference="b")], ignore_index=True)
    with pytest.raises(
        ValueError,
        match=r"^pairwise rows: 2 rows repeat a judgment, e\.g\. \(judge=j, "
        r"instance_id=p1, .*order=ab\)",
    ):
        comparisons(twice)
    with pytest.raises(ValueError, match="2 rows repeat"):  # an unscored copy is a copy too
        comparisons(pd.concat([rows, rows.iloc[[0]].assign(preference=None)], ignore_index=True))


def test_runs_of_one_judge_on_the_same_pairs_are_separate_raters() -> None:
    # run r1: the planted verdicts; run r2: every verdict "b" (a loss in both orders) on the same pairs
    r1 = pairwise_rows().assign(run_id="r1")
    r2 = pairwise_rows().assign(run_id="r2", preference="b", parse_ok=True)
    table = win_rates(comparisons(pd.concat([r1, r2], ignore_index=True)), n_boot=50)
    both = table[table["protocol"] == "both orders"].set_index("judge")
    # j@r1 as before: 3 comparisons, 1/3 each; j@r2: 4 losses (first-copy-kept: r1's verdicts only, n = 3)
    assert both.loc["j@r1", "n"] == 3 and both.loc["j@r1", "win"] == pytest.approx(1 / 3)
    assert both.loc["j@r2", "n"] == 4 and both.loc["j@r2", "loss"] == 1.0


def test_win_rate_ci_resamples_review_pairs_not_samples() -> None:
    """Two review pairs judged in 3 samples each, both orders agreeing: p1 always wins, p2 always loses.

    The unit is the review pair (its samples and both orders are one cluster). By hand, resampling the 2
    pairs: the win share is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4, so the 95% interval is [0, 1].
    Resampling the 6 (pair, sample) comparisons as if independent gives Binomial(6, 1/2) / 6: P(0) = 1/64 <
    2.5% < P(<= 1) = 7/64, so [1/6, 5/6], too narrow."""
    rows = pd.concat([pairwise_rows().assign(sample_idx=k) for k in range(3)], ignore_index=True)
    rows = rows[rows["instance_id"].isin(["p1", "p3"])]  # p1: "a" in both orders; p3: "b" in both orders
    table = win_rates(comparisons(rows), n_boot=2000).set_index("protocol")
    for protocol in ("random order", "both orders"):
        r = table.loc[protocol]
        assert (r["n"], r["n_pairs"], r["win"], r["loss"]) == (6, 2, 0.5, 0.5)
        assert (r["win_lo"], r["win_hi"]) == (0.0, 1.0) and (r["tie_lo"], r["tie_hi"]) == (0.0, 0.0)
