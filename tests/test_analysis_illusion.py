"""analysis.stats.illusion and analysis.stats.humans: the planted-truth study, paired tests, humans as raters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats import inter_rater

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.stats.humans import (
    MAJORITY,
    human_reliability,
    majority_coverage,
    majority_outcomes,
    rater_outcomes,
)
from analysis.stats.illusion import (
    CROSS_MODE,
    SAME_JUDGE,
    agreement_by_kind,
    agreement_matrix,
    cross_dimension_alignment,
    default_alignment_pairs,
    mode_shift,
    paired_shift,
    preference_gap,
)
from analysis.stats.winrate import win_tie_loss

# Planted study: per instance, the generator's best candidate minus the reference, in independent mode.
OFFSETS = {-2: 10, -1: 20, 0: 30, 1: 25, 2: 15}  # offset: number of instances (100 in all)
DIMENSIONS = ("originality", "source_boundedness")  # higher is better / lower is better


def planted(shift: float) -> pd.DataFrame:
    """Two judges (the second scores everything 0.5 higher), two modes; comparative mode adds `shift`
    to both generated candidates' scores (the best of the two is g0 on both dimensions). Samples are
    score − 1, score, score + 1 and one unscored."""
    offsets = [d for d, count in OFFSETS.items() for _ in range(count)]
    rows = []
    for judge, bias in (("j1", 0.0), ("j2", 0.5)):
        for mode in ("independent", "comparative"):
            lift = shift if mode == "comparative" else 0.0
            for i, d in enumerate(offsets):
                for dim, worse in zip(DIMENSIONS, (-3.0, 3.0), strict=True):  # g1 is 3 points worse than g0
                    cands = {
                        "ref": ("reference", 5.0),
                        "g0": ("gen", 5.0 + d + lift),
                        "g1": ("gen", 5.0 + d + lift + worse),
                    }
                    for cid, (source, score) in cands.items():
                        for s, value in enumerate([score - 1, score, score + 1, np.nan]):
                            rows.append(
                                {
                                    "judge": judge,
                                    "mode": mode,
                                    "instance_id": f"i{i:03d}",
                                    "candidate_id": cid,
                                    "source": source,
                                    "dimension": dim,
                                    "sample_idx": s,
                                    "higher_is_better": dim == "originality",
                                    "score": value + bias,
                                    "parse_ok": not np.isnan(value),
                                }
                            )
    return pd.DataFrame(rows)


def test_planted_shift_is_recovered_exactly_and_flagged() -> None:
    results = planted(shift=1.0)
    rates = win_tie_loss(results, n_boot=200).set_index(["judge", "mode", "dimension"])
    for judge in ("j1", "j2"):
        # originality, independent: d > 0 wins (25 + 15), d = 0 ties (30), d < 0 loses (10 + 20)
        assert tuple(rates.loc[(judge, "independent", "originality"), ["win", "tie", "loss"]]) == (
            0.40,
            0.30,
            0.30,
        )
        # comparative, d + 1: wins d ≥ 0 (30 + 25 + 15), ties d = −1 (20), loses d = −2 (10)
        assert tuple(rates.loc[(judge, "comparative", "originality"), ["win", "tie", "loss"]]) == (
            0.70,
            0.20,
            0.10,
        )
        # source-boundedness, lower is better: independent wins d < 0 (30), ties 30, loses 40;
        # comparative wins d + 1 < 0 (10), ties d = −1 (20), loses 70
        assert tuple(rates.loc[(judge, "independent", "source_boundedness"), ["win", "tie", "loss"]]) == (
            0.30,
            0.30,
            0.40,
        )
        assert tuple(rates.loc[(judge, "comparative", "source_boundedness"), ["win", "tie", "loss"]]) == (
            0.10,
            0.20,
            0.70,
        )
    shift = mode_shift(results, n_boot=500).set_index(["judge", "dimension"])
    for judge in ("j1", "j2"):
        up = shift.loc[(judge, "originality")]
        # Δwin = .70 − .40 = .30; Δtie = .20 − .30 = −.10; 30 instances (d = 0) went tie → win, none back:
        # McNemar exact p = 2 · .5^30
        assert (up["n"], up["delta_win"], up["delta_tie"]) == pytest.approx((100, 0.30, -0.10))
        assert up["mcnemar_p"] == pytest.approx(2 * 0.5**30, rel=1e-9) and up["significant"]
        assert up["delta_win_lo"] > 0
        down = shift.loc[(judge, "source_boundedness")]
        # Δwin = .10 − .30 = −.20: 20 instances (d = −1) went win → tie; p = 2 · .5^20
        assert (down["delta_win"], down["mcnemar_p"]) == pytest.approx((-0.20, 2 * 0.5**20))
        assert down["significant"] and down["delta_win_hi"] < 0
    combined = mode_shift(results, combine="mean", n_boot=200).set_index("dimension")
    assert combined.loc["originality", "delta_win"] == pytest.approx(0.30)


def test_no_planted_shift_is_not_flagged() -> None:
    shift = mode_shift(planted(shift=0.0), n_boot=500)
    assert (shift["delta_win"] == 0).all() and (shift["delta_tie"] == 0).all()
    assert (shift["mcnemar_p"] == 1.0).all() and not shift["significant"].any()
    assert ((shift["delta_win_lo"] == 0) & (shift["delta_win_hi"] == 0)).all()


def test_noisy_study_flags_a_large_shift_and_not_a_null_one() -> None:
    # seeded synthetic studies with sample noise; a null study flags a group 5% of the time by design,
    # this seed is one where it does not
    big = mode_shift(synthetic_results(n_instances=60, shift=2.0, seed=0, dimensions=("originality",)))
    assert big["significant"].all() and (big["delta_win_lo"] > 0).all()
    null = mode_shift(synthetic_results(n_instances=60, shift=0.0, seed=0, dimensions=("originality",)))
    assert not null["significant"].any()


def test_paired_shift_by_hand() -> None:
    before = [1, 1, 1, 1, 0, 0, -1, -1]
    after = [1, 1, 1, 0, 1, 1, 1, -1]
    out = paired_shift(pd.DataFrame({"g": "x", "before": before, "after": after}), ["g"], n_boot=300).iloc[0]
    # win 4/8 -> 6/8: Δwin = .25; tie 2/8 -> 1/8: Δtie = −.125
    assert (out["win_before"], out["win_after"], out["delta_win"]) == (0.5, 0.75, 0.25)
    assert out["delta_tie"] == -0.125
    # McNemar on win / not-win: win→not 1, not→win 3 -> exact p = 2 · P(X ≤ 1 | 4, .5) = 2 · 5/16 = .625
    assert out["mcnemar_p"] == pytest.approx(0.625) and not out["significant"]
    # 8 instances: too few for a bootstrap CI (core.intervals.BOOT_MIN_N), left out; 24 (3 copies) get one
    assert np.isnan(out["delta_win_lo"]) and np.isnan(out["delta_win_hi"]) and out["n"] == 8
    thrice = pd.DataFrame({"g": "x", "before": before * 3, "after": after * 3})
    more = paired_shift(thrice, ["g"], n_boot=300).iloc[0]
    assert more["delta_win_lo"] <= 0.25 <= more["delta_win_hi"]


def raters_frame(items: dict[str, list[int]]) -> pd.DataFrame:
    """{rater: outcomes on items 0..n−1} as rater outcomes of dimension d, generator gen."""
    rows = []
    for rater, outcomes in items.items():
        human = rater.startswith("human:")
        for i, o in enumerate(outcomes):
            rows.append(
                {
                    "rater": rater,
                    "kind": "majority" if rater == MAJORITY else "expert" if human else "judge",
                    "judge": rater.split(" ")[0],
                    "mode": "human" if human else "independent",
                    "instance_id": f"i{i}",
                    "source": "gen",
                    "dimension": "d",
                    "outcome": o,
                }
            )
    return pd.DataFrame(rows)


def test_preference_gap_by_hand() -> None:
    raters = raters_frame({MAJORITY: [1, 0, -1, -1], "j [independent]": [1, 1, 1, -1]})
    out = preference_gap(raters, n_boot=300).iloc[0]
    # humans prefer generated on 1 of 4, the judge on 3 of 4: gap = .75 − .25 = .5
    assert (out["human_win"], out["judge_win"], out["gap_win"]) == (0.25, 0.75, 0.5)
    # human not-win → judge win on 2 items, the reverse on none: p = 2 · .5² = .5
    assert out["mcnemar_p"] == pytest.approx(0.5)


def test_majority_vote_is_a_strict_majority_and_counts_the_excluded() -> None:
    outcomes = pd.DataFrame(
        {
            "judge": ["h1", "h2", "h3"] * 3 + ["h1", "h2"] + ["h1", "h2", "h3", "h4"],
            "mode": "human",
            "instance_id": ["i1"] * 3 + ["i2"] * 3 + ["i3"] * 3 + ["i4"] * 2 + ["i5"] * 4,
            "source": "gen",
            "dimension": "d",
            "outcome": [1, 1, -1, 1, 0, -1, 0, 0, 1, 1, -1, 1, 1, 0, -1],
        }
    )
    out = majority_outcomes(outcomes).set_index("instance_id")
    # i1 win,win,loss -> win (2 of 3); i2 one of each -> excluded; i3 tie,tie,win -> tie; i4 win,loss ->
    # excluded; i5 win,win,tie,loss: win is the plurality but 2 of 4 is not more than half -> excluded
    assert out["outcome"].to_dict() == {"i1": 1, "i3": 0}
    assert out.loc["i1", "judge"] == MAJORITY and out.loc["i1", "n_raters"] == 3
    coverage = majority_coverage(outcomes).iloc[0]
    assert (coverage["n_pairs"], coverage["n_majority"], coverage["n_excluded"]) == (5, 2, 3)


def test_cross_dimension_alignment_by_hand() -> None:
    a = raters_frame({MAJORITY: [1, 0, -1, 1]})
    b = raters_frame({"j [independent]": [1, 0, 1, 1, 1]}).assign(dimension="e")  # item i4 has no human label
    out = cross_dimension_alignment(
        pd.concat([a, b]), [(MAJORITY, "d", "j [independent]", "e")], n_boot=100
    ).iloc[0]
    assert (out["n"], out["percent"]) == (4, 0.75)  # i0, i1, i3 agree; i2 loss vs win
    missing = cross_dimension_alignment(a, [(MAJORITY, "d", "nobody", "e")], n_boot=10).iloc[0]
    assert missing["n"] == 0


def test_humans_as_raters_kinds_and_reliability() -> None:
    results = synthetic_results(n_instances=25, seed=3)
    humans = synthetic_humans(results, annotators=("a1", "a2", "a3"), seed=4)
    raters = rater_outcomes(results, humans)
    assert {"human:a1", "human:a2", "human:a3", MAJORITY, "judge_a [independent]"} <= set(raters["rater"])
    matrix = agreement_matrix(raters, n_boot=100)
    pair_kinds = set(matrix.loc[matrix["rater_a"] != "(all)", "kind"])
    assert pair_kinds == {
        "expert-expert",
        "expert-judge",
        "judge-judge",
        "expert-majority",
        "majority-judge",
        SAME_JUDGE,
        CROSS_MODE,
    }
    summary = agreement_by_kind(matrix).set_index("kind")
    # 2 judges × 2 modes: judge-judge is a vs b within a mode (2 pairs), not a judge across modes (DESIGN.md)
    assert summary.loc["expert-expert", "pairs"] == 3 and summary.loc["judge-judge", "pairs"] == 2
    assert summary.loc[SAME_JUDGE, "pairs"] == 2 and summary.loc[CROSS_MODE, "pairs"] == 2
    same = matrix.loc[matrix["kind"] == SAME_JUDGE, ["rater_a", "rater_b"]].to_numpy().tolist()
    assert sorted(sorted(p) for p in same) == [
        ["judge_a [comparative]", "judge_a [independent]"],
        ["judge_b [comparative]", "judge_b [independent]"],
    ]
    # each of 3 experts and the majority × 2 human dims × 4 judge raters × 2 judge dims
    assert len(default_alignment_pairs(raters)) == 4 * 2 * 4 * 2
    gap = preference_gap(raters, n_boot=100)
    assert len(gap) == 2 * 2 * 2 * 2  # judges × modes × generators × dimensions
    reliability = human_reliability(humans, n_boot=100).set_index("dimension")
    wide = humans[humans["dimension"] == "originality"].pivot(
        index=["instance_id", "candidate_id"], columns="annotator", values="score"
    )
    table, _ = inter_rater.aggregate_raters(wide.to_numpy())
    assert reliability.loc["originality", "fleiss_kappa"] == pytest.approx(
        inter_rater.fleiss_kappa(table), abs=1e-9
    )


def test_human_labels_missing_a_column_are_refused() -> None:
    with pytest.raises(ValueError, match="annotator"):
        rater_outcomes(synthetic_results(n_instances=3), pd.DataFrame({"instance_id": ["i"], "score": [1]}))


def test_human_labels_join_results_with_numeric_ids() -> None:
    results = synthetic_results(n_instances=6, seed=5)
    humans = synthetic_humans(results, seed=6)
    numeric = results.assign(instance_id=results["instance_id"].cat.codes.astype(int))
    humans = humans.assign(
        instance_id=humans["instance_id"].str[4:].astype(int).astype(str)
    )  # "inst00003" -> "3"
    raters = rater_outcomes(numeric, humans)
    assert set(raters.loc[raters["kind"] == "judge", "instance_id"]) == set(
        raters.loc[raters["kind"] == "expert", "instance_id"]
    )


# The paper's setting: the experts rated one candidate (c1) of generator g against the reference r; the
# judge also scored c2, which it likes better. Judge scores are (r, c1, c2) per instance.
JUDGE = {
    "non_obviousness": {"i1": (2, 1, 3), "i2": (2, 2, 3), "i3": (1, 2, 0), "i4": (3, 1, 1)},
    "source_boundedness": {"i1": (2, 1, 3), "i2": (1, 2, 0), "i3": (2, 1, 3), "i4": (1, 2, 0)},
}
# (r, c1) per annotator h1, h2, h3, on non-obviousness only
EXPERTS = {
    "i1": ((1, 2), (1, 2), (2, 1)),
    "i2": ((2, 2), (1, 2), (2, 1)),
    "i3": ((1, 2), (1, 3), (1, 1)),
    "i4": ((2, 1), (2, 1), (2, 2)),
}


def same_pairs_study() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [
        {
            "judge": "j",
            "mode": "independent",
            "instance_id": inst,
            "candidate_id": cid,
            "source": "reference" if cid == "r" else "g",
            "dimension": dim,
            "higher_is_better": dim != "source_boundedness",
            "sample_idx": 0,
            "score": float(v),
            "parse_ok": True,
        }
        for dim, by_inst in JUDGE.items()
        for inst, values in by_inst.items()
        for cid, v in zip(("r", "c1", "c2"), values, strict=True)
    ]
    labels = [
        {
            "annotator": f"h{a + 1}",
            "instance_id": inst,
            "candidate_id": cid,
            "source": "reference" if cid == "r" else "g",
            "dimension": "non_obviousness",
            "score": v,
        }
        for inst, per_annotator in EXPERTS.items()
        for a, pair in enumerate(per_annotator)
        for cid, v in zip(("r", "c1"), pair, strict=True)
    ]
    return pd.DataFrame(rows), pd.DataFrame(labels)


def test_judge_vs_humans_on_exactly_the_pairs_the_humans_rated() -> None:
    results, humans = same_pairs_study()
    raters = rater_outcomes(results, humans)
    judge = raters.loc[raters["kind"] == "judge"]
    assert set(judge["candidate_id"]) == {"c1"}  # never the judge's own best-of-K over c2
    # experts: i1 win, win, loss -> win; i2 tie, win, loss -> no strict majority (excluded, counted);
    # i3 win, win, tie -> win; i4 loss, loss, tie -> loss
    majority = raters.loc[raters["rater"] == MAJORITY].set_index("instance_id")["outcome"]
    assert majority.to_dict() == {"i1": 1, "i3": 1, "i4": -1}
    coverage = majority_coverage(raters.loc[raters["kind"] == "expert"]).iloc[0]
    assert (coverage["n_pairs"], coverage["n_excluded"]) == (4, 1)
    gap = preference_gap(raters, n_boot=200).set_index("dimension").loc["non_obviousness"]
    # judge on c1 vs r: i1 1<2 loss, i3 2>1 win, i4 1<3 loss -> 1/3 on the 3 shared pairs; experts 2/3.
    # (Best-of-K would have given the judge i1 3>2 win too: 2/3, and a gap of 0.)
    assert (gap["n"], gap["human_win"], gap["judge_win"]) == pytest.approx((3, 2 / 3, 1 / 3))
    assert gap["gap_win"] == pytest.approx(-1 / 3)
    aligned = cross_dimension_alignment(
        raters, [(MAJORITY, "non_obviousness", "j [independent]", "source_boundedness")], n_boot=100
    ).iloc[0]
    # judge source-boundedness (lower is better) on c1: i1 1<2 win, i3 1<2 win, i4 2>1 loss: all three
    # agree with the experts' non-obviousness (min-of-K would have said i4 0<1 win: 2/3)
    assert (aligned["n"], aligned["percent"]) == (3, 1.0)


def test_pairs_in_comparative_mode_use_the_reference_of_the_same_prompt() -> None:
    # one prompt per (instance, generator): the reference is scored 5 next to gA's candidate, 7 next to gB's
    rows = [
        ("pA", "ref", "reference", 5),
        ("pA", "a0", "gA", 6),
        ("pB", "ref", "reference", 7),
        ("pB", "b0", "gB", 6),
    ]
    results = pd.DataFrame(
        [
            {
                "judge": "j",
                "mode": "comparative",
                "prompt_id": p,
                "instance_id": "i1",
                "candidate_id": c,
                "source": s,
                "dimension": "d",
                "higher_is_better": True,
                "sample_idx": 0,
                "score": float(v),
                "parse_ok": True,
            }
            for p, c, s, v in rows
        ]
    )
    humans = pd.DataFrame(
        [
            {
                "annotator": "h1",
                "instance_id": "i1",
                "candidate_id": c,
                "source": s,
                "dimension": "d",
                "score": v,
            }
            for c, s, v in (("ref", "reference", 1), ("a0", "gA", 2), ("b0", "gB", 2))
        ]
    )
    judge = rater_outcomes(results, humans).query("kind == 'judge'").set_index("candidate_id")["outcome"]
    # a0: 6 vs 5 (its own prompt) win; b0: 6 vs 7 loss. Against the averaged reference (6) both would tie.
    assert judge.to_dict() == {"a0": 1, "b0": -1}
