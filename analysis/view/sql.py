"""The viewer's SQL: the typed view over a study's results files and the statements building its tables.

analysis.view.data's `Study` runs these on its DuckDB connection; kept apart so the queries (what a number in
the viewer means) read in one place, away from the connection, threading and paging around them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from core.schema import view_types
from core.spellings import CSV_TEXT_MACRO, FALSE_TEXT, MISSING_LOWER, ORIGINAL, TRUE_TEXT

TRUE_SQL, FALSE_SQL = (
    ", ".join(f"'{t}'" for t in sorted(spellings)) for spellings in (TRUE_TEXT, FALSE_TEXT)
)
MISSING_SQL = ", ".join(sorted("'" + m.replace("'", "''") + "'" for m in MISSING_LOWER))
# A row is unperturbed when its perturbation is analysis.robustness's baseline (`none`) or empty (a run without
# robustness settings); a perturbed row measures robustness, so it is counted apart and kept out of the
# item's mean, spread and preference counts (pooled, a candidate scored 3 unperturbed and 1 padded showed 2).
# A score counts when its answer parsed (parse_ok not false), as analysis.stats.scores.usable_mask reads it: an
# unparsed answer's score (2 parsed, 4 unparsed) made the viewer's mean 3.0 where the analysis has 2.0.
USABLE = "CASE WHEN coalesce(parse_ok, true) THEN score END"
PERTURBED_SQL = f"coalesce(nullif(trim(perturbation), ''), '{ORIGINAL}') <> '{ORIGINAL}'"
# Views (computed when read, never at open): one row per item × dimension over its unperturbed rows (mean over samples, spread
# across the samples of one prompt: the largest over its prompts, so a candidate shown in two prompts is not
# read as an unstable judge; a pairwise item's verdicts counted, "a 3 / b 1", as the item page lists each;
# `perturbed`: how many perturbed rows it has) and one per item (largest spread over its dimensions). An item
# judged under perturbations only is listed with no score.
OPEN_SQL = (
    f"""CREATE VIEW base AS WITH per_prompt AS (
         SELECT instance_id, candidate_id, judge, mode, rubric, dimension, prompt_id, perturbation, preference,
           {PERTURBED_SQL} AS perturbed, any_value(source) AS source, sum({USABLE}) AS total,
           count({USABLE}) AS n, max({USABLE}) - min({USABLE}) AS spread,
           bool_and(coalesce(parse_ok, true)) AS parsed,
           count(*) AS verdicts
         FROM results GROUP BY ALL),
       per_verdict AS (
         SELECT instance_id, candidate_id, judge, mode, rubric, dimension, any_value(source) AS source,
           sum(total) FILTER (NOT perturbed) AS total, sum(n) FILTER (NOT perturbed) AS n,
           max(spread) FILTER (NOT perturbed) AS spread, bool_and(parsed) FILTER (NOT perturbed) AS parsed,
           preference || ' ' || sum(verdicts) FILTER (NOT perturbed) AS verdicts,
           coalesce(sum(verdicts) FILTER (perturbed), 0) AS perturbed
         FROM per_prompt GROUP BY instance_id, candidate_id, judge, mode, rubric, dimension, preference)
       SELECT instance_id, candidate_id, judge, mode, rubric, dimension, any_value(source) AS source,
         sum(total) / nullif(sum(n), 0) AS score, max(spread) AS spread, bool_and(parsed) AS parsed,
         string_agg(verdicts, ' / ' ORDER BY verdicts) AS preference, CAST(sum(perturbed) AS INTEGER) AS perturbed
       FROM per_verdict GROUP BY instance_id, candidate_id, judge, mode, rubric, dimension""",
    """CREATE VIEW base_items AS SELECT instance_id, candidate_id, judge, mode, rubric,
         any_value(source) AS source, max(spread) AS spread, bool_and(parsed) AS parsed,
         CAST(sum(perturbed) AS INTEGER) AS perturbed
       FROM base GROUP BY ALL""",
)
# a study opened without human labels: analysis.stats.humans.consensus_scores's empty table, typed alike, without
# importing the statistics libraries to make it
NO_HUMANS_SQL = (
    "CREATE TABLE human_means (instance_id VARCHAR, candidate_id VARCHAR, dimension VARCHAR, human DOUBLE, "
    "n_annotators BIGINT)"
)
# The other disagreements of each item × dimension: range over judges (same candidate, mode and dimension),
# range over the independent and comparative modes only (same judge; comparative_all, pairwise and other modes
# are kept out of that window, as in analysis.stats.illusion's shift), distance to the human consensus (the
# annotators' mean, analysis.stats.humans.consensus_scores). Every window
# partition holds one instance and one dimension, so the query may be limited to some instances or one
# dimension and stays exact. With nothing to compare (one judge, or one of the two modes, has a score) the
# range is NULL (unknown, sorted last), not 0 (perfect agreement).
DISAGREEMENT_SQL = """SELECT base.*,
  CASE WHEN min(judge) FILTER (score IS NOT NULL) OVER by_judges
            <> max(judge) FILTER (score IS NOT NULL) OVER by_judges
       THEN max(score) OVER by_judges - min(score) OVER by_judges END AS judge_judge,
  CASE WHEN mode IN ('independent', 'comparative') AND min(mode) FILTER (score IS NOT NULL) OVER by_modes
            <> max(mode) FILTER (score IS NOT NULL) OVER by_modes
       THEN max(score) OVER by_modes - min(score) OVER by_modes END AS mode_shift,
  abs(score - h.human) AS judge_human, h.human AS human
FROM base LEFT JOIN human_means h USING (instance_id, candidate_id, dimension) {where}
WINDOW by_judges AS (PARTITION BY instance_id, candidate_id, mode, dimension),
       by_modes AS (PARTITION BY instance_id, candidate_id, judge, rubric, dimension,
                    mode IN ('independent', 'comparative'))"""
ITEM_SQL = """SELECT instance_id, candidate_id, judge, mode, rubric, any_value(source) AS source,
  max(spread) AS spread, max(judge_judge) AS judge_judge, max(judge_human) AS judge_human,
  max(mode_shift) AS mode_shift, bool_and(parsed) AS parsed, CAST(sum(perturbed) AS INTEGER) AS perturbed,
  string_agg(dimension || ' ' || coalesce(CAST(round(score, 2) AS VARCHAR), preference, '–'), ' · '
             ORDER BY dimension) AS scores,
  {largest},
  string_agg(dimension || ' ' || CAST(round(human, 2) AS VARCHAR), ' · ' ORDER BY dimension)
    FILTER (human IS NOT NULL) AS experts
FROM ({dims}) GROUP BY ALL"""
# the dimension a figure is largest on; on a tie the first dimension by name (arg_max's pick among equal
# values followed the rows' order, so the sidecar's table and the one built in memory named different ones)
_LARGEST = ", ".join(
    f"arg_min(dimension, CASE WHEN {c} IS NOT NULL THEN {{{{'v': -{c}, 'd': dimension}}}} END) AS {c}_dim"
    for c in ("spread", "judge_judge", "judge_human", "mode_shift")
)
ITEM_SQL = ITEM_SQL.replace("{largest}", _LARGEST)
# What sorting the whole list needs, built on a background thread (analysis.view.data.Study) and kept beside
# the study (its sidecar index) for the next open: every item × dimension's disagreements, then every item's.
BUILD_SQL = (
    f"CREATE TABLE item_dim AS {DISAGREEMENT_SQL.format(where='')}",
    f"CREATE TABLE items AS {ITEM_SQL.format(dims='SELECT * FROM item_dim')}",
)
# each disagreement of the list comes with the dimension it was largest on (`<figure>_dim`), and `experts` is
# the human consensus per dimension of the item's candidate
DISAGREEMENTS = ("judge_judge", "judge_human", "mode_shift")
# DuckDB reads CSV lines up to 2 MB by default: one judge's long raw answer in results.csv (5 MB) stopped the
# viewer from opening the study; a line past this larger limit is named with its file and the limit
MAX_CSV_LINE = 256 * 2**20
_LINE_TOO_LONG = re.compile(r"Maximum line size of (\d+) bytes exceeded\. Actual Size:\s*(\d+)")
_ERROR_FILE = re.compile(r"^\s*file = (.+)$", re.MULTILINE)


def error_line(exc: duckdb.Error) -> str:
    """A DuckDB error as one line: a CSV line over the limit named with its file, its size and the limit;
    otherwise the error's first line, with the file when DuckDB names one."""
    text = str(exc)
    where = _ERROR_FILE.search(text)
    too_long = _LINE_TOO_LONG.search(text)
    if too_long:
        limit, size = (int(g) for g in too_long.groups())
        file = where.group(1).strip() if where else "a results.csv"
        return f"{file}: a line of {size:,} bytes, over the viewer's limit of {limit:,} bytes (DuckDB max_line_size)"
    first = text.splitlines()[0] if text else type(exc).__name__
    return f"{where.group(1).strip()}: {first}" if where else first


def scan(paths: Sequence[Path], reader: str, options: str = "") -> str:
    """A SELECT over files of one reader, their columns matched by name (a column some lack: NULL)."""
    files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"SELECT * FROM {reader}([{files}], union_by_name = true{options})"


def results_sql(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> str:
    """One SELECT over every results file with the viewer's columns, typed, NULL where a file lacks one.

    A value that cannot take its column's type (sample_idx "x1", position 1e30) is a ValueError naming the
    file, the column and the value: cast lazily, it failed each page that read the column (an HTTP 500)."""
    con.execute(CSV_TEXT_MACRO)  # results.csv's text cells as the run had them (cells.csv_safe undone)
    union = _union(paths)
    present = {row[0]: row[1] for row in con.execute(f"DESCRIBE {union}").fetchall()}
    columns = view_types()  # column -> DuckDB type, from the results schema; a column a file lacks is NULL
    problem = _untyped_value(con, paths, present, columns)
    if problem:
        raise ValueError(problem)
    cols = [
        f'{typed(c, present[c], t)} AS "{c}"' if c in present else f'CAST(NULL AS {t}) AS "{c}"'
        for c, t in columns.items()
    ]
    return f"SELECT {', '.join(cols)} FROM ({union})"


def _union(paths: Sequence[Path], options: str = "") -> str:
    """Every results file in one SELECT (columns matched by name); `options` for both readers."""
    parts = [p for p in paths if p.suffix == ".parquet"], [p for p in paths if p.suffix != ".parquet"]
    scans = [scan(parts[0], "read_parquet", options)] if parts[0] else []
    # a CSV as text (every column is cast below): typed by sniffing, an id 2.10 read as 2.1 and 1e3 as 1000.0
    if parts[1]:
        text = scan(parts[1], "read_csv", f", all_varchar = true, max_line_size = {MAX_CSV_LINE}{options}")
        scans.append(f"SELECT csv_text(COLUMNS(*)) FROM ({text})")
    return " UNION ALL BY NAME ".join(scans)


def _untyped_value(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Path], present: dict[str, str], columns: dict[str, str]
) -> str | None:
    """The first value of a results file that its column's type cannot hold, as one line; None if all fit."""
    checked = [(c, t) for c, t in columns.items() if c in present and present[c] != t]
    if not checked:
        return None
    preds = [_unfit(c, present[c], t) for c, t in checked]
    values = ", ".join(f'CAST("{c}" AS VARCHAR)' for c, _ in checked)
    files = _union(paths, ", filename = true")
    sql = f"SELECT filename, {values}, {', '.join(preds)} FROM ({files}) WHERE {' OR '.join(preds)} LIMIT 1"
    found = con.execute(sql).fetchone()
    if found is None:
        return None
    n = len(checked)
    column, wanted = next(ct for ct, bad in zip(checked, found[1 + n :], strict=True) if bad)
    value = found[1 + [c for c, _ in checked].index(column)]
    kind = {"BIGINT": "an integer", "DOUBLE": "a number", "BOOLEAN": "true or false"}.get(wanted, wanted)
    return f"{found[0]}: {column} {str(value)[:40]!r} is not {kind}"


def _unfit(column: str, found: str, wanted: str) -> str:
    """SQL: true where the column holds a value (not missing) that `typed` cannot cast to `wanted`."""
    value = f'"{column}"'
    nan = f"coalesce(isnan(TRY_CAST({value} AS DOUBLE)), false)" if wanted == "DOUBLE" else "false"
    return (
        f"({value} IS NOT NULL AND {typed(column, found, wanted, cast='TRY_CAST')} IS NULL AND NOT {nan} "
        f"AND lower(trim(CAST({value} AS VARCHAR))) NOT IN ({MISSING_SQL}))"
    )


def typed(column: str, found: str, wanted: str, cast: str = "CAST") -> str:
    """The column as `wanted`, read as the analysis reads it: a number or flag held as text is missing when
    spelled as pandas spells missing (NA, nan, None, ..., any case, spaces around; analysis.load.checks) and a
    NaN is missing (NULL): NaN was counted as a score and made the item's mean and ranges NaN. `cast`
    TRY_CAST: NULL for a value the type cannot hold (how `results_sql` finds one to refuse)."""
    value = f'"{column}"'
    if found == "VARCHAR" and wanted == "BOOLEAN":  # the spellings analysis.load.checks.check_flags accepts
        text = f"lower(trim({value}))"
        return (
            f"CASE WHEN {text} IN ({MISSING_SQL}) THEN NULL WHEN {text} IN ({TRUE_SQL}) THEN true "
            f"WHEN {text} IN ({FALSE_SQL}) THEN false ELSE {cast}({value} AS BOOLEAN) END"
        )
    if found == "VARCHAR" and wanted != "VARCHAR":
        value = f"CASE WHEN lower(trim({value})) IN ({MISSING_SQL}) THEN NULL ELSE {value} END"
    value = f"{cast}({value} AS {wanted})"
    if wanted != "DOUBLE":
        return value
    # isnan of a one-element list: DuckDB (2.0) takes a parquet column's min/max, which leave NaN out, as proof
    # that it holds no NaN (even as a constant when min = max) and folds isnan(x), x = 'NaN' to false
    return f"CASE WHEN isnan(list_value({value})[1]) THEN NULL ELSE {value} END"
