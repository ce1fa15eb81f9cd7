"""analysis.scores: candidate scores, best-of-K, summaries, group ids — hand-computed cases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.scores import (
    CANDIDATE_KEYS,
    LOWER_IS_BETTER,
    best_of_k,
    candidate_scores,
    direction,
    group_ids,
    map_distinct,
    score_summary,
)


def rows(*specs: tuple) -> pd.DataFrame:
    """(instance, candidate, source, dimension, sample, score, parse_ok) -> results rows of judge j, mode m."""
    cols = ["instance_id", "candidate_id", "source", "dimension", "sample_idx", "score", "parse_ok"]
    return pd.DataFrame(specs, columns=cols).assign(judge="j", mode="independent")


def test_lower_is_better_constant() -> None:
    assert LOWER_IS_BETTER == frozenset({"source_boundedness", "diagnostic_framing"})
    dims = pd.Series(["originality", "source_boundedness", "diagnostic_framing"])
    assert direction(dims).tolist() == [1.0, -1.0, -1.0]
    assert direction(dims.astype("category")).tolist() == [1.0, -1.0, -1.0]
    assert direction(dims, lower_is_better={"originality"}).tolist() == [-1.0, 1.0, 1.0]


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
    cands = pd.DataFrame({
        "judge": "j", "mode": "independent", "instance_id": "i1", "source": ["gen", "gen", "gen", "gen"],
        "dimension": ["originality", "originality", "source_boundedness", "source_boundedness"],
        "score": [4.0, 7.0, 4.0, 7.0],
    })  # fmt: skip
    out = best_of_k(cands).set_index("dimension")
    assert out.loc["originality", "best"] == 7.0 and out.loc["source_boundedness", "best"] == 4.0
    assert out.loc["originality", "k"] == 2
    flipped = best_of_k(cands, lower_is_better=()).set_index("dimension")
    assert flipped.loc["source_boundedness", "best"] == 7.0


def test_score_summary_mean_sd_and_t_interval() -> None:
    cands = pd.DataFrame({"judge": "j", "mode": "m", "source": "gen", "dimension": "d",
                          "score": [2.0, 4.0, 6.0, 8.0]})  # fmt: skip
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
