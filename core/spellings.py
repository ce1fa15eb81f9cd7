"""How the results table spells a true/false cell and an unperturbed row: read by the analysis (which parses a
CSV's text) and by the viewer's SQL alike, from this one light module (the viewer starts without the analysis's
statistics libraries)."""

from __future__ import annotations

# a true/false cell's text, in any case once trimmed ("False" must not read as true by truthiness)
TRUE_TEXT, FALSE_TEXT = frozenset({"true", "1", "1.0", "yes"}), frozenset({"false", "0", "0.0", "no"})
ORIGINAL = "none"  # the perturbation of an unperturbed row (experiment=robustness)

# the cell texts pandas reads as missing by default: a file read with keep_default_na=False (ids are text, so a
# candidate or annotator "NA" stays "NA") uses them for its number and flag columns only
MISSING_TEXT: tuple[str, ...] = (
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
)
MISSING_LOWER: frozenset[str] = frozenset(m.lower() for m in MISSING_TEXT)  # as compared, any case

# a cell text that is a plain number (core.cells.csv_safe leaves it unescaped)
NUMBER_PATTERN = r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"

# DuckDB: `csv_safe` undone on a text cell (the viewer reads results.csv as text); the same rule as
# `csv_unescape`: a leading quote is dropped when the rest is not a number and would run as a formula
CSV_TEXT_MACRO = (
    "CREATE OR REPLACE MACRO csv_text(v) AS CASE WHEN starts_with(v, '''') "
    "AND regexp_matches(ltrim(substr(v, 2), ''''), '^[=+\\-@\\t\\r]') "
    f"AND NOT regexp_full_match(substr(v, 2), '{NUMBER_PATTERN}') THEN substr(v, 2) ELSE v END"
)
