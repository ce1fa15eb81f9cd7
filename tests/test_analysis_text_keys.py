"""Issue 35 row 1: key columns are turned to text once per category, not once per row, and the reference is
joined through integer codes. Each helper must give exactly what the per-row pandas code gave."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.latent import _votes
from analysis.stats.scores import CONTEXT, as_text, join_reference, text_columns, text_isin


def _column(values: list[object], categories: list[object] | None) -> pd.Series:
    if categories is None:
        return pd.Series(values, index=np.arange(10, 10 + len(values)), name="k")
    return pd.Series(
        pd.Categorical(values, categories=categories), index=np.arange(10, 10 + len(values)), name="k"
    )


@pytest.mark.parametrize(
    ("values", "categories"),
    [
        (["a", None, "b", "a"], ["a", "b", "unused"]),
        (["a", "b"], None),
        ([1, None, 2], [1, 2]),  # not string categories: pandas' own conversion
        ([], ["a"]),
    ],
)
def test_as_text_is_astype_str(values: list[object], categories: list[object] | None) -> None:
    column = _column(values, categories)
    pd.testing.assert_series_equal(as_text(column), column.astype(str))
    frame = pd.DataFrame({"k": column, "v": np.arange(len(column), dtype=float)})
    pd.testing.assert_frame_equal(text_columns(frame, ["k"]), frame.astype({"k": str}))


def test_text_isin_is_astype_str_isin() -> None:
    column = _column(["a", None, "b", "c", "a"], ["a", "b", "c"])
    expected = column.astype(str).isin(["a", "c"]).to_numpy()
    assert text_isin(column, ["a", "c"]).tolist() == expected.tolist() == [True, False, False, True, True]


def _join_by_rows(gen: pd.DataFrame, ref: pd.DataFrame, keys: list[str]) -> list[tuple[int, float]]:
    """The rule, row by row: the reference scored in the generator's own prompt, else the shared one."""
    out = []
    for i, row in enumerate(gen.itertuples(index=False)):
        same = np.ones(len(ref), dtype=bool)
        for k in keys:
            same &= ref[k].astype(str).to_numpy() == str(getattr(row, k))
        own = same & (ref[CONTEXT].astype(str).to_numpy() == str(row.source))
        shared = same & (ref[CONTEXT].astype(str).to_numpy() == "")
        pick = np.flatnonzero(own) if own.any() else np.flatnonzero(shared)
        if len(pick):
            out.append((i, float(ref["ref_score"].iloc[pick[0]])))
    return out


def test_join_reference_picks_the_own_prompts_reference_then_the_shared_one() -> None:
    rng = np.random.default_rng(3)
    n = 60
    cat = lambda values: pd.Categorical(values, categories=sorted(set(values)))  # noqa: E731
    gen = pd.DataFrame(
        {
            "judge": cat(rng.choice(["j1", "j2"], n).tolist()),
            "instance_id": cat(rng.choice(["i1", "i2", "i3"], n).tolist()),
            "source": rng.choice(["g1", "g2", "g3"], n),
            "score": rng.integers(1, 6, n).astype(float),
        }
    )
    ref = pd.DataFrame(
        {
            "judge": pd.Categorical(["j1", "j1", "j2", "j2", "j1"], categories=["j1", "j2"]),
            "instance_id": pd.Categorical(["i1", "i1", "i1", "i2", "i3"], categories=["i1", "i2", "i3"]),
            CONTEXT: ["g1", "", "", "g2", "g3"],
            "ref_score": [1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    out = join_reference(gen, ref, ["judge", "instance_id"])
    expected = _join_by_rows(gen, ref, ["judge", "instance_id"])
    assert list(out.columns) == ["judge", "instance_id", "source", "score", "ref_score"]
    assert out["ref_score"].tolist() == [s for _, s in expected]
    assert out["score"].tolist() == gen["score"].iloc[[i for i, _ in expected]].tolist()
    assert 0 < len(out) < n  # some rows have no reference (j2 on i3)


def test_votes_join_each_tasks_labels_in_row_order() -> None:
    labels = pd.DataFrame({"task": ["t2", "t1", "t2", "t10", "t1"], "label": [1, -1, 0, 1, 1]})
    expected = labels.groupby("task")["label"].agg(lambda s: " ".join(map(str, s)))
    assert _votes(labels).to_dict() == expected.to_dict() == {"t1": "-1 1", "t10": "1", "t2": "1 0"}
