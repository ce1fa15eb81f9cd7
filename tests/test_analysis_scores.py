"""analysis.stats.scores: candidate scores, best-of-K, summaries, group ids — hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.stats.scores import (
    CANDIDATE_KEYS,
    best_of_k,
    best_of_k_scores,
    candidate_scores,
    combined_pairs,
    dimension_directions,
    direction,
    group_ids,
    map_distinct,
    score_summary,
    with_directions,
)


def rows(*specs: tuple) -> pd.DataFrame:
    """(instance, candidate, source, dimension, sample, score, parse_ok) -> results rows of judge j, mode m."""
    cols = ["instance_id", "candidate_id", "source", "dimension", "sample_idx", "score", "parse_ok"]
    return pd.DataFrame(specs, columns=cols).assign(judge="j", mode="independent", higher_is_better=True)


def test_direction_is_read_from_the_table_never_from_the_name() -> None:
    frame = pd.DataFrame(
        {
            "dimension": ["originality", "source_boundedness", "made_up"],
            "higher_is_better": [True, False, False],
        }
    )
    assert direction(frame).tolist() == [1.0, -1.0, -1.0]
    # a CSV may hand the flags over as text: "False" must not read as true
    assert direction(frame.astype({"higher_is_better": str})).tolist() == [1.0, -1.0, -1.0]
    assert direction(frame.astype({"higher_is_better": "category"})).tolist() == [1.0, -1.0, -1.0]
    assert dimension_directions(frame) == {"originality": True, "source_boundedness": False, "made_up": False}


def test_a_table_without_directions_fails_in_one_clear_line() -> None:
    frame = pd.DataFrame({"dimension": ["a", "b"], "score": [1.0, 2.0]})
    with pytest.raises(ValueError, match="lack the 'higher_is_better' column"):
        dimension_directions(frame)
    with pytest.raises(ValueError, match="higher_is_better"):
        candidate_scores(frame.assign(judge="j", mode="m", instance_id="i", candidate_id="c", source="s"))
    both = frame.assign(dimension="a", higher_is_better=[True, False])
    with pytest.raises(ValueError, match=r"\['a'\] are higher-is-better in some rows"):
        dimension_directions(both)
    with pytest.raises(ValueError, match=r"no direction .* for dimension\(s\) \['b'\]"):
        with_directions(frame, {"a": True}, "human labels")
    assert with_directions(frame, {"a": True, "b": False}, "x")["higher_is_better"].tolist() == [True, False]


def test_candidate_score_is_the_mean_of_scored_samples() -> None:
    frame = rows(
        ("i1", "c1", "gen", "originality", 0, 4.0, True),
        ("i1", "c1", "gen", "originality", 1, 6.0, True),
        ("i1", "c1", "gen", "originality", 2, np.nan, False),  # unscored: dropped
        ("i1", "c1", "gen", "originality", 3, 9.0, False),  # a score with parse_ok False is not trusted
        ("i1", "c2", "gen", "originality", 0, np.nan, False),  # no scored sample: c2 is unscored
    )
    out = candidate_scores(frame)
    assert len(out) == 1
    row = out.iloc[0]
    # (4 + 6)/2 = 5; sd = sqrt(((4−5)² + (6−5)²)/1) = sqrt(2)
    assert (row["candidate_id"], row["score"], row["n_scored"]) == ("c1", 5.0, 2)
    assert row["sd"] == pytest.approx(np.sqrt(2))


def test_candidate_scores_equal_a_pandas_groupby_on_categoricals() -> None:
    rng = np.random.default_rng(0)
    n = 2000
    frame = pd.DataFrame({k: rng.choice([f"{k}{x}" for x in range(4)], n) for k in CANDIDATE_KEYS})
    frame = frame.astype("category").assign(score=rng.integers(1, 10, n).astype(float))
    frame["higher_is_better"] = rng.random(n) < 0.5
    frame.loc[rng.random(n) < 0.1, "score"] = np.nan
    got = candidate_scores(frame).set_index(list(CANDIDATE_KEYS)).sort_index()
    expected = frame.dropna(subset=["score"]).groupby(list(CANDIDATE_KEYS), observed=True)["score"]
    expected = expected.agg(["mean", "std", "size"]).sort_index()
    assert got.index.equals(expected.index)
    assert np.allclose(got["score"], expected["mean"]) and (got["n_scored"] == expected["size"]).all()
    assert np.allclose(got["sd"].fillna(-1), expected["std"].fillna(-1))


def test_group_ids_number_groups_by_key_codes() -> None:
    frame = pd.DataFrame({"a": ["y", "x", "y", "x", None], "b": [1, 1, 1, 2, 1]})
    ids, first = group_ids(frame, ["a", "b"])
    # codes of a: y 0, x 1, missing last; of b: 1 0, 2 1 -> (y,1) 0, (x,1) 1, (x,2) 2, (None,1) 3
    assert ids.tolist() == [0, 1, 0, 2, 3] and first.tolist() == [0, 1, 3, 4]
    categorical = frame.astype({"a": pd.CategoricalDtype(["x", "y"])})  # codes x 0, y 1
    # (y,1) = (1,0), (x,1) = (0,0), (x,2) = (0,1), (None,1) = (2,0) -> in code order 2, 0, 2, 1, 3
    assert group_ids(categorical, ["a", "b"])[0].tolist() == [2, 0, 2, 1, 3]


def test_best_of_k_max_or_min_by_direction() -> None:
    cands = pd.DataFrame(
        {
            "judge": "j",
            "mode": "independent",
            "instance_id": "i1",
            "source": ["gen", "gen", "gen", "gen"],
            "dimension": ["originality", "originality", "source_boundedness", "source_boundedness"],
            "higher_is_better": [True, True, False, False],
            "score": [4.0, 7.0, 4.0, 7.0],
        }
    )
    out = best_of_k(cands).set_index("dimension")
    assert out.loc["originality", "best"] == 7.0 and out.loc["source_boundedness", "best"] == 4.0
    assert out.loc["originality", "k"] == 2
    flipped = best_of_k(cands.assign(higher_is_better=True)).set_index("dimension")
    assert flipped.loc["source_boundedness", "best"] == 7.0


def test_score_summary_mean_sd_and_t_interval() -> None:
    cands = pd.DataFrame(
        {"judge": "j", "mode": "m", "source": "gen", "dimension": "d", "score": [2.0, 4.0, 6.0, 8.0]}
    )
    out = score_summary(cands).iloc[0]
    # mean 5; sd = sqrt((9 + 1 + 1 + 9)/3) = sqrt(20/3) = 2.5820; half width t(.975, 3)·sd/2 = 3.1824·1.2910
    assert (out["n"], out["mean"]) == (4, 5.0)
    assert out["sd"] == pytest.approx(np.sqrt(20 / 3))
    assert out["ci_hi"] - out["mean"] == pytest.approx(3.182446305 * np.sqrt(20 / 3) / 2, abs=1e-6)


def test_map_distinct_calls_once_per_value() -> None:
    calls: list[str] = []
    series = pd.Series(["a", "b", "a", None, "a"], dtype="category")
    out = map_distinct(series, lambda v: calls.append(v) or v.upper())
    assert (
        out[[0, 1, 2, 4]].tolist() == ["A", "B", "A", "A"] and pd.isna(out[3]) and sorted(calls) == ["a", "b"]
    )


# Candidate scores of two judges (g has K = 2 candidates c1, c2; r is the reference). Judge b did not score
# the reference of i2 on originality, and only judge a scored source_boundedness (lower is better).
PLANTED = {
    ("a", "originality"): {"i1": (2, 1, 3), "i2": (1, 2, 2), "i3": (3, 0, 1)},  # (r, c1, c2)
    ("b", "originality"): {"i1": (3, 3, 1), "i2": (None, 0, 0), "i3": (3, 2, 2)},
    ("a", "source_boundedness"): {"i1": (2, 1, 3), "i2": (0, 2, 3), "i3": (1, 0, 3)},
}


def planted_cands() -> pd.DataFrame:
    rows = []
    for (judge, dim), by_instance in PLANTED.items():
        for inst, values in by_instance.items():
            for cid, value in zip(("r", "c1", "c2"), values, strict=True):
                if value is not None:
                    rows.append(
                        {
                            "judge": judge,
                            "mode": "independent",
                            "instance_id": inst,
                            "candidate_id": cid,
                            "source": "reference" if cid == "r" else "g",
                            "dimension": dim,
                            "higher_is_better": dim == "originality",
                            "score": float(value),
                        }
                    )
    return pd.DataFrame(rows)


def test_best_of_k_scores_per_judge_and_combined_by_hand() -> None:
    out = best_of_k_scores(candidate_scores(planted_cands()))
    assert list(out.columns) == ["judge", "mode", "source", "dimension", "n", "n_judges_min", "mean", "sd"]
    got = {(r.judge, r.source, r.dimension): (r.n, r.mean, r.sd) for r in out.itertuples()}
    judges = {(r.judge, r.source, r.dimension): r.n_judges_min for r in out.itertuples()}
    assert judges[("a", "g", "originality")] == 1 and judges[("mean(a+b)", "g", "originality")] == 2
    # judge a, originality: best of (1, 3), (2, 2), (0, 1) = 3, 2, 1 -> mean 2, sd 1 over the 3 instances
    assert got[("a", "g", "originality")] == pytest.approx((3, 2.0, 1.0))
    assert got[("a", "reference", "originality")] == pytest.approx((3, 2.0, 1.0))  # 2, 1, 3
    # source-boundedness, lower is better: min of (1, 3), (2, 3), (0, 3) = 1, 2, 0 -> mean 1, sd 1
    assert got[("a", "g", "source_boundedness")] == pytest.approx((3, 1.0, 1.0))
    # judge b: best 3, 0, 2 -> mean 5/3, sd sqrt(((4/3)² + (5/3)² + (1/3)²)/2) = sqrt(7/3); reference 3, 3
    assert got[("b", "g", "originality")] == pytest.approx((3, 5 / 3, np.sqrt(7 / 3)))
    assert got[("b", "reference", "originality")] == pytest.approx((2, 3.0, 0.0))
    # mean(a+b), over candidates both judges scored: i1 c1 (1+3)/2 = 2, c2 (3+1)/2 = 2 -> 2; i2 left out (b
    # has no reference there, so no candidate rests on both); i3 c1 1, c2 1.5 -> 1.5. mean 1.75, sd √2/4
    assert got[("mean(a+b)", "g", "originality")] == pytest.approx((2, 1.75, np.sqrt(2) / 4))
    # the reference where both judges scored it: 2.5, 3 -> mean 2.75, sd √2/4 (i2 rests on a alone: left out)
    assert got[("mean(a+b)", "reference", "originality")] == pytest.approx((2, 2.75, np.sqrt(2) / 4))
    # only a rated source-boundedness: its combination is a's alone
    assert got[("mean(a)", "g", "source_boundedness")] == pytest.approx((3, 1.0, 1.0))


def test_combined_mean_only_over_candidates_every_judge_scored_on_both_sides() -> None:
    pairs = combined_pairs(candidate_scores(planted_cands()))
    i2 = pairs.loc[(pairs["instance_id"] == "i2") & (pairs["dimension"] == "originality")]
    # b scored c1, c2 of i2 but not its reference: the old mean over every judge gave c1 (2 + 0)/2 = 1, the
    # mean over the judges that scored both sides a's 2 alone; neither is over both judges, so i2 is left out
    assert i2.empty
    i1 = pairs.loc[(pairs["instance_id"] == "i1") & (pairs["dimension"] == "originality")]
    assert i1["ref_score"].tolist() == [2.5, 2.5] and (i1["n_judges"] == 2).all()
