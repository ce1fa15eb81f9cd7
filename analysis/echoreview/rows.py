"""One rater's rows for the EchoReview tables: runs are never pooled and no judgment is counted twice.

A rater is a judge in one mode; the rest of the analysis (`analysis.load.collect.label_overlapping_runs`) makes
runs of one judge over the same items separate raters, labelled ``judge@run_id``. Tables built without that
loader get the same split here, wherever two runs of one judge judged one thing. Rows that still repeat
one judgment are refused: which copy is right cannot be known, and keeping both would count it twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.load.collect import relabel_judges


def present(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns of `columns` that `frame` has, in that order."""
    return [c for c in columns if c in frame.columns]


def split_runs(rows: pd.DataFrame, judgment: Sequence[str]) -> pd.DataFrame:
    """`rows` with each judge (in each mode) whose runs judged one `judgment` key twice relabelled
    ``judge@run_id`` on all its rows, so that its runs are separate raters; unchanged otherwise."""
    if "run_id" not in rows or "judge" not in rows or rows.empty:
        return rows
    keys = present(rows, judgment)
    runs = rows.groupby(keys, observed=True, dropna=False, sort=False)["run_id"].transform("nunique")
    rater = present(rows, ("judge", "mode"))
    clash = rows.loc[runs.to_numpy() > 1, rater].astype(str).drop_duplicates()
    if clash.empty:
        return rows
    return rows.assign(judge=relabel_judges(rows, rater, clash, rows["run_id"]))


def refuse_duplicates(rows: pd.DataFrame, judgment: Sequence[str], what: str) -> None:
    """A ValueError (one line: the first repeated key and how many rows repeat) where two rows of `rows`
    share every `judgment` column; `what` names the table in the message."""
    keys = present(rows, judgment)
    twice = rows.duplicated(subset=keys, keep=False)
    if not twice.any():
        return
    first = rows.loc[twice].iloc[0]
    key = ", ".join(f"{k}={first[k]}" for k in keys)
    raise ValueError(
        f"{what}: {int(twice.sum())} rows repeat a judgment, e.g. ({key}): the same judgment "
        "recorded more than once; remove the copies (or give each run its own run_id)"
    )
