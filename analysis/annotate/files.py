"""Files of the annotation round trip: the study's rubric and texts in, sheet / Label Studio out and back.

Label Studio's import format is a JSON list of ``{"data": {...}}`` tasks; its JSON export adds
``annotations: [{completed_by, was_cancelled, result: [{from_name, value: {choices: [...]}}]}]`` per task
(labelstud.io/guide/export). `completed_by` is a user id, or an object with an email in some versions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.load.checks import off_scale
from analysis.load.collect import find_results
from analysis.stats.humans import first_duplicate
from core.cells import csv_unescape, write_csv
from core.rubric import RubricSpec
from core.run_config import RUN_CONFIG, RunConfigError, read_run_config
from core.schema import MANIFEST_NAME, ManifestError, read_manifest
from experiments.datasets.loader import DatasetError, load_dataset

SCORE_FIELD = "score"  # the Label Studio control whose choice is the score


class AnnotationError(ValueError):
    """A problem in an annotation file, reported as one line naming the file and row."""


def score_ranges(rubric: RubricSpec) -> dict[str, tuple[int, int]]:
    """The scored dimensions' whole-number scales, as annotators choose on them."""
    return {
        d.name: (int(d.low), int(d.high))
        for d in rubric.dimensions
        if d.low is not None and d.high is not None
    }


def wording(rubric: RubricSpec, dimension: str) -> str:
    """What annotators are told about `dimension`: its description and anchors, as the rubric's YAML gives
    them to the judge (core.rubric.Dimension.wording)."""
    found = next((d for d in rubric.dimensions if d.name == dimension), None)
    return found.wording() if found is not None else dimension


def scale(rubric: RubricSpec, dimension: str) -> str:
    low, high = score_ranges(rubric)[dimension]
    return f"integer {low}-{high}"


@dataclass(frozen=True)
class ItemText:
    background: str
    text: str


def _run_folders(root: str | Path) -> list[Path]:
    return [p.parent for p in find_results(root)]


def _dataset_path(path: Path) -> Path:
    """The dataset a run judged, from its manifest; a damaged manifest or none named is one line naming it."""
    try:
        dataset = read_manifest(path).dataset_path
    except ManifestError as exc:
        raise AnnotationError(str(exc)) from None
    if dataset is None:
        raise AnnotationError(f"{path}: no 'dataset_path' entry (was it written by experiments.run?)")
    return Path(dataset)


def study_inputs(root: str | Path, choose: str | None = None) -> tuple[dict[str, RubricSpec], Path]:
    """The rubric (from each run's config.json; `choose` names it when the runs used several) and the dataset
    path (from the manifest.json of a run of that rubric)."""
    rubrics: dict[str, RubricSpec] = {}
    paths: dict[str, Path] = {}
    for folder in _run_folders(root):
        manifest_file = folder / MANIFEST_NAME
        try:
            config = read_run_config(folder)
        except RunConfigError as exc:
            raise AnnotationError(str(exc)) from None
        if config is None or not manifest_file.exists():
            raise AnnotationError(
                f"{folder}: no {RUN_CONFIG} / {MANIFEST_NAME} (was it written by experiments.run?)"
            )
        if config.rubric is None:
            raise AnnotationError(
                f"{folder / RUN_CONFIG}: no 'rubric' entry (was it written by experiments.run?)"
            )
        rubrics[config.rubric.name] = config.rubric
        paths.setdefault(config.rubric.name, _dataset_path(manifest_file))
    if not rubrics:
        raise AnnotationError(f"{root}: no run folder found")
    names = ", ".join(sorted(rubrics))
    if choose is None and len(rubrics) > 1:
        raise AnnotationError(f"{root}: runs of several rubrics ({names}); pick one with --rubric")
    name = choose if choose is not None else next(iter(rubrics))
    if name not in rubrics:
        raise AnnotationError(f"--rubric {name}: no run of {root} used it (its runs used: {names})")
    return {name: rubrics[name]}, paths[name]


def item_texts(dataset: Path) -> dict[tuple[str, str], ItemText]:
    """(instance_id, candidate_id) → (the instance's background as shown to judges, the candidate's text);
    candidate ids are unique only within an instance."""
    try:
        instances = load_dataset(dataset)
    except DatasetError as exc:
        raise AnnotationError(str(exc)) from None
    out = {}
    for inst in instances:
        background = "\n\n".join(f"{p.title}\n{p.text}" for p in inst.background)
        for cand in inst.all_candidates():
            out[(inst.instance_id, cand.candidate_id)] = ItemText(background, cand.text)
    return out


def text_digest(text: str) -> str:
    """A short fingerprint of an item's text for the key (which holds no texts): ingest compares it with the
    sheet's text, so a sheet of another export is refused. Line endings and outer blanks (a spreadsheet's
    doing) do not count."""
    normal = "\n".join(line.rstrip() for line in str(text).replace("\r\n", "\n").split("\n")).strip()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:16]


def labelstudio_tasks(sheet: pd.DataFrame) -> list[dict[str, Any]]:
    """One Label Studio task per sheet row, in the sheet's (randomised) order."""
    cols = ["item", "position", "background", "text", "dimension", "question", "scale"]
    return [
        {"data": {c: (int(v) if c == "position" else str(v)) for c, v in zip(cols, row, strict=True)}}
        for row in sheet[cols].itertuples(index=False)
    ]


def labelstudio_config(rubric: RubricSpec) -> str:
    """Labelling config: background, text, the dimension's wording, one choice per score on the scale."""
    lows, highs = zip(*score_ranges(rubric).values(), strict=True)
    choices = "\n".join(f'    <Choice value="{v}"/>' for v in range(min(lows), max(highs) + 1))
    return f"""<View>
  <Header value="Background"/>
  <Text name="background" value="$background"/>
  <Header value="Text to rate"/>
  <Text name="text" value="$text"/>
  <Header value="$question"/>
  <Text name="scale" value="$scale"/>
  <Choices name="{SCORE_FIELD}" toName="text" choice="single" required="true">
{choices}
  </Choices>
  <TextArea name="comment" toName="text" placeholder="optional comment"/>
</View>
<!-- rubric: {escape(rubric.name)} -->
"""


def read_csv_file(path: Path, what: str, keep_default_na: bool = True) -> pd.DataFrame:
    """A sheet or key as strings; one that cannot be read is one line naming it (pandas names no file)."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=keep_default_na)
    except OSError as exc:
        raise AnnotationError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    except ValueError as exc:  # EmptyDataError, ParserError, UnicodeDecodeError
        raise AnnotationError(f"{path}: not a readable CSV {what} ({str(exc).splitlines()[0]})") from None


#: What a sheet row or Label Studio task says it shows, compared with the key by `check_against_key`.
SHEET_TEXT, SHEET_DIMENSION = "sheet_text", "sheet_dimension"
TEXT_DIGEST = "text_sha"
KEY_COLUMNS: tuple[str, ...] = ("item", "instance_id", "candidate_id", "source", "dimension", "low", "high")


def read_key(path: Path) -> pd.DataFrame:
    """The key written by export: its columns, one row per item (else one line naming the key file)."""
    key = _unescaped(read_csv_file(path, "key", keep_default_na=False))  # ids as written: `NA` stays `NA`
    missing = [c for c in KEY_COLUMNS if c not in key]
    if missing:
        raise AnnotationError(f"{path}: no {missing[0]!r} column (export writes {', '.join(KEY_COLUMNS)})")
    repeated = first_duplicate(key, ("item",))
    if repeated:
        pos, first, _ = repeated
        raise AnnotationError(
            f"{path}: row {pos + 1}: item: {key['item'].iloc[pos]!r} repeats row {first + 1}"
        )
    return key


def write_key(key: pd.DataFrame, path: Path) -> None:
    """key.csv, which a study lead may open in a spreadsheet: no cell runs as a formula (`read_key` undoes it)."""
    write_csv(key, path)


def _unescaped(frame: pd.DataFrame) -> pd.DataFrame:
    """A CSV written by `cells.write_csv` with every cell (and header) as it was before the escaping."""
    header = csv_unescape(pd.Series(list(frame.columns), dtype=object)).tolist()  # one call, not one per name
    return frame.set_axis(header, axis=1).apply(csv_unescape)


def write_sheet(sheet: pd.DataFrame, path: Path) -> None:
    """sheet.csv, opened by annotators in a spreadsheet: no cell runs as a formula (`cells.write_csv`)."""
    write_csv(sheet, path)


def load_sheet(path: Path) -> pd.DataFrame:
    """sheet.csv as text, every cell as it was before `write_sheet` quoted it."""
    return _unescaped(read_csv_file(path, "sheet", keep_default_na=False))


def read_sheet(path: Path, annotator: str | None) -> pd.DataFrame:
    """item, annotator, score, line from a completed sheet; rows without a score are not yet done."""
    sheet = load_sheet(path)
    for col in ("item", "score"):
        if col not in sheet:
            raise AnnotationError(f"{path}: no {col!r} column")
    who = sheet["annotator"].str.strip() if "annotator" in sheet else pd.Series("", index=sheet.index)
    if annotator:
        who = who.where(who != "", annotator)
    out = pd.DataFrame(
        {
            "item": sheet["item"],
            "annotator": who,
            "score": sheet["score"].str.strip(),
            "line": [f"row {i}" for i in range(1, len(sheet) + 1)],
            SHEET_TEXT: sheet["text"] if "text" in sheet else None,
            SHEET_DIMENSION: sheet["dimension"] if "dimension" in sheet else None,
        }
    )
    out = out.loc[out["score"] != ""]
    missing = out.loc[out["annotator"] == ""]
    if len(missing):
        raise AnnotationError(f"{path}: {missing['line'].iloc[0]}: annotator: empty (or pass --annotator)")
    return out


def _user(completed_by: Any, path: Path, where: str) -> str:
    """The annotator of one annotation: the user's email, else `labelstudio:<id>` (the same user given as an
    id or as an object with that id is one rater). A user with neither is refused: every such user was
    annotator `None`, merged into one rater."""
    if isinstance(completed_by, dict):
        email, user = completed_by.get("email"), completed_by.get("id")
        if isinstance(email, str) and email.strip():
            return email.strip()
        completed_by = user
    named = isinstance(completed_by, int | str) and not isinstance(completed_by, bool)
    if named and str(completed_by).strip():
        return f"labelstudio:{str(completed_by).strip()}"
    raise AnnotationError(
        f"{path}: {where}: completed_by: no user email or id, so its annotator cannot be told apart from others"
    )


def read_labelstudio(path: Path) -> pd.DataFrame:
    """item, annotator, score, line from a Label Studio JSON export (cancelled annotations skipped)."""
    try:
        tasks = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise AnnotationError(f"{path}: not UTF-8 text (Label Studio exports JSON as UTF-8)") from None
    except json.JSONDecodeError as exc:
        raise AnnotationError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # JSON nested deeper than the parser goes (a Label Studio export is 6 deep)
        raise AnnotationError(f"{path}: JSON nested too deeply to be a Label Studio export") from None
    if not isinstance(tasks, list):
        raise AnnotationError(f"{path}: expected a JSON list of tasks (Label Studio's JSON export)")
    rows = []
    for n, task in enumerate(tasks, start=1):
        rows += _task_scores(task, path, f"task {n}")
    return pd.DataFrame(rows, columns=["item", "annotator", "score", "line", SHEET_TEXT, SHEET_DIMENSION])


def _task_scores(task: Any, path: Path, where: str) -> list[tuple[Any, ...]]:
    """(item, annotator, score, where) per completed annotation of one exported task; a part of the wrong
    JSON type is one line naming the file and task (it was an AttributeError traceback)."""

    def shaped(value: Any, kind: type, name: str) -> Any:
        if not isinstance(value, kind):
            what = "an object" if kind is dict else "a list"
            raise AnnotationError(f"{path}: {where}: {name}: not {what} ({type(value).__name__})")
        return value

    if not isinstance(task, dict):
        raise AnnotationError(f"{path}: {where}: not a task object ({type(task).__name__})")
    data = shaped(task.get("data") or {}, dict, "data")
    item = data.get("item")
    shown = tuple(None if data.get(k) is None else str(data.get(k)) for k in ("text", "dimension"))
    if item is not None and (isinstance(item, bool) or not isinstance(item, str | int)):
        raise AnnotationError(f"{path}: {where}: data.item: not an item name ({type(item).__name__})")
    rows = []
    for n, ann in enumerate(shaped(task.get("annotations") or [], list, "annotations"), start=1):
        if shaped(ann, dict, "annotation").get("was_cancelled"):
            continue
        scores = [
            res
            for res in shaped(ann.get("result") or [], list, "result")
            if shaped(res, dict, "result").get("from_name") == SCORE_FIELD
        ]
        if len(scores) > 1:
            raise AnnotationError(
                f"{path}: {where}, annotation {n}: {len(scores)} {SCORE_FIELD!r} results for one item; keep one"
            )
        for res in scores:
            choice = shaped(
                shaped(res.get("value") or {}, dict, "value").get("choices") or [""], list, "choices"
            )
            if len(choice) > 1:  # the first was taken: a guess at the annotator's score
                raise AnnotationError(
                    f"{path}: {where}, annotation {n}: choices: {len(choice)} choices "
                    f"({', '.join(map(str, choice))}) for one item; an item takes one score"
                )
            user = _user(ann.get("completed_by"), path, f"{where}, annotation {n}")
            rows.append((None if item is None else str(item), user, str(choice[0]), where, *shown))
    return rows


def check_against_key(merged: pd.DataFrame, path: Path, key_path: Path) -> None:
    """Each row's dimension and text (as its sheet row or task shows them) must be the key's for its item: a
    sheet of another export (whose `item-007` is another candidate) is refused in one line naming the row."""
    for row in merged.itertuples(index=False):
        fields = row._asdict()
        shown_dim, shown_text = fields.get(SHEET_DIMENSION), fields.get(SHEET_TEXT)
        if isinstance(shown_dim, str) and shown_dim.strip() != str(fields["dimension"]):
            raise AnnotationError(
                f"{path}: {fields['line']}: dimension: {shown_dim!r} but {key_path} has {fields['dimension']!r} "
                f"for {fields['item']} (a sheet of another export?)"
            )
        digest = fields.get(TEXT_DIGEST)
        if (
            isinstance(shown_text, str)
            and isinstance(digest, str)
            and digest
            and text_digest(shown_text) != digest
        ):
            raise AnnotationError(
                f"{path}: {fields['line']}: text: not the text {key_path} recorded for {fields['item']} "
                "(a sheet of another export?)"
            )


def check_scores(merged: pd.DataFrame, path: Path) -> None:
    """Scores must be integers on the dimension's scale; turns them into floats in place."""
    value = pd.to_numeric(merged["score"], errors="coerce")
    low, high = merged["low"].to_numpy(dtype=float), merged["high"].to_numpy(dtype=float)
    bad = pd.Series(off_scale(value.to_numpy(dtype=float, na_value=np.nan), low, high), index=merged.index)
    if bad.any():
        row = merged.loc[bad].iloc[0]
        raise AnnotationError(
            f"{path}: {row['line']}: score: {row['score']!r} for {row['item']} is not an integer "
            f"from {int(float(row['low']))} to {int(float(row['high']))}"
        )
    merged["score"] = value.astype(float)
