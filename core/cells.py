"""Text cells made safe for the files people open: CSVs (spreadsheets) and Markdown tables.

Names and texts come from configs, datasets and model output (judge, generator, dimension names, candidate
texts), so a cell can start a spreadsheet formula or break a Markdown table. No library the project uses
does either: pandas' `to_csv` writes cells as they are and tabulate (`to_markdown`) escapes nothing.
"""

from __future__ import annotations

import csv
import html
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from core.spellings import NUMBER_PATTERN

#: OWASP "CSV injection": a cell starting with one of these is run as a formula by spreadsheet programs.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_CELL = r"'*[=+\-@\t\r]"  # a text that `_csv_cell` may quote: FORMULA_START after any quotes
_NUMBER = re.compile(NUMBER_PATTERN)


def _csv_cell(value: object) -> object:
    """A quote before text a spreadsheet would run (and before already-quoted such text, so that
    `csv_unescape` can tell the quote it added from one the text had)."""
    if not isinstance(value, str) or _NUMBER.fullmatch(value):
        return value
    return "'" + value if value.lstrip("'").startswith(FORMULA_START) else value


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` for `to_csv`: every text cell (and header) that a spreadsheet would run as a formula gets a
    leading single quote (OWASP); numbers, negative ones and their text (``-3``) included, stay as they are."""
    out = frame.rename(columns=lambda c: _csv_cell(c) if isinstance(c, str) else c)
    text = [
        c
        for c, dtype in out.dtypes.items()
        if not pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)
    ]
    out = out.copy()
    for col in text:
        out[col] = _csv_column(out[col])
    return out


def _csv_column(values: pd.Series) -> pd.Series:
    """`values.astype(object).map(_csv_cell)`, deciding once per distinct value: a results table repeats its
    judge, dimension, answer and candidate texts on many rows, and a per-cell Python call cost a replay of the
    RQ-Bench-sized study ~20% of its time. Only string cells can change, and a string equals only itself, so
    a cell is replaced by its distinct value's quoted form exactly where `map` would replace it."""
    if isinstance(values.dtype, pd.StringDtype) and values.dtype.na_value is np.nan and values.notna().any():
        # Arrow finds the few cells that could change (`map` would give the same `str` column back)
        risky = np.flatnonzero(values.str.match(_FORMULA_CELL).fillna(False).to_numpy(dtype=bool))
        texts = values.iloc[risky]
        safe = [_csv_cell(v) for v in texts]
        moved = [i for i, (old, new) in enumerate(zip(texts, safe, strict=True)) if new is not old]
        out = values.copy()
        if moved:
            out.iloc[risky[moved]] = [safe[i] for i in moved]
        return out
    cells = values.astype(object)
    try:
        codes, uniques = pd.factorize(cells, use_na_sentinel=True)
    except TypeError:  # an unhashable cell (a list): cell by cell
        return cells.map(_csv_cell)
    changed = np.fromiter((_csv_cell(u) is not u for u in uniques), dtype=bool, count=len(uniques))
    array = cells.to_numpy(dtype=object, copy=True)
    if changed.any():
        quoted = np.array(
            [_csv_cell(u) if c else u for u, c in zip(uniques, changed, strict=True)], dtype=object
        )
        where = np.flatnonzero(changed[codes] & (codes >= 0))
        array[where] = quoted[codes[where]]
    return pd.Series(array, index=values.index, name=values.name).infer_objects()  # the dtype `map` infers


def write_csv(frame: pd.DataFrame, path: str | Path, arrow: bool = False) -> None:
    """`frame` as a CSV a person may open in a spreadsheet: `csv_safe` cells, and every text cell quoted, so
    that a carriage return inside a text (which pandas leaves unquoted) cannot start a row of its own.

    The one CSV writer of the project (tests/test_csv_writer.py fails on any other `to_csv` or csv writer in
    the packages). `arrow`: Arrow's writer (~10x pandas', every string quoted too), for results.csv."""
    if arrow:
        pa_csv.write_csv(pa.Table.from_pandas(csv_safe(frame), preserve_index=False), str(path))
        return
    csv_safe(frame).to_csv(path, index=False, quoting=csv.QUOTE_NONNUMERIC)


def csv_unescape(values: pd.Series) -> pd.Series:
    """The text `csv_safe` was given back from the text it wrote (the quote it added removed), for files
    that are read back (the annotation sheet)."""
    text = values.astype(str)
    quoted = text.str.startswith("'")
    if not quoted.any():  # nothing escaped (most columns): no per-cell check
        return text
    added = quoted & text.str[1:].map(lambda v: _csv_cell(v) != v)
    return text.where(~added, text.str[1:])


def unescape_text(frame: pd.DataFrame) -> pd.DataFrame:
    """A CSV read back (pandas) with every text cell as `csv_safe` was given it; numbers and missing values
    untouched. For results.csv and the human labels, which are read back as data (the analysis reads them)."""
    out = frame.copy()
    for col in out.columns:
        if pd.api.types.is_object_dtype(out[col]) or pd.api.types.is_string_dtype(out[col]):
            values = out[col]
            text = values.map(lambda v: isinstance(v, str)).astype(bool)
            if text.any():
                out.loc[text, col] = csv_unescape(values[text]).to_numpy()
    return out


def md_cell(value: object) -> str:
    """A Markdown table cell that shows `value` as text: HTML-special characters as entities (no raw
    HTML), backslashes and backticks as entities (no escapes or code spans), `|` escaped, line breaks as
    ``<br>`` (a cell is one line), brackets, ``*``, ``~`` and a word-edge ``_`` escaped (no links,
    images or emphasis)."""
    text = html.escape(str(value), quote=False).replace("\\", "&#92;").replace("`", "&#96;")
    text = re.sub(r"([|\[\]*~])", r"\\\1", text)
    text = re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", text)  # `_x_`, `__x__`; never `broad_gen`
    return re.sub(r"\r\n|\r|\n", "<br>", text)
