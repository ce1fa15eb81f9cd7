"""Column-selected loading (issue 35, item 2): the loader reads the columns the tables need from the parquet
files, key columns straight into categoricals, never a string per row; its checks and relabellings give what
they gave on strings."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.load.checks import ResultsError, row_groups
from analysis.load.collect import REPORT_COLUMNS, combine_categories, load_results, map_categories, prepare
from analysis.load.synthetic import synthetic_results
from analysis.stats.modes import fill_mode_kinds, kinds_by_mode
from core.modes import ModeKind
from tests.support.cli import run as run_cli
from tests.support.studies import cli_env

ROOT = Path(__file__).resolve().parent.parent


def _write(folder: Path, frame: pd.DataFrame) -> Path:
    """`frame` as a run's results.parquet (strings, not categoricals, as a run writes them)."""
    folder.mkdir(parents=True)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    frame.to_parquet(folder / "results.parquet", index=False)
    return folder


def _study(n_instances: int = 3) -> pd.DataFrame:
    frame = synthetic_results(n_instances=n_instances, judges=("a", "b"), n_samples=2, unscored=0.1, seed=1)
    return frame.assign(raw="{}", rationale="because", label="Q1")


def test_only_the_asked_columns_are_read_and_keys_arrive_as_categoricals(tmp_path: Path) -> None:
    _write(tmp_path / "run", _study())
    loaded = load_results(tmp_path)
    assert "rationale" not in loaded and "label" not in loaded  # no table reads them
    assert set(loaded.columns) <= set(REPORT_COLUMNS)
    for key in ("judge", "mode", "rubric", "instance_id", "candidate_id", "dimension", "raw", "source"):
        assert isinstance(loaded[key].dtype, pd.CategoricalDtype), key
    wide = load_results(tmp_path, columns=[*REPORT_COLUMNS, "rationale"])
    assert set(wide["rationale"].astype(str)) == {"because"}
    assert wide.drop(columns="rationale").equals(loaded)


def test_the_loaded_numbers_are_the_written_ones(tmp_path: Path) -> None:
    frame = _study()
    _write(tmp_path / "run", frame)
    loaded = load_results(tmp_path)
    keys = ["judge", "mode", "instance_id", "candidate_id", "dimension", "sample_idx"]
    want = frame.astype({k: str for k in keys}).sort_values(keys)
    got = loaded.astype({k: str for k in keys}).sort_values(keys)
    assert np.array_equal(want["score"].to_numpy(), got["score"].to_numpy(), equal_nan=True)
    assert list(want["judge"]) == list(got["judge"])


def test_a_judgment_twice_in_a_parquet_file_is_refused_with_its_row(tmp_path: Path) -> None:
    frame = _study(1)
    _write(tmp_path / "run", pd.concat([frame, frame.iloc[[4]]], ignore_index=True))
    with pytest.raises(ResultsError, match=rf"row {len(frame) + 1}: a duplicated row \(1 in all\)"):
        load_results(tmp_path)


def test_a_rerun_of_one_study_counts_each_judgment_once_keeping_the_scored_copy() -> None:
    one = _study(2).assign(run_id="r1")
    rerun = one.assign(run_id="r2", parse_ok=False, score=np.nan)  # the same judgments, unscored this time
    both = pd.concat([rerun, one], ignore_index=True)
    out = prepare(both, {"r1": "s", "r2": "s"})
    assert out.attrs["duplicate_judgments"] == len(one)
    assert len(out) == len(one) and out["parse_ok"].sum() == one["parse_ok"].sum()
    # two studies over the same items are two raters, each kept whole
    apart = prepare(both, {"r1": "s1", "r2": "s2"})
    assert len(apart) == len(both) and {"a@r1", "a@r2", "b@r1", "b@r2"} == set(apart["judge"].astype(str))


def test_runs_of_one_rater_each_alone_are_not_relabelled() -> None:
    """One run per judge x mode (the usual study): nothing to group, nothing dropped or relabelled."""
    frame = _study(2)
    out = prepare(frame, {})
    assert "duplicate_judgments" not in out.attrs and len(out) == len(frame)
    assert set(out["judge"].astype(str)) == {"a", "b"}


def test_mode_kinds_are_filled_per_mode_as_categoricals() -> None:
    rows = pd.DataFrame(
        {
            "mode": pd.Categorical(["independent", "comparative", "pairwise", "comparative", "new"]),
            "position": [np.nan, 1.0, np.nan, 0.0, np.nan],
            "order": [None, None, "ab", None, None],
            "mode_kind": pd.Categorical([None, None, None, None, "multi"]),
        }
    )
    kinds = fill_mode_kinds(rows)
    assert isinstance(kinds.dtype, pd.CategoricalDtype)
    assert list(kinds.astype(str)) == ["single", "multi", "pair", "multi", "multi"]
    assert kinds_by_mode(rows.assign(mode_kind=kinds)) == {
        "independent": ModeKind.single,
        "comparative": ModeKind.multi,
        "pairwise": ModeKind.pair,
        "new": ModeKind.multi,
    }


def test_relabelling_maps_categories_with_missing_values_as_strings_did() -> None:
    values = pd.Series(pd.Categorical(["x", None, " y ", "x"]))
    mapped = map_categories(values, lambda v: str(v).strip() if isinstance(v, str) else "none")
    assert list(mapped.astype(str)) == ["x", "none", "y", "x"]
    judges = pd.Series(pd.Categorical(["a", "b", "a", "a"]))
    rubrics = pd.Series(pd.Categorical(["n", "n", "m", "n"]))
    combined = combine_categories(judges, rubrics, lambda j, r: f"{j}/{r}")
    assert list(combined.astype(str)) == ["a/n", "b/n", "a/m", "a/n"]
    assert combined.cat.categories.size == 3


def test_row_groups_agree_with_pandas_duplicated() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": pd.Categorical(rng.choice(np.array(["x", "y", None], dtype=object), 5000)),
            "b": rng.integers(0, 7, 5000),
            "c": pd.Categorical(rng.choice([f"p{i}" for i in range(300)], 5000)),
        }
    )
    ids, first = row_groups(frame, ["a", "b", "c"])
    assert np.array_equal(first[ids] != np.arange(len(frame)), frame.duplicated().to_numpy())
    assert len(first) == len(frame.drop_duplicates())


def test_the_viewer_starts_without_the_statistics_libraries(tmp_path: Path) -> None:
    """`python -m analysis.view` serves its first page without scipy or statsmodels (issue 35: start < 2 s)."""
    code = "import sys, analysis.view.server; print(sorted({'scipy', 'statsmodels'} & set(sys.modules)))"
    out = run_cli(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=cli_env(tmp_path),
        check=True,
    )
    assert out.stdout.strip() == "[]"
