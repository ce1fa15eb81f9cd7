"""The study viewer's data: DuckDB over the runs' parquet / CSV files, never the whole table in memory (the SQL
itself is in analysis.view.sql).

Opening a study reads only the files' columns and types: the first page must not wait for the whole table.
Sorting the list needs two tables over every row, built on a background thread after the first page is out:
`item_dim`, one row per judged item and dimension (instance × candidate × judge × mode × rubric × dimension:
mean score over samples and the disagreement measures), and `items`, one row per item (the largest
disagreement over its dimensions). Until they are built a page asked in a disagreement order comes in
instance, candidate order, marked `pending` (never a partial order shown as the asked one). Once built they
are kept beside the study (`.judgescope-view/`, named by a fingerprint of the results files, the SQL and the
human labels), so the next open of an unchanged study sorts at once and a changed one is built again. A list
page is one filtered, sorted LIMIT/OFFSET query; an item page reads only its own rows (filter push-down on the
parquet files).

No pandas on the way to the first list page (issue 35: process start to first page < 2 s): a page's rows come
from DuckDB as tuples; pandas is imported for an item page, the static bundle and human labels only.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import duckdb

from analysis.load.files import find_results
from analysis.view.sql import (
    BUILD_SQL,
    DISAGREEMENT_SQL,
    ITEM_SQL,
    NO_HUMANS_SQL,
    OPEN_SQL,
    error_line,
    results_sql,
    scan,
)
from core.spellings import CSV_TEXT_MACRO

if TYPE_CHECKING:
    import pandas as pd

FILTERS: tuple[str, ...] = ("judge", "mode", "rubric", "dimension", "source", "instance_id")
SORTS: dict[str, str] = {
    "judge_judge": "judge–judge",
    "judge_human": "judge–human",
    "spread": "spread across samples",
    "mode_shift": "independent vs comparative (comparative_all not counted)",
    "item": "instance, candidate",
}
#: the list opens sorted by the range of the judges' scores on each item: where they disagree is the reason to
#: read an item
DEFAULT_SORT = "judge_judge"
ITEM = ("instance_id", "candidate_id", "judge", "mode", "rubric")
PAGE_SIZE = 50
#: the sidecar folder beside a study's results (a run or multirun folder) holding its built disagreement tables
INDEX_DIR = ".judgescope-view"
INDEX_TABLES = ("item_dim", "items")
INDEX_VERSION = 1  # raised when what the sidecar files hold changes without the SQL changing
#: the filters a page can answer from the results files' key columns alone, before the tables are built (a
#: `source` filter reads the item's source as the tables hold it)
KEY_FILTERS = frozenset(("judge", "mode", "rubric", "dimension", "instance_id"))
#: a study whose results files are smaller than this builds its tables before the first page (they are done by
#: then, so it opens sorted); a larger one's build starts once its first page is out, which it would slow down
#: (DuckDB's build takes every core: at 729,900 rows, 6 MB of parquet, it made the first page 0.3 -> 0.9 s)
SMALL_STUDY_BYTES = 4 * 2**20


#: a study file that a query (a page, or the background build) could not read: one line saying what to do
UNREADABLE = (
    "a file of this study could not be read now ({}); was it removed or changed since the viewer opened it? "
    "restart the viewer"
)


class ViewError(Exception):
    """A study folder or file the viewer cannot read (one line for the user)."""


@dataclass
class Page:
    """One page of the item list."""

    rows: list[dict[str, Any]]
    total: int
    offset: int
    #: the order asked for while it is still being built: the rows are then in instance, candidate order
    pending: str | None = None


_OPEN: weakref.WeakSet[Study] = weakref.WeakSet()  # studies not closed yet: closed at interpreter exit


@atexit.register
def _close_open_studies() -> None:
    """Exiting while DuckDB runs on a study's background thread aborts the process (SIGABRT), so every study
    still open is closed (its build interrupted and joined) before the interpreter finalizes."""
    for study in list(_OPEN):
        study.close()


def index_files(
    root: Path, paths: Sequence[Path], results: str, humans: pd.DataFrame | None
) -> dict[str, Path]:
    """Where the built tables of this study are kept: `.judgescope-view/<fingerprint>-<table>.parquet` beside
    the results, the fingerprint a hash of every results file's path, size, mtime, ctime and inode (ctime moves
    on any write, also one that sets the mtime back), the SQL that builds the tables, DuckDB's version and the
    human labels (and the macro the SQL calls to read results.csv cells). A changed study has another fingerprint,
    so its old tables are never read."""
    stats = []
    for path in paths:
        st = path.stat()
        stats.append([str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    labels = ""
    if humans is not None:  # pandas: only for a study opened with human labels
        import pandas as pd

        labels = hashlib.sha256(
            pd.util.hash_pandas_object(humans, index=False).to_numpy().tobytes()
        ).hexdigest()
        labels += ",".join(map(str, humans.columns))
    key = json.dumps(
        [INDEX_VERSION, duckdb.__version__, CSV_TEXT_MACRO, OPEN_SQL, BUILD_SQL, results, labels, stats]
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    folder = (root if root.is_dir() else root.parent) / INDEX_DIR
    return {table: folder / f"{digest}-{table}.parquet" for table in INDEX_TABLES}


# what the built tables hold, as SELECTs a sidecar's columns are checked against (DESCRIBE: bound, not run)
_INDEX_SELECT = {
    "item_dim": DISAGREEMENT_SQL.format(where=""),
    "items": ITEM_SQL.format(dims=DISAGREEMENT_SQL.format(where="")),
}


def _columns(con: duckdb.DuckDBPyConnection, select: str) -> list[tuple[str, str]]:
    return [(str(row[0]), str(row[1])) for row in con.execute(f"DESCRIBE {select}").fetchall()]


def _sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class Study:
    """A run or multirun folder opened for viewing (one in-memory DuckDB connection). `close()` (or a `with`
    block) interrupts and joins the background build and closes the connection; a study left open is closed
    at interpreter exit. `index`: read and keep the built tables beside the study (INDEX_DIR); without it
    nothing is written."""

    def __init__(self, root: str | Path, humans: pd.DataFrame | None = None, index: bool = True) -> None:
        paths = find_results(root)
        if not paths:
            raise ViewError(f"{root}: no results.parquet or results.csv below this folder")
        self.root = Path(root)
        self.con = duckdb.connect()
        self.con.execute("SET preserve_insertion_order = false")  # tables are built faster; pages ORDER BY
        self.humans = None
        consensus = None
        if humans is not None:  # the statistics libraries only for a study opened with human labels
            from analysis.stats.humans import check_humans, consensus_scores, first_duplicate

            self.humans = check_humans(humans)
            repeated = first_duplicate(self.humans)
            if repeated:
                raise ViewError(
                    f"human labels: row {repeated[0] + 1} is a duplicate label ({repeated[2]}) of row "
                    f"{repeated[1] + 1}; keep one label per annotator, item and dimension"
                )
            consensus = consensus_scores(self.humans)
        try:
            results = results_sql(self.con, paths)
            self.con.execute(f"CREATE VIEW results AS {results}")
            # the human consensus (analysis.stats.humans, as the report and the card read it); this cursor only
            if consensus is None:  # no labels: the empty table consensus_scores gives, typed alike
                self.con.execute(NO_HUMANS_SQL)
            else:
                self.con.register("human_means_frame", consensus)
                self.con.execute("CREATE TABLE human_means AS SELECT * FROM human_means_frame")
            for sql in OPEN_SQL:
                self.con.execute(sql)
        except duckdb.Error as exc:
            raise ViewError(f"{root}: a results file could not be read: {error_line(exc)}") from None
        except ValueError as exc:  # a value its column's type cannot hold (viewsql.results_sql), named
            raise ViewError(str(exc)) from None
        prompts = sorted(Path(root).rglob("prompts.parquet")) if Path(root).is_dir() else []
        self.has_prompts = bool(prompts)
        if prompts:
            self.con.execute(f"CREATE VIEW prompts AS {scan(prompts, 'read_parquet')}")
        # sorting the whole list by a disagreement needs it for every item: read from the sidecar kept by an
        # earlier open of the same files, else built in the background once the first page is out (so it does
        # not slow that page down), or at once when a page must wait for it
        self._build_error: str | None = None
        self._build_cursor = self.con.cursor()
        self._builder = threading.Thread(target=self._build_disagreements, daemon=True)
        self._start_lock = threading.Lock()
        self._closed = False
        self._built = False
        self.small = sum(path.stat().st_size for path in paths) < SMALL_STUDY_BYTES
        self.index = index_files(self.root, paths, results, consensus) if index else None
        self.from_index = self._open_index()
        _OPEN.add(self)

    def _open_index(self) -> bool:
        """The tables kept by an earlier open of these very files, if there are (views over the sidecar)."""
        if self.index is None:
            return False
        try:
            if not all(path.is_file() for path in self.index.values()):
                return False
        except OSError:  # a sidecar folder this user may not enter (another user's, umask 077): built here
            return False
        try:
            for table, path in self.index.items():
                self.con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_sql_path(path)})")
                # the columns and types the build makes (a damaged footer renamed a column: read as valid)
                if _columns(self.con, f"SELECT * FROM {table}") != _columns(self.con, _INDEX_SELECT[table]):
                    raise duckdb.InvalidInputException(f"{path}: not the columns the build makes")
        except duckdb.Error:  # unreadable (damaged, removed): built again, and kept anew
            for table in INDEX_TABLES:
                self.con.execute(f"DROP VIEW IF EXISTS {table}")
            return False
        for path in self.index.values():  # in use: another viewer's clean-up keeps what was read within a day
            try:
                os.utime(path)
            except OSError:  # a sidecar this user may read but not touch
                pass
        self._built = True
        return True

    @property
    def ready(self) -> bool:
        """Whether every item's disagreements are there (built or read from the sidecar): a sorted page needs
        them all."""
        return self._built

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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
        """Start building every item's disagreements (once, and never after close or when the sidecar had
        them; later calls do nothing)."""
        with self._start_lock:
            if self._builder.ident is None and not self._closed and not self._built:
                self._builder.start()

    def _before_build(self) -> None:
        """Nothing: the seam where a test's fake study makes the build slow, to see the pages meanwhile."""

    def _build_disagreements(self) -> None:
        try:
            self._before_build()
            for sql in BUILD_SQL:
                if self._closed:
                    return
                self._build_cursor.execute(sql)
        except duckdb.IOException as exc:  # a results file removed or changed since the study was opened
            self._build_error = f"{self.root}: {UNREADABLE.format(error_line(exc))}"
            return
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            self._build_error = f"{self.root}: the disagreement tables could not be built: {first}"
            return
        self._built = True
        self._keep_index()

    def _keep_index(self) -> None:
        """Write the built tables to the sidecar (each to a temporary name, then renamed: a reader never sees
        half a file) and remove the sidecars of earlier versions of the study not opened for a day (and the
        temporary files a killed viewer left). A folder that cannot be written keeps none: the next open builds
        again."""
        if self.index is None:
            return
        written: list[Path] = []
        try:
            folder = next(iter(self.index.values())).parent
            folder.mkdir(exist_ok=True)
            for table, path in self.index.items():
                temporary = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
                written.append(temporary)
                if self._closed:
                    raise OSError("closed")
                self._build_cursor.execute(f"COPY {table} TO {_sql_path(temporary)} (FORMAT parquet)")
                os.replace(temporary, path)
            # another viewer of the same folder (other files or labels) may still read its own: kept a day
            kept, stale = {path.name for path in self.index.values()}, time.time() - 86_400
            # a day unused (each open touches its files); a temporary file a killed viewer left, a day old
            for old in [*folder.glob("*.parquet"), *folder.glob("*.tmp")]:
                if old.name not in kept and old.stat().st_mtime < stale:
                    old.unlink(missing_ok=True)
        except (OSError, duckdb.Error):
            for temporary in written:
                temporary.unlink(missing_ok=True)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for each query: the web server answers requests on several threads, and one
        DuckDB connection must not be used by two threads at once."""
        return self.con.cursor()

    def _read(self, sql: str, params: Sequence[Any]) -> duckdb.DuckDBPyConnection:
        """`sql` run on the study's files as they are now: a file removed or changed since the viewer opened
        them is a ViewError (one line), not a page that fails with a traceback."""
        try:
            return self._cursor().execute(sql, list(params))
        except duckdb.Error as exc:
            first = error_line(exc)
            if self.from_index and self.index is not None:  # the saved tables may be the damaged file
                for path in self.index.values():
                    try:
                        path.unlink(missing_ok=True)
                    except OSError:
                        pass
                folder = next(iter(self.index.values())).parent
                raise ViewError(
                    f"{self.root}: a file of this study or the tables the viewer saved in {folder} could not be "
                    f"read now ({first}); the saved tables were removed: restart the viewer (it builds them again)"
                ) from None
            raise ViewError(f"{self.root}: {UNREADABLE.format(first)}") from None

    def wait(self) -> None:
        """Block until every item's disagreements are built (sorting by them needs all)."""
        if self._built:
            return
        self.start_build()
        if self._builder.ident is not None:
            self._builder.join()
        if self._build_error:
            raise ViewError(self._build_error)
        if not self._built:  # closed before the build ended
            raise ViewError(f"{self.root}: the viewer was closed before the disagreement tables were built")

    def choices(self) -> dict[str, list[str]]:
        """Distinct values of every filter column (for the filter menus)."""
        out = {}
        for col in FILTERS:
            rows = (
                self._cursor()
                .execute(
                    f'SELECT DISTINCT "{col}" FROM results WHERE "{col}" IS NOT NULL ORDER BY 1 LIMIT 5000'
                )
                .fetchall()
            )
            out[col] = [str(r[0]) for r in rows]
        return out

    def _where(self, filters: Mapping[str, str]) -> tuple[str, list[Any]]:
        used = [(c, filters[c]) for c in FILTERS if filters.get(c)]
        sql = " AND ".join(f'"{c}" = ?' for c, _ in used)
        return ("WHERE " + sql if sql else ""), [v for _, v in used]

    def page(
        self,
        filters: Mapping[str, str],
        sort: str = "item",
        offset: int = 0,
        size: int = PAGE_SIZE,
        wait: bool = True,
    ) -> Page:
        """One page of items (instance × candidate × judge × mode × rubric) sorted by one of SORTS, largest
        disagreement first; without a dimension filter an item's disagreement is its largest over dimensions.
        A sort needs every item's disagreements: `wait=False` does not wait for them while they are built, but
        gives the page in instance, candidate order with `pending` naming the sort asked for."""
        where, params = self._where(filters)
        keys = ", ".join(ITEM)
        used = {c for c in FILTERS if filters.get(c)}
        ranked = sort in SORTS and sort != "item"
        pending = None
        if not self._built and (ranked or not used <= KEY_FILTERS):
            ended = self._builder.ident is not None and not self._builder.is_alive()  # failed, or closed
            if wait or ended or not used <= KEY_FILTERS:
                self.wait()  # a failed build: its one line (a page never stays pending for ever)
            else:
                pending, ranked = sort, False
        order = f"{sort} DESC NULLS LAST, {keys}" if ranked else keys
        if self._built:
            table = "item_dim" if filters.get("dimension") else "items"
        else:  # the items themselves, from the key columns: one row per item as the tables will hold them
            table = (
                f"(SELECT DISTINCT {keys}{', dimension' if filters.get('dimension') else ''} FROM results)"
            )
        sql = (
            f"SELECT {keys}, count(*) OVER () AS total FROM {table} {where} ORDER BY {order} LIMIT ? OFFSET ?"
        )
        found = self._read(sql, [*params, size, offset])
        names = [d[0] for d in found.description]
        keys_of = [dict(zip(names, row, strict=True)) for row in found.fetchall()]
        totals = [row.pop("total") for row in keys_of]  # the same on every row (a window count)
        total = int(totals[0]) if totals else self._count(table, where, params)
        columns, details = self._details(keys_of, filters.get("dimension"))
        lines = self._first_lines(keys_of)
        rows = []
        for row in keys_of:  # each item with its figures (None where it has none) and its first line
            detail = details.get(tuple(row[k] for k in ITEM), {})
            merged = {**row, **{c: detail.get(c) for c in columns if c not in row}}
            merged["first_line"] = lines.get((row["instance_id"], row["candidate_id"]))
            rows.append({k: _plain(v) for k, v in merged.items()})
        self.start_build()
        return Page(rows, total, offset, pending)

    def _details(
        self, keys: Sequence[Mapping[str, Any]], dimension: str | None
    ) -> tuple[list[str], dict[tuple[Any, ...], dict[str, Any]]]:
        """Scores ("dimension score · …") and disagreements of the items on one page, from their rows only:
        (the columns, each item's row by ITEM's values)."""
        instances = sorted({row["instance_id"] for row in keys}, key=str)
        if not instances:
            return [], {}
        where = f"WHERE instance_id IN ({', '.join('?' for _ in instances)})"
        where += " AND dimension = ?" if dimension else ""
        # the built table's rows, or the same computed from these instances' rows (each window partition is
        # one instance, so the figures are exact)
        rows = f"SELECT * FROM item_dim {where}" if self._built else DISAGREEMENT_SQL.format(where=where)
        sql = ITEM_SQL.format(dims=rows)
        found = self._read(sql, [*instances, *([dimension] if dimension else [])])
        names = [d[0] for d in found.description]
        out = {}
        for values in found.fetchall():
            row = dict(zip(names, values, strict=True))
            out[tuple(row[k] for k in ITEM)] = row
        return names, out

    def _first_lines(self, keys: Sequence[Mapping[str, Any]]) -> dict[tuple[Any, Any], str | None]:
        """The first non-blank line of each listed candidate's text (None where the results hold none), by
        (instance_id, candidate_id)."""
        pairs = sorted({(row["instance_id"], row["candidate_id"]) for row in keys}, key=str)
        if not pairs:
            return {}
        marks = " OR ".join("(instance_id = ? AND candidate_id = ?)" for _ in pairs)
        instances = sorted({i for i, _ in pairs}, key=str)
        sql = (  # the instances first: a filter DuckDB pushes down to the files (the ORs it does not)
            f"SELECT instance_id, candidate_id, any_value(candidate_text) AS text FROM results "
            f"WHERE instance_id IN ({', '.join('?' for _ in instances)}) AND ({marks}) GROUP BY ALL"
        )
        texts = self._read(sql, [*instances, *(v for pair in pairs for v in pair)]).fetchall()
        return {(i, c): first_line(t) for i, c, t in texts}

    def _count(self, source: str, where: str, params: list[Any]) -> int:
        sql = f"SELECT count(*) FROM {source} {where}"
        return int(self._read(sql, params).fetchone()[0])  # type: ignore[index]

    def all_items(self, dimension: str | None = None) -> pd.DataFrame:
        """Every item of the list (the whole list at once, for the static bundle), as `page` gives them,
        on one dimension when `dimension` is given."""
        self.wait()
        where = "WHERE dimension = ?" if dimension else ""
        sql = ITEM_SQL.format(dims=f"SELECT * FROM item_dim {where}") + f" ORDER BY {', '.join(ITEM)}"
        frame = self._read(sql, [dimension] if dimension else []).fetchdf()
        lines = self._first_lines(frame[["instance_id", "candidate_id"]].to_dict("records"))
        pairs = zip(frame["instance_id"], frame["candidate_id"], strict=True)
        return frame.assign(first_line=[lines.get(pair) for pair in pairs])

    def reference_scores(self, rows: pd.DataFrame) -> dict[tuple[str, ...], str]:
        """The reference's scores in each prompt that showed a candidate (judge, rubric, mode, run_id,
        prompt_id -> "dimension mean · ..."), usable scores only, as the list counts them; a prompt that
        showed no reference (independent mode) has none."""
        prompts = sorted({str(p) for p in rows["prompt_id"].dropna()})
        if not prompts:
            return {}
        sql = (
            "SELECT judge, rubric, mode, run_id, prompt_id, dimension, "
            "avg(CASE WHEN coalesce(parse_ok, true) THEN score END) AS score FROM results "
            f"WHERE source = 'reference' AND prompt_id IN ({', '.join('?' for _ in prompts)}) "
            "GROUP BY ALL ORDER BY dimension"
        )
        out: dict[tuple[str, ...], list[str]] = {}
        for *names, dimension, score in self._read(sql, prompts).fetchall():
            if score is not None and score == score:  # not NULL, not NaN
                key = tuple("" if v is None else str(v) for v in names)
                out.setdefault(key, []).append(f"{dimension} {score:.2f}")
        return {k: " · ".join(v) for k, v in out.items()}

    def item_rows(self, instance_id: str, candidate_id: str) -> pd.DataFrame:
        """Every results row of one candidate: all judges, modes, samples and dimensions."""
        sql = (
            "SELECT * FROM results WHERE instance_id = ? AND candidate_id = ? "
            "ORDER BY judge, rubric, mode, prompt_id, sample_idx, dimension"
        )
        return self._read(sql, [instance_id, candidate_id]).fetchdf()

    def human_rows(self, instance_id: str, candidate_id: str) -> pd.DataFrame:
        """The human labels of one candidate (empty without --humans)."""
        if self.humans is None:  # pandas: imported by now (the item page's rows are a frame)
            import pandas as pd

            return pd.DataFrame(columns=["annotator", "dimension", "score"])
        h = self.humans
        return h.loc[(h["instance_id"] == instance_id) & (h["candidate_id"] == candidate_id)]

    def prompt_messages(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[dict[str, str]]]:
        """The messages sent for each (run_id, prompt_id) (none for runs without prompts.parquet)."""
        keys = [key for key in keys if all(key)]  # results without the optional run_id: nothing to match
        if not self.has_prompts or not keys:
            return {}
        marks = " OR ".join("(run_id = ? AND prompt_id = ?)" for _ in keys)
        params = [v for key in keys for v in key]
        sql = f"SELECT run_id, prompt_id, any_value(messages) FROM prompts WHERE {marks} GROUP BY 1, 2"
        rows = self._read(sql, params).fetchall()
        return {(str(r), str(p)): readable_messages(m) for r, p, m in rows}


def first_line(text: Any) -> str | None:
    """The first non-blank line of a candidate's text, stripped (None: no text, or only blank lines)."""
    if not isinstance(text, str):
        return None
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def _plain(value: Any) -> Any:
    """A page cell as the template reads it: NaN (DuckDB gives one for a NaN double) as None."""
    return None if isinstance(value, float) and value != value else value


def readable_messages(text: Any) -> list[dict[str, str]]:
    """A prompt's messages as prompts.parquet holds them (JSON: a list of {role, content}); anything else is
    one message saying so, shown on the item page instead of failing it."""
    try:
        messages = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        messages = None
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        return [{"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in messages]
    return [{"role": "?", "content": "(prompts.parquet: these messages are not a JSON list of messages)"}]
