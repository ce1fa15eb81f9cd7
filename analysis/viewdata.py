"""The study viewer's queries: DuckDB over the runs' parquet / CSV files, never the whole table in memory.

Opening a study builds two tables: `item_dim`, one row per judged item and dimension (instance × candidate
× judge × mode × rubric × dimension: mean score over samples and the disagreement measures), and `items`,
one row per item (the largest disagreement over its dimensions). A list page is one filtered, sorted
LIMIT/OFFSET query on one of them; an item page reads only its own rows (filter push-down on the parquet
files).
"""

from __future__ import annotations

import atexit
import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pandas as pd

from analysis.collect import find_results
from analysis.humans import check_humans, first_duplicate
from analysis.robustness import ORIGINAL
from analysis.validate import MISSING_TEXT

# column -> DuckDB type; a column a results file lacks reads as NULL
COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR", "judge": "VARCHAR", "mode": "VARCHAR", "rubric": "VARCHAR", "prompt_id": "VARCHAR",
    "instance_id": "VARCHAR", "candidate_id": "VARCHAR", "source": "VARCHAR", "other_id": "VARCHAR",
    "order": "VARCHAR", "dimension": "VARCHAR", "sample_idx": "INTEGER", "position": "INTEGER",
    "label": "VARCHAR", "score": "DOUBLE", "preference": "VARCHAR", "parse_ok": "BOOLEAN", "error": "VARCHAR",
    "raw": "VARCHAR", "finish_reason": "VARCHAR", "cost_usd": "DOUBLE", "latency_s": "DOUBLE",
    "candidate_text": "VARCHAR", "perturbation": "VARCHAR",
}  # fmt: skip
MISSING_SQL = ", ".join(sorted({"'" + m.lower().replace("'", "''") + "'" for m in MISSING_TEXT}))
FILTERS: tuple[str, ...] = ("judge", "mode", "rubric", "dimension", "source", "instance_id")
SORTS: dict[str, str] = {
    "judge_judge": "judge–judge", "judge_human": "judge–human", "spread": "spread across samples",
    "mode_shift": "independent vs comparative (comparative_all not counted)", "item": "instance, candidate",
}  # fmt: skip
ITEM = ("instance_id", "candidate_id", "judge", "mode", "rubric")
PAGE_SIZE = 50

# A row is unperturbed when its perturbation is analysis.robustness's baseline (`none`) or empty (a run without
# robustness settings); a perturbed row measures robustness, so it is counted apart and kept out of the
# item's mean, spread and preference counts (pooled, a candidate scored 3 unperturbed and 1 padded showed 2).
PERTURBED_SQL = f"coalesce(nullif(trim(perturbation), ''), '{ORIGINAL}') <> '{ORIGINAL}'"
# Built when a study opens: one row per item × dimension over its unperturbed rows (mean over samples, spread
# across the samples of one prompt: the largest over its prompts, so a candidate shown in two prompts is not
# read as an unstable judge; a pairwise item's verdicts counted, "a 3 / b 1", as the item page lists each;
# `perturbed`: how many perturbed rows it has) and one per item (largest spread over its dimensions). An item
# judged under perturbations only is listed with no score.
OPEN_SQL = (
    f"""CREATE TABLE base AS WITH per_prompt AS (
         SELECT instance_id, candidate_id, judge, mode, rubric, dimension, prompt_id, perturbation, preference,
           {PERTURBED_SQL} AS perturbed, any_value(source) AS source, sum(score) AS total,
           count(score) AS n, max(score) - min(score) AS spread, bool_and(coalesce(parse_ok, true)) AS parsed,
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
    """CREATE TABLE base_items AS SELECT instance_id, candidate_id, judge, mode, rubric,
         any_value(source) AS source, max(spread) AS spread, bool_and(parsed) AS parsed,
         CAST(sum(perturbed) AS INTEGER) AS perturbed
       FROM base GROUP BY ALL""",
)
# The other disagreements of each item × dimension: range over judges (same candidate, mode and dimension),
# range over the independent and comparative modes only (same judge; comparative_all, pairwise and other modes
# are kept out of that window, as in analysis.illusion's shift), distance to the human mean. Every window
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
  abs(score - h.human) AS judge_human
FROM base LEFT JOIN human_means h USING (instance_id, candidate_id, dimension) {where}
WINDOW by_judges AS (PARTITION BY instance_id, candidate_id, mode, dimension),
       by_modes AS (PARTITION BY instance_id, candidate_id, judge, rubric, dimension,
                    mode IN ('independent', 'comparative'))"""
ITEM_SQL = """SELECT instance_id, candidate_id, judge, mode, rubric, any_value(source) AS source,
  max(spread) AS spread, max(judge_judge) AS judge_judge, max(judge_human) AS judge_human,
  max(mode_shift) AS mode_shift, bool_and(parsed) AS parsed, CAST(sum(perturbed) AS INTEGER) AS perturbed,
  string_agg(dimension || ' ' || coalesce(CAST(round(score, 2) AS VARCHAR), preference, '–'), ' · '
             ORDER BY dimension) AS scores
FROM ({dims}) GROUP BY ALL"""
DISAGREEMENTS = ("judge_judge", "judge_human", "mode_shift")


class ViewError(Exception):
    """A study folder or file the viewer cannot read (one line for the user)."""


def _scan(paths: Sequence[Path], reader: str, options: str = "") -> str:
    files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    return f"SELECT * FROM {reader}([{files}], union_by_name = true{options})"


def _results_sql(con: duckdb.DuckDBPyConnection, paths: Sequence[Path]) -> str:
    """One SELECT over every results file with the viewer's columns, typed, NULL where a file lacks one."""
    parts = [p for p in paths if p.suffix == ".parquet"], [p for p in paths if p.suffix != ".parquet"]
    scans = [_scan(parts[0], "read_parquet")] if parts[0] else []
    # a CSV as text (every column is cast below): typed by sniffing, an id 2.10 read as 2.1 and 1e3 as 1000.0
    scans += [_scan(parts[1], "read_csv", ", all_varchar = true")] if parts[1] else []
    union = " UNION ALL BY NAME ".join(scans)
    present = {row[0]: row[1] for row in con.execute(f"DESCRIBE {union}").fetchall()}
    cols = [f'{_typed(c, present[c], t)} AS "{c}"' if c in present else f'CAST(NULL AS {t}) AS "{c}"'
            for c, t in COLUMNS.items()]  # fmt: skip
    return f"SELECT {', '.join(cols)} FROM ({union})"


def _typed(column: str, found: str, wanted: str) -> str:
    """The column as `wanted`, read as the analysis reads it: a number or flag held as text is missing when
    spelled as pandas spells missing (NA, nan, None, ..., any case, spaces around; analysis.validate) and a
    NaN is missing (NULL): NaN was counted as a score and made the item's mean and ranges NaN."""
    value = f'"{column}"'
    if found == "VARCHAR" and wanted != "VARCHAR":
        value = f"CASE WHEN lower(trim({value})) IN ({MISSING_SQL}) THEN NULL ELSE {value} END"
    value = f"CAST({value} AS {wanted})"
    if wanted != "DOUBLE":
        return value
    # isnan of a one-element list: DuckDB (2.0) takes a parquet column's min/max, which leave NaN out, as proof
    # that it holds no NaN (even as a constant when min = max) and folds isnan(x), x = 'NaN' to false
    return f"CASE WHEN isnan(list_value({value})[1]) THEN NULL ELSE {value} END"


def _human_means(humans: pd.DataFrame | None) -> pd.DataFrame:
    if humans is None or humans.empty:
        return pd.DataFrame({"instance_id": pd.Series(dtype=str), "candidate_id": pd.Series(dtype=str),
                             "dimension": pd.Series(dtype=str), "human": pd.Series(dtype=float)})  # fmt: skip
    keys = ["instance_id", "candidate_id", "dimension"]
    return humans.groupby(keys, as_index=False)["score"].mean().rename(columns={"score": "human"})


@dataclass
class Page:
    """One page of the item list."""

    rows: list[dict[str, Any]]
    total: int
    offset: int


_OPEN: weakref.WeakSet[Study] = weakref.WeakSet()  # studies not closed yet: closed at interpreter exit


@atexit.register
def _close_open_studies() -> None:
    """Exiting while DuckDB runs on a study's background thread aborts the process (SIGABRT), so every study
    still open is closed (its build interrupted and joined) before the interpreter finalizes."""
    for study in list(_OPEN):
        study.close()


class Study:
    """A run or multirun folder opened for viewing (one in-memory DuckDB connection). `close()` (or a `with`
    block) interrupts and joins the background build and closes the connection; a study left open is closed
    at interpreter exit."""

    def __init__(self, root: str | Path, humans: pd.DataFrame | None = None) -> None:
        paths = find_results(root)
        if not paths:
            raise ViewError(f"{root}: no results.parquet or results.csv below this folder")
        self.root = Path(root)
        self.con = duckdb.connect()
        self.con.execute("SET preserve_insertion_order = false")  # tables are built faster; pages ORDER BY
        self.humans = check_humans(humans) if humans is not None else None
        repeated = first_duplicate(self.humans) if self.humans is not None else None
        if repeated:
            raise ViewError(f"human labels: row {repeated[0] + 1} is a duplicate label ({repeated[2]}) of row "
                            f"{repeated[1] + 1}; keep one label per annotator, item and dimension")  # fmt: skip
        try:
            self.con.execute(f"CREATE VIEW results AS {_results_sql(self.con, paths)}")
            self.con.register("human_means_frame", _human_means(self.humans))  # seen by this cursor only
            self.con.execute("CREATE TABLE human_means AS SELECT * FROM human_means_frame")
            for sql in OPEN_SQL:
                self.con.execute(sql)
        except duckdb.Error as exc:
            raise ViewError(f"{root}: a results file could not be read: {str(exc).splitlines()[0]}") from None
        prompts = sorted(Path(root).rglob("prompts.parquet")) if Path(root).is_dir() else []
        self.has_prompts = bool(prompts)
        if prompts:
            self.con.execute(f"CREATE VIEW prompts AS {_scan(prompts, 'read_parquet')}")
        # sorting the whole list by a disagreement needs it for every item: built in the background once the
        # first page is out (so it does not slow that page down), or at once when a sort needs it
        self._build_error: str | None = None
        self._build_cursor = self.con.cursor()
        self._builder = threading.Thread(target=self._build_disagreements, daemon=True)
        self._start_lock = threading.Lock()
        self._closed = False
        _OPEN.add(self)

    def __enter__(self) -> Study:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.close()

    def close(self) -> None:
        """Stop the background build (interrupted, then joined) and close the connection; later calls do
        nothing. The thread is a daemon so that Ctrl-C never waits for a build, hence the explicit join."""
        with self._start_lock:
            if self._closed:
                return
            self._closed = True  # start_build no longer starts the thread
        while self._builder.is_alive():
            self._build_cursor.interrupt()  # retried: an interrupt between two statements is lost
            self._builder.join(0.05)
        self._build_cursor.close()
        self.con.close()
        _OPEN.discard(self)

    def start_build(self) -> None:
        """Start building every item's disagreements (once, and never after close; later calls do nothing)."""
        with self._start_lock:
            if self._builder.ident is None and not self._closed:
                self._builder.start()

    def _build_disagreements(self) -> None:
        statements = (f"CREATE TABLE item_dim AS {DISAGREEMENT_SQL.format(where='')}",
                      f"CREATE TABLE items AS {ITEM_SQL.format(dims='SELECT * FROM item_dim')}")  # fmt: skip
        try:
            for sql in statements:
                if self._closed:
                    return
                self._build_cursor.execute(sql)
        except duckdb.Error as exc:
            self._build_error = str(exc).splitlines()[0]

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for each query: the web server answers requests on several threads, and one
        DuckDB connection must not be used by two threads at once."""
        return self.con.cursor()

    def wait(self) -> None:
        """Block until every item's disagreements are built (sorting by them needs all)."""
        self.start_build()
        self._builder.join()
        if self._build_error:
            raise ViewError(f"{self.root}: the disagreement tables could not be built: {self._build_error}")

    def choices(self) -> dict[str, list[str]]:
        """Distinct values of every filter column (for the filter menus)."""
        out = {}
        for col in FILTERS:
            rows = self._cursor().execute(f'SELECT DISTINCT "{col}" FROM base WHERE "{col}" IS NOT NULL '
                                    f'ORDER BY 1 LIMIT 5000').fetchall()  # fmt: skip
            out[col] = [str(r[0]) for r in rows]
        return out

    def _where(self, filters: Mapping[str, str]) -> tuple[str, list[Any]]:
        used = [(c, filters[c]) for c in FILTERS if filters.get(c)]
        sql = " AND ".join(f'"{c}" = ?' for c, _ in used)
        return ("WHERE " + sql if sql else ""), [v for _, v in used]

    def page(self, filters: Mapping[str, str], sort: str = "item", offset: int = 0,
             size: int = PAGE_SIZE) -> Page:  # fmt: skip
        """One page of items (instance × candidate × judge × mode × rubric) sorted by one of SORTS, largest
        disagreement first; without a dimension filter an item's disagreement is its largest over dimensions."""
        where, params = self._where(filters)
        keys = ", ".join(ITEM)
        order = keys if sort not in SORTS or sort == "item" else f"{sort} DESC NULLS LAST, {keys}"
        if sort in DISAGREEMENTS:
            self.wait()
            table = "item_dim" if filters.get("dimension") else "items"
        else:
            table = "base" if filters.get("dimension") else "base_items"
        sql = (
            f"SELECT {keys}, count(*) OVER () AS total FROM {table} {where} ORDER BY {order} LIMIT ? OFFSET ?"
        )
        frame = self._cursor().execute(sql, [*params, size, offset]).fetchdf()
        total = int(frame["total"].iloc[0]) if len(frame) else self._count(table, where, params)
        frame = frame.drop(columns="total").merge(self._details(frame, filters.get("dimension")), how="left")
        self.start_build()
        return Page(frame.astype(object).where(frame.notna(), None).to_dict("records"), total, offset)

    def _details(self, page: pd.DataFrame, dimension: str | None) -> pd.DataFrame:
        """Scores ("dimension score · …") and disagreements of the items on one page, from their rows only."""
        instances = sorted(set(page["instance_id"]))
        if not instances:
            columns = [*ITEM, "source", "spread", *DISAGREEMENTS, "parsed", "perturbed", "scores"]
            return pd.DataFrame(columns=columns)
        where = f"WHERE instance_id IN ({', '.join('?' for _ in instances)})"
        where += " AND dimension = ?" if dimension else ""
        sql = ITEM_SQL.format(dims=DISAGREEMENT_SQL.format(where=where))
        return self._cursor().execute(sql, [*instances, *([dimension] if dimension else [])]).fetchdf()

    def _count(self, source: str, where: str, params: list[Any]) -> int:
        sql = f"SELECT count(*) FROM {source} {where}"
        return int(self._cursor().execute(sql, params).fetchone()[0])  # type: ignore[index]

    def item_rows(self, instance_id: str, candidate_id: str) -> pd.DataFrame:
        """Every results row of one candidate: all judges, modes, samples and dimensions."""
        sql = ("SELECT * FROM results WHERE instance_id = ? AND candidate_id = ? "
               "ORDER BY judge, rubric, mode, prompt_id, sample_idx, dimension")  # fmt: skip
        return self._cursor().execute(sql, [instance_id, candidate_id]).fetchdf()

    def human_rows(self, instance_id: str, candidate_id: str) -> pd.DataFrame:
        """The human labels of one candidate (empty without --humans)."""
        if self.humans is None:
            return pd.DataFrame(columns=["annotator", "dimension", "score"])
        h = self.humans
        return h.loc[(h["instance_id"] == instance_id) & (h["candidate_id"] == candidate_id)]

    def prompt_messages(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, str]]]:
        """The messages sent for each (run_id, prompt_id) (none for runs without prompts.parquet)."""
        if not self.has_prompts or not keys:
            return {}
        marks = " OR ".join("(run_id = ? AND prompt_id = ?)" for _ in keys)
        params = [v for key in keys for v in key]
        rows = self._cursor().execute(f"SELECT run_id, prompt_id, any_value(messages) FROM prompts WHERE {marks} "
                                "GROUP BY 1, 2", params).fetchall()  # fmt: skip
        return {(str(r), str(p)): json.loads(m) for r, p, m in rows}
