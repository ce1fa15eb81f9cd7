"""Find and load every results table below a run or multirun folder, and the human labels file.

Only the columns the caller needs are read (`REPORT_COLUMNS` by default: what the report's and the cards'
tables read; never the rationales, which no table reads), and the key columns are read from the parquet file
as dictionaries, so they arrive as pandas categoricals without ever being Python strings: a 10M-row multirun
stays small and groups quickly. `raw` (the judge's answer) is kept, as a categorical: one copy per distinct
answer, however many candidate × dimension rows share it. Every check and relabelling below works on the
categories (a few thousand values), never on a string per row. A run folder with results.parquet is read from
it; results.csv is read only for a run without one (an old or hand-made run).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.load.checks import (
    IDENTITY,
    ResultsError,
    check_flags,
    check_label_text,
    check_numbers,
    check_results,
    csv_line,
    read_table,
    require_columns,
    require_values,
    row_groups,
    run_rubric,
)
from analysis.load.files import find_results, symlinked_runs
from analysis.load.shards import merged_run_ids
from analysis.stats import modes
from analysis.stats.humans import LABEL_TEXT, check_humans, first_duplicate
from analysis.stats.scores import DIRECTION, as_bool, map_distinct, perturbation_names
from core.cells import unescape_text
from core.schema import (
    ANALYSIS_COLUMNS,
    COUNT_COLUMNS,
    FLAG_COLUMNS,
    FLOAT_COLUMNS,
    KEY_COLUMNS,
    REQUIRED,
    TEXT_COLUMNS,
    ManifestError,
    run_manifest,
)
from core.spellings import MISSING_TEXT

# the analysis columns, their types and the key columns (loaded as categoricals) come from the one schema
COLUMNS = ANALYSIS_COLUMNS
# what analysis.load.checks reads
CHECKED = frozenset({*IDENTITY, *REQUIRED, "preference", "score_min", "score_max"})
# what the loader itself reads besides the caller's columns: the checks, the relabelling of runs and rubrics
# (`prepare`), the repeated-judgment keys and the mode kinds
LOADER_COLUMNS = frozenset(
    {
        *CHECKED,
        DIRECTION,
        "parse_ok",
        "perturbation",
        "rubric_version",
        "candidate_text",
        "mode_kind",
        "position",
    }
)
# the text columns no report or card table reads: the judge's rationale (shown by the viewer, which reads the
# parquet files itself), the neutral label a text was shown under, the error text (analysis.load.completeness
# reads its own columns)
UNREAD_TEXT = frozenset({"rationale", "label", "error"})
# the union of the columns the report's and the cards' tables read (the default of `load_results`)
REPORT_COLUMNS: tuple[str, ...] = tuple(c for c in ANALYSIS_COLUMNS if c not in UNREAD_TEXT)
# a CSV cell that is missing: in a number or flag column every spelling pandas knows (NA, nan, None, ...), in a
# text column (ids, names) only the empty cell, so an id `NA` stays `NA` as in the parquet copy and the labels
CSV_MISSING: dict[str, list[str]] = {c: [""] if c in TEXT_COLUMNS else list(MISSING_TEXT) for c in COLUMNS}


def _add_directions(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """An older results table without `higher_is_better`: each dimension's direction from the rubric in the
    run's config.json (never from conf/: the run may have used a rubric of a `hydra.searchpath` folder), or
    one line naming the run folder when that does not say."""
    if "rubric" not in frame:
        raise ValueError(
            f"{path}: no {DIRECTION!r} column and no 'rubric' column to read the directions from"
        )
    spec = run_rubric(path)
    # "overall" (the mean of scores) points up, also in a config written before `add_overall`
    known_directions = (({"overall": True} if spec.ranges() else {}) | spec.directions()) if spec else {}
    pairs = frame[["rubric", "dimension"]].dropna().drop_duplicates().astype(str)
    known: dict[tuple[str, str], bool] = {}
    for rubric, dim in pairs.itertuples(index=False, name=None):
        if spec is None or spec.name != rubric or dim not in known_directions:
            raise ValueError(
                f"{path}: no {DIRECTION!r} column, and rubric {rubric!r} of the run folder {path.parent} "
                f"has no config.json that gives dimension {dim!r} a direction; add the column"
            )
        known[(rubric, dim)] = known_directions[dim]
    keys = zip(frame["rubric"].astype(str), frame["dimension"].astype(str), strict=True)
    return frame.assign(**{DIRECTION: [known.get(k, True) for k in keys]})


def _wanted(columns: Collection[str] | None) -> list[str]:
    """The columns to read, in the schema's order: the caller's (default `REPORT_COLUMNS`) and the loader's."""
    asked = set(REPORT_COLUMNS if columns is None else columns) | LOADER_COLUMNS
    return [c for c in COLUMNS if c in asked]


def _read_parquet(path: Path, columns: list[str]) -> pa.Table:
    """The `columns` a parquet file has, the string key columns decoded straight into dictionaries (one copy
    of each distinct value; no Python string per row)."""
    schema = read_table(path, pq.read_schema, "parquet")
    present = [c for c in columns if c in schema.names]
    strings = [
        c
        for c in present
        if c in KEY_COLUMNS
        and (pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type))
    ]
    return read_table(path, lambda p: pq.read_table(p, columns=present, read_dictionary=strings), "parquet")


def _read_one(path: Path, columns: Collection[str] | None = None) -> pa.Table:
    """One results file (its `columns`, see `_wanted`), checked (analysis.load.checks): a file that is not
    what it claims, lacks a column, holds a non-number or out-of-range score or a judgment twice is a
    ResultsError naming it."""
    wanted = _wanted(columns)
    if path.suffix == ".parquet":
        table = _read_parquet(path, wanted)
        checked = table.select([c for c in table.column_names if c in CHECKED]).to_pandas()
    else:  # the float columns as text first, so a non-number is reported with its line; ids as text (007)
        types = dict.fromkeys([*FLOAT_COLUMNS, *COUNT_COLUMNS, *FLAG_COLUMNS, *TEXT_COLUMNS], str)
        frame = read_table(
            path,
            lambda p: pd.read_csv(
                p,
                usecols=lambda c: c in wanted,
                low_memory=False,
                dtype=types,
                keep_default_na=False,
                na_values=CSV_MISSING,
            ),
            "CSV",
        )
        frame = unescape_text(frame)  # the text cells as the run had them (results.csv is formula-safe)
        for col in (*FLOAT_COLUMNS, *COUNT_COLUMNS):
            if col in frame:
                frame[col] = check_numbers(frame, path, col)
        for col in FLAG_COLUMNS:  # "False" parsed, not read by truthiness; " NA " missing
            if col in frame:
                frame[col] = check_flags(frame, path, col)
        table, checked = pa.Table.from_pandas(frame, preserve_index=False), frame
    require_columns(checked, path, REQUIRED)
    require_values(checked, path)
    check_results(checked, path)
    if DIRECTION not in table.column_names and "dimension" in table.column_names:
        frame = _add_directions(table.to_pandas(), path)
        table = pa.Table.from_pandas(frame, preserve_index=False)
    for name in table.column_names:
        col = table.column(name)
        if name in KEY_COLUMNS and not pa.types.is_dictionary(col.type):
            table = table.set_column(
                table.schema.get_field_index(name), name, col.cast(pa.string()).dictionary_encode()
            )
    return table


def _as_run(table: pa.Table, run_id: str | None) -> pa.Table:
    """The table under `run_id` (a shard under its study's run id); unchanged when None."""
    if run_id is None or "run_id" not in table.column_names:
        return table
    column = pa.array([run_id] * table.num_rows, pa.string()).dictionary_encode()
    return table.set_column(table.schema.get_field_index("run_id"), "run_id", column)


def check_copies(paths: list[Path], tables: list[pa.Table], *, latest: bool = False) -> list[int]:
    """The files to keep: two files that hold the same run would count every judgment twice, so they are
    refused, naming both and whether one is a copy of the other or two sweeps of the same jobs (a sweep stopped
    on its budget and its continuation); with `latest`, the newer file of each such run is kept instead."""
    holders: dict[str, list[int]] = {}
    for i, table in enumerate(tables):
        if "run_id" in table.column_names:
            for run_id in table.column("run_id").unique().to_pylist():
                if run_id is not None:
                    holders.setdefault(str(run_id), []).append(i)
    clashes = {run_id: held for run_id, held in holders.items() if len(held) > 1}
    if not clashes:
        return list(range(len(paths)))
    newest = {
        run_id: max(held, key=lambda i: (paths[i].stat().st_mtime, str(paths[i])))
        for run_id, held in clashes.items()
    }
    if latest:
        older = {i for run_id, held in clashes.items() for i in held if i != newest[run_id]}
        for i in sorted(older):
            print(f"note: --latest: left out {paths[i]} (a newer file holds the same run)", file=sys.stderr)
        return [i for i in range(len(paths)) if i not in older]
    run_id, held = next(iter(clashes.items()))
    new = newest[run_id]
    old = next(i for i in held if i != new)
    more = f" ({len(clashes)} runs overlap in all)" if len(clashes) > 1 else ""
    if tables[old].equals(tables[new]):
        raise ResultsError(
            f"{paths[new]}: holds run {run_id!r} with the same rows as {paths[old]}: a copy{more}; "
            "remove one, or add --latest to keep the newer"
        )
    raise ResultsError(
        f"{paths[old]} and {paths[new]} both hold run {run_id!r} with different rows (two sweeps of "
        f"the same jobs, e.g. one stopped on its budget and its continuation){more}; analyse one "
        f"sweep folder, or add --latest to keep the newer ({paths[new].parent})"
    )


def load_results(
    root: str | Path, *, latest: bool = False, columns: Collection[str] | None = None
) -> pd.DataFrame:
    """All results tables below `root` as one frame (key columns as categoricals): `columns` (default
    `REPORT_COLUMNS`, the union the report's and the cards' tables read; the loader's own checks read a few
    more, `LOADER_COLUMNS`, which the frame keeps) where a file has them; `latest`: of two files holding the
    same run, the newer (see `check_copies`)."""
    if not Path(root).exists():
        raise FileNotFoundError(f"{root}: no such folder")
    for link in symlinked_runs(root):
        print(
            f"note: {link} is a symbolic link: not followed (analyse the folder it points to on its own)",
            file=sys.stderr,
        )
    paths = find_results(root)
    if not paths:
        raise FileNotFoundError(f"{root}: no results.parquet or results.csv below this folder")
    if not latest:  # a shard given twice is named as such (ShardMergeError), before it reads as a copy
        merged_run_ids(paths)
    read = [_read_one(p, columns) for p in paths]
    kept = check_copies(paths, read, latest=latest)
    paths, read = [paths[i] for i in kept], [read[i] for i in kept]
    merged = merged_run_ids(paths)  # the shards of one study become one run (ShardMergeError if they cannot)
    tables = [_as_run(table, merged.get(p)) for p, table in zip(paths, read, strict=True)]
    try:
        frame = pa.concat_tables(tables, promote_options="permissive").to_pandas(split_blocks=True)
    except (
        pa.ArrowInvalid,
        pa.ArrowTypeError,
    ):  # a column typed differently across runs (e.g. CSV vs parquet)
        frame = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise ValueError(f"results tables below {root} lack required column(s) {missing}")
    return prepare(frame, study_ids(paths, tables))


def study_ids(paths: list[Path], tables: list[pa.Table]) -> dict[str, str]:
    """run id -> the study id its manifest records (the hash of every setting that changes a row), where the
    manifest says; runs of one study are reruns of one rater, not two raters."""
    out: dict[str, str] = {}
    for path, table in zip(paths, tables, strict=True):
        try:
            manifest = run_manifest(path.parent)
        except ManifestError:
            continue
        study = manifest.study_id if manifest is not None else None
        if study and "run_id" in table.column_names:
            out.update(
                {str(r): str(study) for r in table.column("run_id").unique().to_pylist() if r is not None}
            )
    return out


def prepare(results: pd.DataFrame, studies: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Key columns as categoricals and a float score; in a study of several rubrics every judge is labelled
    ``judge/rubric``, so that different rubrics are never averaged together and labels stay consistent; runs
    of different studies over the same items are separate raters (`label_overlapping_runs`)."""
    out = results.copy(deep=False)  # copy-on-write: the columns replaced below leave `results` as it was
    for col in KEY_COLUMNS:  # first, so that every relabelling below maps categories, not rows
        if col in out and not isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype("category")
    if "rubric" in out and out["rubric"].nunique() > 1:  # every judge labelled alike, whatever it ran
        out["judge"] = combine_categories(out["judge"], out["rubric"], lambda j, r: f"{j}/{r}")
    if "perturbation" in out:  # one spelling before runs are told apart: a run without the column is `none`
        out["perturbation"] = map_categories(
            out["perturbation"], lambda p: str(perturbation_names(pd.Series([p], dtype=object))[0])
        )
    out = label_overlapping_runs(out, studies or {})
    if "mode" in out:  # the analysis picks its tables by kind (analysis.stats.modes), whatever wrote the rows
        out[modes.COLUMN] = modes.fill_mode_kinds(out)
    for col in KEY_COLUMNS:
        if col in out and not isinstance(out[col].dtype, pd.CategoricalDtype):
            out[col] = out[col].astype("category")
    if out["score"].dtype != np.float64:
        out["score"] = pd.to_numeric(out["score"], errors="coerce").astype(float)
    if DIRECTION in out:  # true/false whatever a CSV made of it; a row without one fails when it is used
        known = out[DIRECTION].notna().to_numpy()
        flags = pd.Series(pd.NA, index=out.index, dtype="boolean")
        if known.all():
            flags[:] = as_bool(out[DIRECTION])
        else:
            flags[known] = as_bool(out.loc[known, DIRECTION])
        out[DIRECTION] = flags
    return out


def map_categories(values: pd.Series, fn: Callable[[object], object]) -> pd.Series:
    """`fn` of each row's value, applied once per category (a missing value is `fn(NaN)`), as a categorical:
    a relabelling of a 10M-row column costs what its few distinct values cost."""
    col = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    codes = col.cat.codes.to_numpy()
    missing = [fn(np.nan)] if (codes < 0).any() else [np.nan]  # fn of NaN only where a value is missing
    mapped = pd.Series([*(fn(v) for v in col.cat.categories), *missing], dtype=object)
    new, labels = pd.factorize(mapped)  # a missing result: code -1
    return pd.Series(
        pd.Categorical.from_codes(new[np.where(codes < 0, len(mapped) - 1, codes)], categories=labels),
        index=values.index,
        name=values.name,
    )


def combine_categories(
    left: pd.Series, right: pd.Series, fn: Callable[[object, object], object]
) -> pd.Series:
    """`fn(left, right)` of each row, applied once per distinct pair (missing values passed as NaN), as a
    categorical."""
    pairs = pd.DataFrame({"a": left, "b": right})
    ids, first = row_groups(pairs, ["a", "b"])
    a, b = left.to_numpy(dtype=object)[first], right.to_numpy(dtype=object)[first]
    mapped = pd.Series([fn(x, y) for x, y in zip(a, b, strict=True)], dtype=object)
    codes, labels = pd.factorize(mapped)
    return pd.Series(
        pd.Categorical.from_codes(codes[ids], categories=pd.Index(labels, dtype=object)),
        index=left.index,
        name=left.name,
    )


# `prepare`'s labels, taken apart again for display: ``judge/rubric`` (with a ``@run`` suffix when runs were
# split) and a combination's ``mean of 2 judges (a+b) / rubric`` (analysis.report.build.combined_label)
_JUDGE_RUBRIC = re.compile(r"^(?P<judge>[^/ ]+)/(?P<rubric>[^/@ ]+)(?P<run>@.*)?$")
_COMBINED_RUBRIC = re.compile(r"^(?P<judge>.+ judges \(.*\)) / (?P<rubric>[^/]+)$")


def split_rubric(label: str) -> tuple[str, str | None]:
    """(judge, rubric) of a rater label `prepare` wrote for a study of several rubrics; (label, None) else."""
    for pattern in (_COMBINED_RUBRIC, _JUDGE_RUBRIC):
        match = pattern.match(label)
        if match:
            return match.group("judge") + (match.groupdict().get("run") or ""), match.group("rubric")
    return label, None


def rubric_column(frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown and written: a judge run under several rubrics is one judge with the rubric in a
    column of its own beside it (one row per judge and rubric), not two judges named ``judge/rubric``. A
    table whose judges carry no rubric is returned as it is."""
    if "judge" not in frame or frame.empty:
        return frame
    pairs = [split_rubric(str(label)) for label in frame["judge"]]
    if all(rubric is None for _, rubric in pairs):
        return frame
    out = frame.copy()
    out["judge"] = [judge for judge, _ in pairs]
    if "rubric" not in out:
        out.insert(out.columns.get_loc("judge") + 1, "rubric", [rubric or "" for _, rubric in pairs])
    return out


# what one judgment is about, whatever run made it: two runs of one rater sharing such an item are two conditions
ITEM = ("instance_id", "candidate_id", "other_id", "order", "dimension", "perturbation")


def label_overlapping_runs(results: pd.DataFrame, studies: Mapping[str, str]) -> pd.DataFrame:
    """Each study its own rater (``judge@run_id``, its first run) where runs of one judge, mode and rubric
    from different studies judged the same items; reruns of one study stay one rater, their repeated
    judgments dropped (the scored copy kept; `attrs["duplicate_judgments"]` counts them).

    Different studies over the same items differ in some setting (a `-m temperature=...` or `seed=...`
    sweep, other options): pooled, a candidate's score would mix both settings' samples and self-consistency
    would measure the difference between them. A run with no manifest (`studies`) is a study of its own.
    Runs over disjoint items (one study over two datasets) stay one rater.
    """
    if "run_id" not in results or results["run_id"].nunique() < 2:
        return results
    study = map_categories(results["run_id"], lambda r: studies.get(str(r), f"run:{r}"))  # once per run
    out = results.assign(_study=study)
    rater = [c for c in ("judge", "mode", "rubric") if c in out]
    item = [c for c in ITEM if c in out]
    # an item of one rater judged in two studies: a row whose study is not its group's first row's (only a
    # rater of several studies can have one: the rows of the others are not grouped)
    several = np.flatnonzero(_raters_of_several(out, rater, "_study"))
    ids, first = row_groups(out.iloc[several], rater + item)
    codes = study.cat.codes.to_numpy()[several]
    mixed = np.zeros(len(first), dtype=bool)
    mixed[ids[codes != codes[first][ids]]] = True
    overlapping = out.iloc[several[mixed[ids]]][rater].astype(str).drop_duplicates()
    if not overlapping.empty:
        run = results["run_id"].astype(str)
        first_run = out.assign(_run=run).groupby(["_study", *rater], observed=True)["_run"].transform("min")
        out["judge"] = relabel_judges(out, rater, overlapping, first_run)
    return _drop_repeated_judgments(out.drop(columns="_study"), rater, item)


def relabel_judges(rows: pd.DataFrame, rater: list[str], clash: pd.DataFrame, suffix: pd.Series) -> pd.Series:
    """The judge column, with every row whose rater (its `rater` columns, as text) is a row of `clash`
    labelled ``judge@<suffix>``: the one way runs become separate raters (here and analysis.echoreview.rows)."""
    split = pd.MultiIndex.from_frame(rows[rater].astype(str)).isin(pd.MultiIndex.from_frame(clash))
    judge = rows["judge"].astype(str)
    return judge.where(~split, judge + "@" + suffix.astype(str))


def _drop_repeated_judgments(results: pd.DataFrame, rater: list[str], item: list[str]) -> pd.DataFrame:
    """One row per rater, item, prompt and sample: a study's rerun repeats its judgments (the cache answers
    them again), which would count twice; the scored copy is kept."""
    # a rerun that judged another text or under another rubric version is not a repeat (the study id hashes
    # the settings, not the dataset's or the template's contents)
    same = ("prompt_id", "sample_idx", "model", "rubric_version", "candidate_text")
    keys = [*rater, *item, *(c for c in same if c in results)]
    # a judgment is repeated by another run (one run's judgments are unique: `check_duplicates` refused
    # its file otherwise), so only the rows of raters of several runs are grouped
    several = np.flatnonzero(_raters_of_several(results, rater, "run_id"))
    ids, first = row_groups(results.iloc[several], keys)
    if len(first) == len(several):  # no judgment twice (the usual case): nothing to rank
        return results
    ok = _parsed(results["parse_ok"]) if "parse_ok" in results else np.zeros(len(results), dtype=bool)
    order = np.argsort(~ok[several], kind="stable")  # the scored copies first, each in its row order
    kept = np.empty(len(first), dtype=np.int64)
    kept[ids[order][::-1]] = order[::-1]  # each judgment's first row in that order
    keep = np.ones(len(results), dtype=bool)
    keep[several] = False
    keep[several[kept]] = True
    out = results.loc[keep]
    out = out if out.index.is_monotonic_increasing else out.sort_index()
    out.attrs["duplicate_judgments"] = int(len(several) - len(first))
    return out


def _raters_of_several(frame: pd.DataFrame, rater: list[str], column: str) -> np.ndarray:
    """Rows whose rater (its `rater` columns) has rows of more than one `column` value (run or study)."""
    if column not in frame:
        return np.ones(len(frame), dtype=bool)
    rater_ids, rater_first = row_groups(frame, rater)
    _, pair_first = row_groups(frame, [*rater, column])
    per_rater = np.bincount(rater_ids[pair_first], minlength=len(rater_first))
    return (per_rater > 1)[rater_ids]


def _parsed(values: pd.Series) -> np.ndarray:
    """parse_ok as bools: true, 1 or 1.0 in any spelling is parsed; anything else, missing included, is not
    (read once per distinct value, not per row)."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.fillna(False).to_numpy(dtype=bool)
    parsed = map_distinct(values, lambda v: str(v).lower() in ("true", "1", "1.0"))
    return np.asarray(pd.Series(parsed).fillna(False), dtype=bool)


def load_humans(path: str | Path) -> pd.DataFrame:
    """The human labels CSV (annotator, instance_id, candidate_id, source, dimension, score); a file that is
    not one (JSONL, binary, a missing column, a non-number score) is a ResultsError naming it.

    The ids are read as text, as `annotate ingest` writes them: read as numbers, `007` became `7` and joined
    no judgment, and `01` and `1` were one item labelled twice. An id `NA` stays `NA`."""
    path = Path(path)
    missing = {"score": [""], DIRECTION: list(MISSING_TEXT)}  # a score `nan` or `inf` is refused, not missing
    frame = read_table(
        path,
        lambda p: pd.read_csv(
            p, dtype=dict.fromkeys([*LABEL_TEXT, "score"], str), keep_default_na=False, na_values=missing
        ),
        "CSV",
    )
    frame = unescape_text(frame)  # as `annotate ingest` was given them (it writes a formula-safe CSV)
    try:
        humans = check_humans(frame)
    except ValueError as exc:
        raise ResultsError(f"{path}: not a human labels CSV: {exc}") from None
    if "score" in frame:
        check_numbers(frame, path, "score")  # "abc": not a number
        check_label_text(frame, path)  # "nan", "inf": a number, but not a score
    repeated = first_duplicate(humans)
    if repeated:
        pos, first, key = repeated
        raise ResultsError(
            f"{path}:{csv_line(path, pos)}: duplicate human label ({key}), first given on line "
            f"{csv_line(path, first)}; keep one label per annotator, item and dimension"
        )
    return humans


def expected_as_score(results: pd.DataFrame) -> pd.DataFrame:
    """The table with `score` replaced by the G-Eval `score_expected` (runs with expected_scores=true); a
    row without an expected score becomes unscored, so no sampled integer is mixed in. How many scored rows
    that leaves out, per judge, is in `attrs["expected_missing"]` (the report prints it)."""
    if "score_expected" not in results or results["score_expected"].isna().all():
        raise ValueError("no score_expected in these results: run the study with expected_scores=true")
    lost = results["score"].notna() & results["score_expected"].isna()
    out = results.assign(score=results["score_expected"].astype(float))
    judges = results["judge"].astype(str) if "judge" in results else pd.Series("all", index=results.index)
    out.attrs["expected_missing"] = judges[lost].value_counts().sort_index().to_dict()
    out.attrs["expected_scored"] = int(results["score"].notna().sum())
    return out


def expected_missing_note(results: pd.DataFrame) -> str | None:
    """One line saying how many sampled scores `--expected` could not use (no score_expected), or None."""
    missing = results.attrs.get("expected_missing") or {}
    if not missing:
        return None
    per_judge = ", ".join(f"{judge} {n}" for judge, n in missing.items())
    return (
        f"note: --expected: {sum(missing.values())} of {results.attrs.get('expected_scored', 0)} scored rows "
        f"have no score_expected (no log-probabilities, or no allowed value among them) and are left "
        f"unscored: {per_judge}"
    )
