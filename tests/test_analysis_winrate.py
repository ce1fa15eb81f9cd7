"""analysis.stats.winrate: win / tie / loss against the reference, judge combinations, bootstrap CIs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from analysis.stats.scores import CONTEXT_KEYS, best_of_k_scores, candidate_scores
from analysis.stats.winrate import instance_outcomes, outcome_rates, win_tie_loss


def study(
    scores: dict[str, dict[str, list[float]]],
    judge: str = "j1",
    mode: str = "independent",
    dimension: str = "originality",
    higher_is_better: bool = True,
) -> pd.DataFrame:
    """{instance: {"ref": [score], "gen": [candidate scores]}} -> results rows, two samples per candidate
    (score ± 0.5, so the candidate score is the given value) plus one unscored sample."""
    rows = []
    for inst, by_source in scores.items():
        for source, values in by_source.items():
            for c, value in enumerate(values):
                for s, (score, ok) in enumerate([(value - 0.5, True), (value + 0.5, True), (np.nan, False)]):
                    rows.append(
                        {
                            "judge": judge,
                            "mode": mode,
                            "instance_id": inst,
                            "candidate_id": f"{source}{c}",
                            "source": "reference" if source == "ref" else source,
                            "dimension": dimension,
                            "higher_is_better": higher_is_better,
                            "sample_idx": s,
                            "score": score,
                            "parse_ok": ok,
                        }
                    )
    return pd.DataFrame(rows)


HAND = {
    "i1": {"ref": [5], "gen": [4, 6]},  # best 6 > 5: win  (lower is better: min 4 < 5: win)
    "i2": {"ref": [5], "gen": [5, 3]},  # best 5 = 5: tie  (min 3 < 5: win)
    "i3": {"ref": [7], "gen": [6, 6]},  # best 6 < 7: loss (min 6 < 7: win)
    "i4": {"ref": [4], "gen": [5]},  # 5 > 4: win          (5 > 4: loss)
}


def test_win_tie_loss_by_hand() -> None:
    out = win_tie_loss(study(HAND), n_boot=200).iloc[0]
    # wins i1, i4; tie i2; loss i3 -> .5 / .25 / .25 over n = 4 instances
    assert (out["n"], out["n_win"], out["n_tie"], out["n_loss"]) == (4, 2, 1, 1)
    assert (out["win"], out["tie"], out["loss"]) == (0.5, 0.25, 0.25)
    for name in ("win", "tie", "loss"):
        assert 0 <= out[f"{name}_lo"] <= out[name] <= out[f"{name}_hi"] <= 1


def test_lower_is_better_dimension_uses_min_and_reverses() -> None:
    # a custom dimension: its direction comes from the table, whatever its name
    out = win_tie_loss(study(HAND, dimension="my_cost", higher_is_better=False), n_boot=200).iloc[0]
    # min-of-K: i1 4<5, i2 3<5, i3 6<7 win; i4 5>4 loss -> .75 / 0 / .25
    assert (out["win"], out["tie"], out["loss"]) == (0.75, 0.0, 0.25)
    same_as_higher = win_tie_loss(study(HAND, dimension="source_boundedness"), n_boot=200)
    assert same_as_higher.iloc[0]["win"] == 0.5


def test_instance_outcomes_keep_the_scores() -> None:
    out = instance_outcomes(study(HAND)).set_index("instance_id").sort_index()
    assert out["outcome"].tolist() == [1, 0, -1, 1]
    assert out["gen_best"].tolist() == [6.0, 5.0, 6.0, 5.0] and out["ref_best"].tolist() == [
        5.0,
        5.0,
        7.0,
        4.0,
    ]
    assert out.loc["i1", "k"] == 2


def test_instance_without_reference_score_is_left_out() -> None:
    frame = study({"i1": {"ref": [5], "gen": [6]}, "i2": {"gen": [6]}})
    assert win_tie_loss(frame, n_boot=50).iloc[0]["n"] == 1


def test_all_wins_keep_an_honest_interval_at_small_n() -> None:
    """Issue 32 item 6: 3 wins of 3 read [1.000, 1.000] with a bootstrap; the Wilson interval is statsmodels'."""
    for n in (3, 10):
        out = win_tie_loss(study({f"i{x}": {"ref": [3], "gen": [5]} for x in range(n)})).iloc[0]
        lo, hi = proportion_confint(n, n, alpha=0.05, method="wilson")
        assert (out["win"], out["win_lo"], out["win_hi"]) == pytest.approx((1.0, lo, hi))
        assert out["win_lo"] < 1.0 and out["tie_hi"] > 0.0
    assert out["win_lo"] == pytest.approx(0.7225, abs=1e-4)  # 10 of 10 (by hand: Wilson's lower bound)


def test_rate_interval_is_wilson_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(0)
    small = pd.DataFrame({"g": "a", "instance_id": range(40), "outcome": rng.choice([1, 0, -1], 40)})
    large = pd.DataFrame({"g": "a", "instance_id": range(4000), "outcome": rng.choice([1, 0, -1], 4000)})
    wide, narrow = outcome_rates(small, ["g"]).iloc[0], outcome_rates(large, ["g"]).iloc[0]
    for row in (wide, narrow):
        for name in ("win", "tie", "loss"):
            lo, hi = proportion_confint(row[f"n_{name}"], row["n"], alpha=0.05, method="wilson")
            assert (row[f"{name}_lo"], row[f"{name}_hi"]) == pytest.approx((lo, hi), abs=1e-12)
    assert narrow["win_hi"] - narrow["win_lo"] < (wide["win_hi"] - wide["win_lo"]) / 5
    # 95% of a binomial proportion: half width ≈ 1.96·sqrt(p(1 − p)/n)
    p = narrow["win"]
    assert (narrow["win_hi"] - narrow["win_lo"]) / 2 == pytest.approx(
        1.96 * np.sqrt(p * (1 - p) / 4000), rel=0.15
    )


def two_judges() -> pd.DataFrame:
    j1 = {"i1": {"ref": [5], "gen": [6]}, "i2": {"ref": [5], "gen": [6]}, "i3": {"ref": [5], "gen": [3]}}
    j2 = {"i1": {"ref": [5], "gen": [7]}, "i2": {"ref": [5], "gen": [5]}, "i3": {"ref": [5], "gen": [4]}}
    return pd.concat([study(j1, judge="j1"), study(j2, judge="j2")], ignore_index=True)


def test_combine_mean_unanimous_majority_by_hand() -> None:
    frame = two_judges()
    # per judge: i1 win/win, i2 win/tie, i3 loss/loss
    mean = win_tie_loss(frame, combine="mean", n_boot=50).iloc[0]
    # mean scores: i1 ref 5 gen 6.5 win; i2 ref 5 gen 5.5 win; i3 ref 5 gen 3.5 loss -> 2/3, 0, 1/3
    assert mean["judge"] == "mean(j1+j2)"
    assert (mean["win"], mean["tie"], mean["loss"]) == pytest.approx((2 / 3, 0, 1 / 3))
    unanimous = win_tie_loss(frame, combine="unanimous", n_boot=50).iloc[0]
    # i1 both win -> win; i2 win + tie -> no verdict (tie); i3 both loss -> loss
    assert (unanimous["win"], unanimous["tie"], unanimous["loss"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    majority = win_tie_loss(frame, combine="majority", n_boot=50).iloc[0]
    # i2: 1 win of 2 judges is not more than half -> tie
    assert (majority["win"], majority["tie"], majority["loss"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_combined_mean_leaves_out_an_instance_a_judge_lacks_the_reference_of() -> None:
    j2 = {
        "i1": {"ref": [5], "gen": [7]},
        "i2": {"gen": [1]},
        "i3": {"ref": [5], "gen": [4]},
    }  # no i2 reference
    frame = pd.concat(
        [
            study(
                {
                    "i1": {"ref": [5], "gen": [6]},
                    "i2": {"ref": [5], "gen": [6]},
                    "i3": {"ref": [5], "gen": [3]},
                },
                judge="j1",
            ),
            study(j2, judge="j2"),
        ]
    )
    out = instance_outcomes(frame, combine="mean").set_index("instance_id").sort_index()
    # i2: j2 has no reference score, so no candidate rests on both judges: left out (counted in n_excluded),
    # neither j1 alone (6 vs 5) nor the old mean over every judge ((6 + 1)/2 = 3.5 vs 5)
    assert out["outcome"].to_dict() == {"i1": 1, "i3": -1}
    assert out["gen_best"].tolist() == [6.5, 3.5] and out["n_judges"].tolist() == [2, 2]
    assert win_tie_loss(frame, combine="mean", n_boot=20).iloc[0][["n", "n_excluded"]].tolist() == [2, 1]


def test_combined_best_of_k_is_over_candidates_every_judge_scored() -> None:
    """Issue 24 item 3: j2 fails on candidate gen0 (reference: j1 5, j2 1). The combined gen0 stood on j1
    alone (5) and won best-of-K, so the best-five table read generated 5.0 vs reference 3.0 while the win
    table (5 vs j1's reference 5) said tie. Now best-of-K is over gen1, which both judges scored:
    (3 + 1)/2 = 2 vs (5 + 1)/2 = 3, a loss in both tables, each on 2 judges."""
    j2 = study({"i1": {"ref": [1], "gen": [9, 1]}}, judge="j2")
    failed = (j2["candidate_id"] == "gen0").to_numpy()
    j2.loc[failed, "score"], j2.loc[failed, "parse_ok"] = np.nan, False
    frame = pd.concat([study({"i1": {"ref": [5], "gen": [5, 3]}}, judge="j1"), j2], ignore_index=True)
    cands = candidate_scores(frame, CONTEXT_KEYS)
    best = best_of_k_scores(cands).set_index(["judge", "source"])
    assert best.loc[("mean(j1+j2)", "gen"), "mean"] == 2.0  # was 5.0
    assert best.loc[("mean(j1+j2)", "reference"), "mean"] == 3.0
    assert best.loc["mean(j1+j2)", ["n", "n_judges_min"]].to_numpy().tolist() == [[1, 2], [1, 2]]
    rates = win_tie_loss(frame, combine="mean", n_boot=20).iloc[0]
    assert (rates["loss"], rates["tie"], rates["n"], rates["n_judges_min"]) == (1.0, 0.0, 1, 2)


def test_majority_of_three_and_items_missing_a_judge() -> None:
    frame = pd.concat(
        [two_judges(), study({"i1": {"ref": [5], "gen": [4]}, "i2": {"ref": [5], "gen": [6]}}, judge="j3")],
        ignore_index=True,
    )
    out = instance_outcomes(frame, combine="majority").set_index("instance_id")
    # i1: win, win, loss -> 2 of 3 win; i2: win, tie, win -> win; i3 has no j3 verdict -> dropped
    assert out["outcome"].to_dict() == {"i1": 1, "i2": 1} and (out["n_judges"] == 3).all()


def test_combined_rates_count_excluded_items_and_the_fewest_judges() -> None:
    frame = pd.concat(
        [two_judges(), study({"i1": {"ref": [5], "gen": [4]}, "i2": {"ref": [5], "gen": [6]}}, judge="j3")],
        ignore_index=True,
    )
    for combine in ("unanimous", "majority"):  # i3 has no j3 verdict: dropped, and counted
        row = win_tie_loss(frame, combine=combine, n_boot=20).iloc[0]
        assert (row["n"], row["n_excluded"], row["n_judges_min"]) == (2, 1, 3)
    mean = win_tie_loss(frame, combine="mean", n_boot=20).iloc[0]  # i3 lacks j3's scores: left out too
    assert (mean["n"], mean["n_excluded"], mean["n_judges_min"]) == (2, 1, 3)
    only_j3 = study({"i1": {"ref": [5], "other": [4]}}, judge="j3")  # a generator only j3 scored
    lone = win_tie_loss(pd.concat([two_judges(), only_j3]), combine="majority", n_boot=20)
    assert lone.loc[lone["source"] == "other", ["n", "n_excluded"]].values.tolist() == [[0, 1]]  # not lost


def test_judges_split_by_rubric_combine_per_rubric() -> None:
    # the loader names a judge that ran two rubrics "judge/rubric": each dimension has its own two judges
    first = two_judges().assign(judge=lambda f: f["judge"] + "/novelty")
    second = two_judges().assign(judge=lambda f: f["judge"] + "/narrowness", dimension="source_boundedness")
    frame = pd.concat([first, second], ignore_index=True)
    for combine in ("mean", "unanimous", "majority"):
        out = win_tie_loss(frame, combine=combine, n_boot=50).set_index("dimension")
        assert out.loc["originality", "judge"] == f"{combine}(j1/novelty+j2/novelty)"
        assert out.loc["source_boundedness", "judge"] == f"{combine}(j1/narrowness+j2/narrowness)"
        assert (out["n"] == 3).all()  # no item dropped for lack of the other rubric's judges
    unanimous = win_tie_loss(frame, combine="unanimous", n_boot=50).set_index("dimension").loc["originality"]
    assert (unanimous["win"], unanimous["tie"], unanimous["loss"]) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_unknown_combine_is_refused() -> None:
    with pytest.raises(ValueError, match="combine"):
        win_tie_loss(two_judges(), combine="median")  # type: ignore[arg-type]


def test_by_pools_groups() -> None:
    frame = pd.concat([study(HAND, mode="independent"), study(HAND, mode="comparative")], ignore_index=True)
    out = win_tie_loss(frame, by=("source",), n_boot=50).iloc[0]
    assert (out["n"], out["win"]) == (8, 0.5)


def per_generator_prompts() -> pd.DataFrame:
    """Comparative mode as the paper runs it: one prompt per (instance, generator) holding the reference and
    that generator's candidates, so the reference is scored once in each generator's context."""
    prompts = {  # prompt: (instance, {candidate: (source, score)})
        "i1-A": ("i1", {"ref": ("reference", 5), "a0": ("gA", 6), "a1": ("gA", 4)}),
        "i1-B": ("i1", {"ref": ("reference", 7), "b0": ("gB", 6), "b1": ("gB", 6)}),
        "i2-A": ("i2", {"ref": ("reference", 4), "a0": ("gA", 4)}),
        "i2-B": ("i2", {"ref": ("reference", 2), "b0": ("gB", 3)}),
    }
    return pd.DataFrame(
        [
            {
                "judge": "j",
                "mode": "comparative",
                "prompt_id": p,
                "instance_id": inst,
                "candidate_id": f"{inst}:{c}",
                "source": src,
                "dimension": "d",
                "higher_is_better": True,
                "sample_idx": 0,
                "score": float(v),
                "parse_ok": True,
            }
            for p, (inst, cands) in prompts.items()
            for c, (src, v) in cands.items()
        ]
    )


def test_comparative_reference_is_taken_from_the_generators_own_prompt() -> None:
    out = instance_outcomes(per_generator_prompts()).set_index(["instance_id", "source"])["outcome"]
    # i1: gA best 6 vs the reference in gA's prompt 5: win; gB 6 vs 7: loss. i2: gA 4 vs 4 tie; gB 3 vs 2 win.
    # (Averaging the reference over both prompts, 6 and 3, would give tie, tie, win, tie.)
    assert out.sort_index().to_dict() == {("i1", "gA"): 1, ("i1", "gB"): -1, ("i2", "gA"): 0, ("i2", "gB"): 1}
    one_prompt = per_generator_prompts().assign(
        prompt_id=lambda f: f["instance_id"]
    )  # every generator at once
    mixed = instance_outcomes(one_prompt).set_index(["instance_id", "source"])["outcome"]
    assert mixed.sort_index().to_dict() == {
        ("i1", "gA"): 0,
        ("i1", "gB"): 0,
        ("i2", "gA"): 1,
        ("i2", "gB"): 0,
    }
    best = best_of_k_scores(candidate_scores(per_generator_prompts(), CONTEXT_KEYS)).set_index("source")
    # the reference's row averages its prompts per instance: (5 + 7)/2 = 6, (4 + 2)/2 = 3 -> 4.5 ± sqrt(4.5)
    assert (best.loc["reference", "n"], best.loc["reference", "mean"]) == (2, 4.5)
    assert best.loc["reference", "sd"] == pytest.approx(np.sqrt(4.5))
