"""analysis.stats.consistency: self-consistency, position / order bias, length bias, self-preference."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.load.synthetic import synthetic_pairwise
from analysis.stats.consistency import (
    length_bias,
    model_family,
    pairwise_bias,
    position_bias,
    self_consistency,
    self_preference,
)


def samples(prompts: dict[str, list[float]], mode: str = "independent") -> pd.DataFrame:
    """{prompt: sample scores} for one candidate per prompt, judge j, dimension d."""
    rows = [
        {
            "judge": "j",
            "mode": mode,
            "dimension": "d",
            "prompt_id": p,
            "instance_id": p,
            "candidate_id": "c",
            "source": "gen",
            "sample_idx": s,
            "score": v,
            "parse_ok": not np.isnan(v),
            "higher_is_better": True,
        }
        for p, values in prompts.items()
        for s, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_self_consistency_by_hand() -> None:
    frame = samples({"p1": [3, 3, 3], "p2": [2, 4, 3], "p3": [5, np.nan, np.nan], "p4": [1, 1, 2]})
    out = self_consistency(frame, n_boot=200).iloc[0]
    # p3 has one scored sample: left out. sd: p1 0, p2 1, p4 sqrt(1/3) -> mean (1 + .57735)/3 = .525783
    assert out["n_prompts"] == 3
    assert out["mean_sd"] == pytest.approx((1 + np.sqrt(1 / 3)) / 3)
    # samples disagree on p2 and p4: 2 of 3
    assert (out["n_disagree"], out["disagree"]) == (2, pytest.approx(2 / 3))
    assert out["disagree_lo"] < 2 / 3 < out["disagree_hi"]
    # α with samples as raters and prompts as units (p3 has a single value and adds nothing)
    data = np.array([[3, 2, 5, 1], [3, 4, np.nan, 1], [3, 3, np.nan, 2]], dtype=float)
    assert out["alpha"] == pytest.approx(krippendorff.alpha(data, level_of_measurement="ordinal"), abs=1e-9)


def test_self_consistency_reads_pairwise_preferences() -> None:
    frame = synthetic_pairwise(n_instances=20, n_samples=3, first_bias=0.0, seed=1)
    out = self_consistency(frame, n_boot=50)
    assert list(out["mode"]) == ["pairwise"] and out.iloc[0]["n_prompts"] == 40  # 20 pairs × 2 orders


def comparative(scores_by_sample: list[list[float]], higher_is_better: bool = True) -> pd.DataFrame:
    """One comparative prompt; sample s shows candidates at positions 0, 1, 2 with the given scores."""
    rows = [
        {
            "judge": "j",
            "mode": "comparative",
            "dimension": "d",
            "higher_is_better": higher_is_better,
            "prompt_id": "p",
            "instance_id": "i",
            "candidate_id": f"c{pos}",
            "source": "gen",
            "sample_idx": s,
            "position": float(pos),
            "score": v,
        }
        for s, values in enumerate(scores_by_sample)
        for pos, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_position_bias_by_hand() -> None:
    out = position_bias(comparative([[7, 5, 7], [6, 8, 5]])).set_index("position")
    # sample 0: positions 0 and 2 tie for best (½ each); sample 1: position 1 best
    assert out["win_rate"].tolist() == [0.25, 0.5, 0.25]
    assert out["mean_score"].tolist() == [6.5, 6.5, 6.0]
    assert out["expected"].tolist() == pytest.approx([1 / 3] * 3)
    # lower is better: sample 0 best is position 1 (5); sample 1 position 2 (5)
    low = position_bias(comparative([[7, 5, 7], [6, 8, 5]], higher_is_better=False)).set_index("position")
    assert low["win_rate"].tolist() == [0.0, 0.5, 0.5]


def test_position_bias_win_rate_has_a_wilson_interval() -> None:
    """A position that wins all 3 samples reads 1.000 [0.439, 1.000] (Wilson, statsmodels), not the t
    interval's [1, 1] from a standard deviation of 0; ties count half a win."""
    from statsmodels.stats.proportion import proportion_confint

    out = position_bias(comparative([[9, 1, 1], [9, 1, 1], [9, 1, 1]])).set_index("position")
    assert out.loc[0.0, "win_rate"] == 1.0
    assert (out.loc[0.0, "win_lo"], out.loc[0.0, "win_hi"]) == pytest.approx(
        proportion_confint(3, 3, method="wilson"), abs=1e-12
    )
    assert out.loc[0.0, "win_lo"] == pytest.approx(0.4385, abs=1e-4)
    half = position_bias(comparative([[7, 5, 7], [6, 8, 5]])).set_index("position")
    assert (half.loc[0.0, "win_lo"], half.loc[0.0, "win_hi"]) == pytest.approx(
        proportion_confint(0.5, 2, method="wilson"), abs=1e-12
    )


def test_pairwise_bias_by_hand() -> None:
    frame = pd.DataFrame(
        {
            "judge": "j",
            "mode": "pairwise",
            "dimension": "d",
            "prompt_id": ["p1", "p2", "p3", "p4"],
            "instance_id": "i",
            "candidate_id": "c",
            "other_id": "o",
            "sample_idx": 0,
            "order": ["ab", "ab", "ba", "ba"],
            "preference": ["a", "tie", "b", "a"],
            "inconsistent": pd.array([True, False, True, pd.NA], dtype="boolean"),
            "score": np.nan,
        }
    )
    out = pairwise_bias(frame).iloc[0]
    # first shown preferred: p1 (ab, a) and p3 (ba, b: `other` was shown first); p4 prefers the second; p2 is a
    # tie, so 3 verdicts are decided and the first-shown text wins 2 of them
    assert (out["n"], out["n_first"], out["n_tie"], out["n_decided"]) == (4, 2, 1, 3)
    assert out["first_rate"] == pytest.approx(2 / 3)
    assert out["tie_rate"] == 0.25
    # flips among the 3 verdicts whose other order is known: 2 of 3
    assert (out["n_known"], out["n_flip"], out["flip_rate"]) == (3, 2, pytest.approx(2 / 3))
    biased = pairwise_bias(synthetic_pairwise(n_instances=200, first_bias=1.0)).iloc[0]
    assert biased["first_rate"] == 1.0 and biased["flip_rate"] == 1.0


def test_pairwise_bias_leaves_ties_out_of_the_first_shown_rate() -> None:
    # 5 pairs × 2 orders: 4 pairs tie in both orders; in pair 0 c1 wins in both orders, so the first-shown text
    # wins once (ab) and the second-shown once (ba): no order preference. Over all 10 verdicts the old rate was
    # 1 / 10 = 0.1 (ties read as second-shown wins); over the 2 decided verdicts it is 1 / 2.
    frame = pd.DataFrame(
        {
            "judge": "j",
            "mode": "pairwise",
            "dimension": "d",
            "instance_id": [f"i{k}" for k in range(5) for _ in "ab"],
            "prompt_id": [f"p{k}{o}" for k in range(5) for o in ("ab", "ba")],
            "candidate_id": "c1",
            "other_id": "c2",
            "sample_idx": 0,
            "order": ["ab", "ba"] * 5,
            "preference": ["a", "a"] + ["tie"] * 8,
            "inconsistent": False,
            "score": np.nan,
        }
    )
    out = pairwise_bias(frame).iloc[0]
    assert (out["n"], out["n_first"], out["n_tie"], out["n_decided"]) == (10, 1, 8, 2)
    assert (out["first_rate"], out["tie_rate"]) == (0.5, 0.8)
    every_tie = pairwise_bias(frame.assign(preference="tie")).iloc[0]
    assert every_tie["n_decided"] == 0 and np.isnan(every_tie["first_rate"])  # nothing decided: unknown


def test_length_bias_by_hand() -> None:
    texts = ["a", "a b", "a b c", "a b c d", "a b c d e"]
    frame = pd.DataFrame(
        {
            "judge": "j",
            "mode": "independent",
            "instance_id": "i",
            "candidate_id": [f"c{k}" for k in range(5)],
            "source": "gen",
            "dimension": "d",
            "higher_is_better": True,
            "sample_idx": 0,
            "score": [1.0, 3.0, 2.0, 4.0, 5.0],
            "candidate_text": texts,
        }
    )
    out = length_bias(frame).iloc[0]
    # lengths 1..5, scores 1 3 2 4 5: d = (0, −1, 1, 0, 0) -> ρ = 1 − 6·2/(5·24) = .9
    assert out["rho"] == pytest.approx(0.9) and out["rho_better"] == pytest.approx(0.9) and out["n"] == 5
    low = length_bias(frame.assign(higher_is_better=False)).iloc[0]
    assert low["rho_better"] == pytest.approx(-0.9)  # longer scored higher = judged worse there


def test_model_family_heuristic_and_override() -> None:
    assert model_family("openai/gpt-4o") == model_family("gpt-5.5") == "gpt"
    assert model_family("gemini/gemini-2.5-pro") == "gemini" and model_family("deepseek-chat") == "deepseek"
    assert model_family("narrow_gen") == "narrow_gen"
    assert model_family("narrow_gen", {"narrow_gen": "gpt"}) == "gpt"


def test_self_preference_by_hand() -> None:
    scores = {
        ("gpt-5", "a"): 8.0,
        ("gpt-5", "b"): 6.0,
        ("gemini-2.5", "c"): 5.0,
        ("gemini-2.5", "d"): 3.0,
        ("reference", "r"): 9.0,
    }
    frame = pd.DataFrame(
        [
            {
                "judge": "judge-x",
                "model": "openai/gpt-4o",
                "mode": "independent",
                "instance_id": "i",
                "candidate_id": c,
                "source": s,
                "dimension": dim,
                "sample_idx": 0,
                "score": v,
                "higher_is_better": dim == "originality",
            }
            for (s, c), v in scores.items()
            for dim in ("originality", "source_boundedness")
        ]
    )
    out = self_preference(frame).set_index("dimension")
    row = out.loc["originality"]
    # own family (gpt): 8, 6 -> 7; others (gemini): 5, 3 -> 4; the reference is excluded; diff 3
    assert (row["family"], row["n_own"], row["n_other"], row["mean_own"], row["mean_other"]) == (
        "gpt",
        2,
        2,
        7,
        4,
    )
    assert row["diff"] == 3.0 and row["favours_own"] == 3.0
    welch = stats.ttest_ind([8, 6], [5, 3], equal_var=False)
    assert (row["diff_lo"], row["diff_hi"]) == pytest.approx(tuple(welch.confidence_interval()))
    assert out.loc["source_boundedness", "favours_own"] == -3.0  # higher there means worse
    assert self_preference(frame, families={"judge-x": "gemini"}).iloc[0]["mean_own"] == 4.0
    none = self_preference(frame.assign(model="anthropic/claude-3"))
    assert none.empty and "favours_own" in none.columns


def test_position_bias_wilson_interval_covers_an_unbiased_judge() -> None:
    """Planted truth: scores independent of position (3 shown, 30 prompt samples), so each position wins 1/3;
    over 200 seeds the first position's interval holds 1/3 about 95% of the time."""
    rng = np.random.default_rng(7)
    hits = [
        position_bias(comparative(rng.normal(size=(30, 3)).tolist())).set_index("position").loc[0.0]
        for _ in range(200)
    ]
    covered = np.mean([r["win_lo"] <= 1 / 3 <= r["win_hi"] for r in hits])
    assert 0.90 <= covered <= 0.99
