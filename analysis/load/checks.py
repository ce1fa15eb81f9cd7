"""What the analysis loads is checked before any number is computed from it: a hand-edited or damaged file
is refused with one line naming the file (and the row, where there is one), never averaged.

Checks: the file can be read as what its name says (CSV, parquet); the required columns are there; a score
is a number within its rubric's range (the row's own `score_min`-`score_max`, else the rubric in the run's
config.json; `overall` within the range of the dimensions it averages); a preference is one of the rubric's
choices; no judgment appears twice (the same run, prompt, candidate, order, dimension and sample). The rubric
is never read from conf/: a rubric added through `hydra.searchpath` is known only to the run that used it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.rubric import RubricSpec
from core.run_config import RunConfigError, read_run_config
from core.spellings import FALSE_TEXT, MISSING_LOWER, TRUE_TEXT

# the columns that identify one judgment: two rows agreeing on all of them are one judgment counted twice
IDENTITY: tuple[str, ...] = (
    "run_id",
    "judge",
    "model",
    "mode",
    "rubric",
    "prompt_id",
    "instance_id",
    "candidate_id",
    "other_id",
    "order",
    "dimension",
    "sample_idx",
)


class ResultsError(ValueError):
    """A results or labels file the analysis refuses; the message is one line naming the file."""


def run_rubric(results_file: Path) -> RubricSpec | None:
    """The rubric in the config.json beside `results_file` (core.run_config; None when the folder has none, or
    a config without a rubric); a damaged one is one line naming it."""
    try:
        config = read_run_config(Path(results_file).parent)
    except RunConfigError as exc:
        raise ResultsError(str(exc)) from None
    return config.rubric if config is not None else None


def _known_ranges(spec: RubricSpec) -> dict[str, tuple[float, float]]:
    """The spec's score ranges; "overall" (the mean of the dimensions) spans them also where a config written
    before `add_overall` does not say the rubric adds it."""
    ranges = spec.ranges()
    if ranges:
        ranges.setdefault("overall", (min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())))
    return ranges


def read_table(path: Path, read: Callable[[Path], Any], kind: str) -> Any:
    """`read(path)`, or one line saying the file is not a readable `kind` file."""
    try:
        return read(path)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file") from None
    except (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ResultsError(f"{path}: not a readable {kind} file ({first})") from None


def csv_line(path: Path, record: int) -> int:
    """The file line (header = line 1) on which data record `record` (0-based, as pandas numbers the rows
    of `pd.read_csv(path)`) starts: a quoted newline inside a field and a blank line (which pandas skips)
    move the later records down, so `record + 2` would name the wrong line. Read only for an error."""
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # a long judge answer is one field
    seen, end = -1, 0  # records read so far (the header is -1), the line the last one ended on
    last = [""]  # the physical line the reader took last
    with path.open(encoding="utf-8-sig", errors="replace", newline="") as handle:
        reader = csv.reader(_remember(handle, last))
        for _row in reader:
            start, end = end + 1, reader.line_num
            if start == end and not last[0].strip(" \t\r\n"):
                continue  # pandas (skip_blank_lines) skips a line of only spaces and tabs; `""` or `,` is a record
            if seen == record:
                return start
            seen += 1
    return record + 2  # the file changed since it was read


def _remember(lines: Iterable[str], last: list[str]) -> Iterator[str]:
    """`lines`, keeping the latest in last[0]: the csv module does not say what text a row came from."""
    for line in lines:
        last[0] = line
        yield line


def _where(path: Path, frame: pd.DataFrame, position: int) -> str:
    """`file:line` of a CSV row (its real line), `file: row N` of a parquet row."""
    index = int(frame.index[position])
    return f"{path}:{csv_line(path, index)}" if path.suffix == ".csv" else f"{path}: row {index + 1}"


def require_columns(frame: pd.DataFrame, path: Path, required: Sequence[str]) -> None:
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ResultsError(
            f"{path}: missing column(s) {', '.join(missing)}; a results table needs {', '.join(required)}"
        )


#: What names a judgment: a row without one of these (a line cut short, a cell emptied) is nobody's judgment.
NAMING = ("judge", "mode", "instance_id", "candidate_id", "dimension")


def _blank(values: pd.Series) -> np.ndarray:
    """Rows whose cell is missing or only spaces ("NA" is an id, not empty); a categorical's categories are
    read once each, not a string per row."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        blank = np.append(_blank(pd.Series(values.cat.categories, dtype=object)), True)  # last: code -1
        return blank[values.cat.codes.to_numpy()]
    text = values.astype("string").str.strip()
    return (text.isna() | (text == "")).fillna(True).to_numpy(dtype=bool)


def require_values(frame: pd.DataFrame, path: Path) -> None:
    """Refuse the first row with an empty naming cell (e.g. the last line of a truncated file)."""
    for column in (c for c in NAMING if c in frame):
        empty = _blank(frame[column])
        if empty.any():
            at = int(np.flatnonzero(empty)[0])
            raise ResultsError(f"{_where(path, frame, at)}: no {column} (is the line cut short?)")


def check_numbers(frame: pd.DataFrame, path: Path, column: str) -> pd.Series:
    """The column as floats; a value that is not a number (e.g. "abc") is refused with its row."""
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna().to_numpy() & frame[column].notna().to_numpy()
    if (
        bad.any()
    ):  # a missing spelling (NA, None, ...) is missing, not a bad value: read where it matters only
        text = frame[column].iloc[np.flatnonzero(bad)].astype(str).str.strip().str.lower()
        bad[bad] = ~text.isin(MISSING_LOWER).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ResultsError(
            f"{_where(path, frame, position)}: {column} {str(frame[column].iloc[position])[:40]!r} "
            "is not a number"
        )
    return values.astype(float)


def check_flags(frame: pd.DataFrame, path: Path, column: str) -> pd.Series:
    """A true/false column read as text (a CSV's "False" is true by truthiness) as nullable booleans: the
    spellings of true and false in any case, a missing spelling as missing; anything else is refused with its
    line."""
    text = frame[column].astype("string").str.strip().str.lower()
    missing = text.isna() | text.isin(MISSING_LOWER)
    values = pd.Series(pd.NA, index=frame.index, dtype="boolean")
    values[text.isin(TRUE_TEXT).fillna(False).to_numpy()] = True
    values[text.isin(FALSE_TEXT).fillna(False).to_numpy()] = False
    bad = (values.isna() & ~missing).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ResultsError(
            f"{_where(path, frame, position)}: {column} {str(frame[column].iloc[position])[:40]!r} "
            "is not true or false"
        )
    return values


def check_results(frame: pd.DataFrame, path: Path) -> None:
    """Refuse a results table whose scores or preferences are outside their rubric, or with a judgment twice.
    A score's range is its row's `score_min`-`score_max`, else the run's config.json rubric (older tables);
    the dimensions and choices are the config.json rubric's. Without either, nothing to check against."""
    if "rubric" in frame and "dimension" in frame:
        spec = run_rubric(path)
        scores = check_numbers(frame, path, "score") if "score" in frame else None
        lows, highs = (
            check_numbers(frame, path, c).to_numpy() if c in frame else np.full(len(frame), np.nan)
            for c in ("score_min", "score_max")
        )
        for (rubric, dim), rows in frame.groupby(
            ["rubric", "dimension"], observed=True, sort=False
        ).indices.items():
            known = spec if spec is not None and spec.name == str(rubric) else None
            names = (
                list(dict.fromkeys([*(d.name for d in known.dimensions), *_known_ranges(known)]))
                if known
                else []
            )
            if known is not None and str(dim) not in names:
                raise ResultsError(
                    f"{_where(path, frame, int(rows[0]))}: {str(dim)[:40]!r} is not a dimension of the "
                    f"{rubric} rubric ({', '.join(names)})"
                )
            if scores is not None:
                values = scores.to_numpy()[rows]
                _check_range(frame, path, rows, values, lows[rows], highs[rows], known, str(dim))
            choices = known.choices().get(str(dim)) if known is not None else None
            if "preference" in frame and choices:
                prefs = frame["preference"].iloc[rows]
                wrong = prefs.notna().to_numpy() & ~prefs.astype(str).isin(choices).to_numpy()
                prefs = prefs.to_numpy()
                if wrong.any():
                    at = int(rows[np.flatnonzero(wrong)[0]])
                    raise ResultsError(
                        f"{_where(path, frame, at)}: preference {str(prefs[wrong][0])!r} for {dim} is not "
                        f"one of {', '.join(choices)}"
                    )
    check_duplicates(frame, path)


def _check_range(
    frame: pd.DataFrame,
    path: Path,
    rows: np.ndarray,
    values: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    known: RubricSpec | None,
    dim: str,
) -> None:
    """Refuse the first score of one rubric dimension outside its range: the row's own bounds, and the run's
    config.json rubric's where it has one (the narrower of the two: a hand-edited bound widens nothing)."""
    ranges = _known_ranges(known) if known is not None else {}
    if dim in ranges:
        low, high = ranges[dim]
        lows, highs = np.fmax(lows, low), np.fmin(highs, high)  # fmax / fmin: a NaN bound takes the other
    with np.errstate(invalid="ignore"):
        outside = ~np.isnan(values) & ((values < lows) | (values > highs))
    if outside.any():
        first = int(np.flatnonzero(outside)[0])
        rubric = frame["rubric"].iloc[int(rows[first])]
        raise ResultsError(
            f"{_where(path, frame, int(rows[first]))}: score {values[first]:g} for {dim} is outside the "
            f"{rubric} rubric's range {lows[first]:g}-{highs[first]:g}"
        )


def row_groups(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Group number of every row by `keys` (a missing value is a value of its own) and each group's first
    row. The keys' category codes are packed into one integer, numbered densely or hashed (`pd.factorize`):
    no string per row, and no sort of 10M rows."""
    packed, size = np.zeros(len(frame), dtype=np.int64), 1
    for key in keys:
        col = frame[key]
        if isinstance(col.dtype, pd.CategoricalDtype):
            codes, n = col.cat.codes.to_numpy().astype(np.int64), len(col.cat.categories)
        else:
            codes, uniques = pd.factorize(col)
            n = len(uniques)
        if size * (n + 1) >= 2**62:  # re-number the packed key before it overflows
            packed = pd.factorize(packed)[0].astype(np.int64)
            size = int(packed.max()) + 1 if len(packed) else 1
        packed, size = packed * (n + 1) + np.where(codes < 0, n, codes), size * (n + 1)
    if size <= 8 * len(packed) + 1_000_000:  # few possible keys: a dense re-numbering, cheaper than hashing
        seen = np.zeros(size, dtype=bool)
        seen[packed] = True
        ids = (np.cumsum(seen) - 1)[packed]
    else:
        ids = pd.factorize(packed)[0]
    first = np.empty(int(ids.max()) + 1 if len(ids) else 0, dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids))[::-1]  # reversed, so the first occurrence is written last
    return ids, first


def check_duplicates(frame: pd.DataFrame, path: Path) -> None:
    """Refuse a table in which one judgment appears twice (it would be counted twice)."""
    keys = [c for c in IDENTITY if c in frame]
    if not keys or "dimension" not in keys:
        return
    ids, first = row_groups(frame, keys)
    if len(first) == len(frame):
        return
    twice = first[ids] != np.arange(len(frame))
    if twice.any():
        at = int(np.flatnonzero(twice)[0])
        raise ResultsError(
            f"{_where(path, frame, at)}: a duplicated row ({int(twice.sum())} in all): the same "
            "judgment appears twice; remove the copies"
        )


def off_scale(values: np.ndarray, low: np.ndarray | float, high: np.ndarray | float) -> np.ndarray:
    """Scores that are not a whole number from `low` to `high`: the one test of a label's value, for
    `annotate ingest`'s sheets and `--humans` files alike (NaN, inf, 99 and 1e308 on a 0-3 scale all fail)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(values) & (values == np.round(values)) & (values >= low) & (values <= high))


def check_label_text(frame: pd.DataFrame, path: Path, column: str = "score") -> None:
    """Refuse a label whose score is written but is no finite number (`nan`, `inf`, `-inf`): an empty cell
    (or NA, None, null) is a missing label, but a `nan` is a value someone computed, and it would be dropped
    unseen."""
    if column not in frame:
        return
    text = frame[column].astype("string").str.strip()
    lower = text.str.lower()
    written = text.notna() & (text != "") & (~lower.isin(MISSING_LOWER) | lower.str.contains("nan"))
    values = pd.to_numeric(text.where(written), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = written.to_numpy(dtype=bool) & ~np.isfinite(values)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise ResultsError(
            f"{_where(path, frame, at)}: {column} {str(text.iloc[at])[:40]!r} is not a finite number "
            "(leave the cell empty for a missing label)"
        )


def label_ranges(results: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Each scored dimension's range as the judges' rubrics give it (`score_min`-`score_max` of the rows; the
    widest where rubrics differ): what an expert's score on that dimension must lie within."""
    if not {"dimension", "score_min", "score_max"} <= set(results):
        return {}
    bounds = results[["dimension", "score_min", "score_max"]].dropna().astype({"dimension": str})
    if bounds.empty:
        return {}
    span = bounds.groupby("dimension", sort=True).agg(low=("score_min", "min"), high=("score_max", "max"))
    return {str(d): (float(r.low), float(r.high)) for d, r in span.iterrows()}


def check_label_scale(humans: pd.DataFrame, path: Path, ranges: Mapping[str, tuple[float, float]]) -> None:
    """Refuse the first expert score off its dimension's scale (`off_scale`, the test `annotate ingest`
    applies), naming the file, the row and the range: a 1-7 file against a 0-3 rubric would otherwise be
    compared as it is. Missing scores are missing labels; a dimension with no known range is not checked."""
    dims = humans["dimension"].astype(str).to_numpy()
    low = np.array([ranges.get(d, (np.nan, np.nan))[0] for d in dims], dtype=float)
    high = np.array([ranges.get(d, (np.nan, np.nan))[1] for d in dims], dtype=float)
    values = pd.to_numeric(humans["score"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    known = ~np.isnan(low) & ~np.isnan(values)
    bad = known & off_scale(values, low, high)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise ResultsError(
            f"{_where(path, humans, at)}: score {values[at]:g} for {dims[at]} is not a whole number on the "
            f"judges' rubric range {low[at]:g}-{high[at]:g} (is the file on another scale?)"
        )


@dataclass(frozen=True)
class LabelCoverage:
    """How many expert labels name a candidate the judges scored (instance and candidate id)."""

    labels: int
    matched: int
    items: int  # labelled (instance, candidate) pairs
    items_matched: int

    @property
    def unmatched(self) -> int:
        return self.labels - self.matched


def label_coverage(humans: pd.DataFrame, results: pd.DataFrame) -> LabelCoverage:
    """The labels whose (instance_id, candidate_id) a judge scored (a row that parsed), and the pairs behind
    them."""
    keys = ["instance_id", "candidate_id"]
    scored = results
    if "parse_ok" in results:
        scored = results.loc[results["parse_ok"].astype("boolean").fillna(False).to_numpy(dtype=bool)]
    judged = pd.MultiIndex.from_frame(scored[keys].astype(str).drop_duplicates())
    labelled = pd.MultiIndex.from_frame(humans[keys].astype(str))
    hit = labelled.isin(judged)
    pairs = humans[keys].astype(str).assign(_hit=hit).drop_duplicates(keys)
    return LabelCoverage(len(humans), int(hit.sum()), len(pairs), int(pairs["_hit"].sum()))


def check_label_coverage(coverage: LabelCoverage, path: Path) -> None:
    """Labels none of which names a judged candidate are an error: every expert comparison would be empty."""
    if coverage.labels and not coverage.matched:
        raise ResultsError(
            f"{path}: none of its {coverage.labels} labels names a candidate the judges scored (instance_id and "
            "candidate_id must match the results'); were they made for another study or dataset?"
        )
