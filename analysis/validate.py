"""What the analysis loads is checked before any number is computed from it: a hand-edited or damaged file
is refused with one line naming the file (and the row, where there is one), never averaged.

Checks: the file can be read as what its name says (CSV, parquet); the required columns are there; a score
is a number within its rubric's range (the shipped spec conf/rubric/<name>.yaml; `overall` within the range
of the dimensions it averages); a preference is one of the rubric's choices; no judgment appears twice (the
same run, prompt, candidate, order, dimension and sample).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

import conf
from analysis.scores import FALSE_TEXT, TRUE_TEXT

# the columns that identify one judgment: two rows agreeing on all of them are one judgment counted twice
IDENTITY: tuple[str, ...] = ("run_id", "judge", "model", "mode", "rubric", "prompt_id", "instance_id",
                             "candidate_id", "other_id", "order", "dimension", "sample_idx")  # fmt: skip


# the cell texts pandas reads as missing by default: a file read with keep_default_na=False (ids are text, so a
# candidate or annotator "NA" stays "NA") uses them for its number and flag columns only
MISSING_TEXT: tuple[str, ...] = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                                 "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")  # fmt: skip
MISSING_LOWER: frozenset[str] = frozenset(m.lower() for m in MISSING_TEXT)  # as compared, any case


class ResultsError(ValueError):
    """A results or labels file the analysis refuses; the message is one line naming the file."""


@lru_cache(maxsize=64)
def rubric_bounds(name: str) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[str, ...]]]:
    """(dimension -> (low, high), dimension -> choices) from the shipped spec (empty when there is none)."""
    spec = Path(conf.__file__).parent / "rubric" / f"{name}.yaml"
    if not spec.is_file():
        return {}, {}
    dims = [d for d in (yaml.safe_load(spec.read_text(encoding="utf-8")) or {}).get("dimensions") or []
            if isinstance(d, dict)]  # fmt: skip
    ranges = {str(d["name"]): (float(d["low"]), float(d["high"])) for d in dims if "low" in d and "high" in d}
    if ranges:
        ranges.setdefault("overall", (min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())))
    choices = {str(d["name"]): tuple(str(c) for c in d["choices"]) for d in dims if d.get("choices")}
    return ranges, choices


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
        raise ResultsError(f"{path}: missing column(s) {', '.join(missing)}; a results table needs "
                           f"{', '.join(required)}")  # fmt: skip


def check_numbers(frame: pd.DataFrame, path: Path, column: str) -> pd.Series:
    """The column as floats; a value that is not a number (e.g. "abc") is refused with its row."""
    values = pd.to_numeric(frame[column], errors="coerce")
    bad = values.isna().to_numpy() & frame[column].notna().to_numpy()
    bad &= ~frame[column].astype(str).str.strip().str.lower().isin(MISSING_LOWER).to_numpy()
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise ResultsError(f"{_where(path, frame, position)}: {column} {str(frame[column].iloc[position])[:40]!r} "
                           "is not a number")  # fmt: skip
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
        raise ResultsError(f"{_where(path, frame, position)}: {column} {str(frame[column].iloc[position])[:40]!r} "
                           "is not true or false")  # fmt: skip
    return values


def check_results(frame: pd.DataFrame, path: Path) -> None:
    """Refuse a results table whose scores or preferences are outside their rubric, or with a judgment twice."""
    if "rubric" in frame and "dimension" in frame:
        scores = check_numbers(frame, path, "score") if "score" in frame else None
        for (rubric, dim), rows in frame.groupby(["rubric", "dimension"], observed=True, sort=False).indices.items():
            ranges, choices = rubric_bounds(str(rubric))
            if (ranges or choices) and str(dim) not in {*ranges, *choices}:
                raise ResultsError(f"{_where(path, frame, int(rows[0]))}: {str(dim)[:40]!r} is not a dimension of "
                                   f"the {rubric} rubric ({', '.join([*ranges, *choices])})")  # fmt: skip
            if scores is not None and str(dim) in ranges:
                low, high = ranges[str(dim)]
                values = scores.to_numpy()[rows]
                outside = ~np.isnan(values) & ((values < low) | (values > high))
                if outside.any():
                    at = int(rows[np.flatnonzero(outside)[0]])
                    raise ResultsError(f"{_where(path, frame, at)}: score {values[outside][0]:g} for {dim} is "
                                       f"outside the {rubric} rubric's range {low:g}-{high:g}")  # fmt: skip
            if "preference" in frame and str(dim) in choices:
                prefs = frame["preference"].to_numpy()[rows]
                wrong = pd.notna(prefs) & ~pd.Series(prefs).astype(str).isin(choices[str(dim)]).to_numpy()
                if wrong.any():
                    at = int(rows[np.flatnonzero(wrong)[0]])
                    raise ResultsError(f"{_where(path, frame, at)}: preference {str(prefs[wrong][0])!r} for {dim} "
                                       f"is not one of {', '.join(choices[str(dim)])}")  # fmt: skip
    check_duplicates(frame, path)


def check_duplicates(frame: pd.DataFrame, path: Path) -> None:
    """Refuse a table in which one judgment appears twice (it would be counted twice)."""
    keys = [c for c in IDENTITY if c in frame]
    if not keys or "dimension" not in keys:
        return
    twice = frame.duplicated(subset=keys, keep="first").to_numpy()
    if twice.any():
        at = int(np.flatnonzero(twice)[0])
        raise ResultsError(f"{_where(path, frame, at)}: a duplicated row ({int(twice.sum())} in all): the same "
                           "judgment appears twice; remove the copies")  # fmt: skip
