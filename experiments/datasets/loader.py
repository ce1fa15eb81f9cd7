"""The instance format every study runs on: typed records, a strict JSONL loader and small helpers.

Loaders collect *every* problem in a file as ``file:line: field: message`` and then raise one
:class:`DatasetError`, so a user fixes a file in one pass and an invalid file never starts a run.
Bad content never raises anything else (no KeyError/TypeError leaking out of a half-read record).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.datasets.coling import load_coling
from experiments.datasets.instances import Candidate, HumanLabel, Instance, Paper
from experiments.datasets.novbench import load_novbench
from experiments.datasets.rqbench import RQ_FILE, load_rqbench
from experiments.datasets.validation import DatasetError, ProblemLog, get_list, get_str, key_label, read_jsonl

# the instance types and loaders are also reachable from here: `from experiments.datasets.loader import Instance`
__all__ = [
    "RQ_FILE",
    "Candidate",
    "DatasetError",
    "HumanLabel",
    "Instance",
    "Paper",
    "dataset_hash",
    "human_labels_frame",
    "load_dataset",
    "load_instances",
    "load_novbench",
    "load_rqbench",
    "parse_instance",
]
LABEL_COLUMNS = ("annotator", "instance_id", "candidate_id", "source", "dimension", "score")
TOP_LEVEL_KEYS = ("instance_id", "field", "background", "reference", "candidates", "human_labels", "meta")


def _parse_papers(items: list[Any], line: int, log: ProblemLog) -> list[Paper]:
    papers = []
    for i, item in enumerate(items):
        path = f"background[{i}]"
        if not isinstance(item, dict):
            log.add(line, path, "must be an object with title and text")
            continue
        title = get_str(item, "title", f"{path}.title", line, log, empty_ok=True)
        text = get_str(item, "text", f"{path}.text", line, log)
        if title is not None and text is not None:
            papers.append(Paper(title=title, text=text))
    return papers


def _parse_candidate(
    item: Any, path: str, line: int, log: ProblemLog, *, is_reference: bool
) -> Candidate | None:
    if not isinstance(item, dict):
        log.add(line, path, "must be an object")
        return None
    cid = get_str(item, "candidate_id", f"{path}.candidate_id", line, log)
    text = get_str(item, "text", f"{path}.text", line, log)
    source: str | None = "reference"
    if not is_reference:
        source = get_str(item, "source", f"{path}.source", line, log)
        if source == "reference":
            log.add(line, f"{path}.source", "'reference' is reserved for the instance's reference")
            source = None
    if cid is None or text is None or source is None:
        return None
    return Candidate(candidate_id=cid, source=source, text=text)


def _parse_candidates(value: dict[str, Any], line: int, log: ProblemLog) -> list[Candidate]:
    """Reference (if any) then candidates; duplicate ids anywhere in the instance are problems."""
    found: list[tuple[str, Candidate]] = []
    ref = value.get("reference")
    if ref is not None:
        cand = _parse_candidate(ref, "reference", line, log, is_reference=True)
        found += [("reference", cand)] if cand else []
    for i, item in enumerate(get_list(value, "candidates", line, log) or []):
        cand = _parse_candidate(item, f"candidates[{i}]", line, log, is_reference=False)
        found += [(f"candidates[{i}]", cand)] if cand else []
    first_at: dict[str, str] = {}
    for path, cand in found:
        if cand.candidate_id in first_at:
            log.add(
                line,
                f"{path}.candidate_id",
                f"duplicate candidate_id {cand.candidate_id!r} (also at {first_at[cand.candidate_id]})",
            )
        first_at.setdefault(cand.candidate_id, path)
    return [cand for _, cand in found]


def _finite(value: Any) -> float | None:
    """value as a float if it is a finite JSON number (bools and huge integers are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _parse_label(item: Any, path: str, known: set[str], line: int, log: ProblemLog) -> HumanLabel | None:
    if not isinstance(item, dict):
        log.add(line, path, "must be an object")
        return None
    annotator = get_str(item, "annotator", f"{path}.annotator", line, log)
    cid = get_str(item, "candidate_id", f"{path}.candidate_id", line, log)
    dimension = get_str(item, "dimension", f"{path}.dimension", line, log)
    score = _finite(item.get("score"))
    if score is None:
        log.add(line, f"{path}.score", "must be a finite number" if "score" in item else "is required")
    if cid is not None and cid not in known:
        log.add(line, f"{path}.candidate_id", f"unknown candidate_id {cid!r}")
        cid = None
    if annotator is None or cid is None or dimension is None or score is None:
        return None
    return HumanLabel(annotator=annotator, candidate_id=cid, dimension=dimension, score=score)


def _parse_labels(value: dict[str, Any], known: set[str], line: int, log: ProblemLog) -> list[HumanLabel]:
    labels: list[HumanLabel] = []
    first_at: dict[tuple[str, str, str], int] = {}
    for i, item in enumerate(get_list(value, "human_labels", line, log, required=False) or []):
        label = _parse_label(item, f"human_labels[{i}]", known, line, log)
        if label is None:
            continue
        key = (label.annotator, label.candidate_id, label.dimension)
        if key in first_at:
            log.add(
                line,
                f"human_labels[{i}]",
                f"duplicate label for {key} (first at human_labels[{first_at[key]}])",
            )
        first_at.setdefault(key, i)
        labels.append(label)
    return labels


def parse_instance(value: Any, line: int, log: ProblemLog) -> Instance | None:
    """One instance record, or None after recording every problem it has."""
    if not isinstance(value, dict):
        log.add(line, "<record>", "must be a JSON object")
        return None
    before = len(log.items)
    for key in sorted(k for k in value if k not in TOP_LEVEL_KEYS):
        log.add(line, key_label(key), f"unknown key (expected one of {', '.join(TOP_LEVEL_KEYS)})")
    instance_id = get_str(value, "instance_id", "instance_id", line, log)
    field = get_str(value, "field", "field", line, log, required=False, empty_ok=True) or ""
    papers = _parse_papers(get_list(value, "background", line, log, non_empty=True) or [], line, log)
    if "reference" in value and value["reference"] is not None and not isinstance(value["reference"], dict):
        log.add(line, "reference", "must be an object or null")
        value = {k: v for k, v in value.items() if k != "reference"}
    found = _parse_candidates(value, line, log)
    labels = _parse_labels(value, {c.candidate_id for c in found}, line, log)
    if len(log.items) > before or instance_id is None:
        return None
    has_ref = value.get("reference") is not None
    return Instance(
        instance_id=instance_id,
        field=field,
        background=tuple(papers),
        reference=found[0] if has_ref else None,
        candidates=tuple(found[1:] if has_ref else found),
        human_labels=tuple(labels),
    )


def load_instances(path: str | Path) -> list[Instance]:
    """Load an instance JSONL file; raise DatasetError listing every problem (and return nothing)."""
    path = Path(path)
    log = ProblemLog(path)
    instances: list[Instance] = []
    first_line: dict[str, int] = {}
    for line, value in read_jsonl(path, log):
        inst = parse_instance(value, line, log)
        raw_id = value.get("instance_id") if isinstance(value, dict) else None
        if isinstance(raw_id, str) and raw_id in first_line:  # reported even when the line has other problems
            log.add(
                line, "instance_id", f"duplicate instance_id {raw_id!r} (first on line {first_line[raw_id]})"
            )
            continue
        if isinstance(raw_id, str):
            first_line[raw_id] = line
        if inst is not None:
            instances.append(inst)
    if not instances and not log.items:
        log.add(None, "<file>", "no instances (the file is empty)")
    log.raise_if_any()
    return instances


def human_labels_frame(instances: Sequence[Instance]) -> pd.DataFrame:
    """Flatten human labels to one row per (annotator, candidate, dimension), the shape analysis joins on."""
    rows = []
    for inst in instances:
        sources = {c.candidate_id: c.source for c in inst.all_candidates()}
        for lab in inst.human_labels:
            rows.append(
                (
                    lab.annotator,
                    inst.instance_id,
                    lab.candidate_id,
                    sources.get(lab.candidate_id, ""),
                    lab.dimension,
                    float(lab.score),
                )
            )
    return pd.DataFrame(rows, columns=list(LABEL_COLUMNS)).astype({"score": float})


def dataset_hash(path: str | Path) -> str:
    """First 16 hex chars of a sha256 over the file's bytes, or over a folder's sorted listing and bytes.

    Runs record it so results can be traced to the exact data they were computed on.
    """
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_file():
        with path.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256")
    elif path.is_dir():
        for file in sorted(
            (f for f in path.rglob("*") if f.is_file()), key=lambda f: f.relative_to(path).as_posix()
        ):
            name, data = file.relative_to(path).as_posix().encode("utf-8"), file.read_bytes()
            for chunk in (name, data):  # length-prefixed so (name, bytes) boundaries are unambiguous
                digest.update(len(chunk).to_bytes(8, "big"))
                digest.update(chunk)
    else:
        raise DatasetError([f"{path}: <file>: does not exist"])
    return digest.hexdigest()[:16]


def _first_record(path: Path) -> dict[str, Any] | None:
    """The first line of a file that parses as a JSON object (for sniffing its format)."""
    try:
        with path.open("rb") as handle:
            for raw in handle:
                try:
                    value = json.loads(raw.decode("utf-8-sig"))
                except (ValueError, RecursionError):
                    continue
                if isinstance(value, dict):
                    return value
    except OSError:
        return None
    return None


def load_dataset(path: str | Path) -> list[Instance]:
    """Load any supported layout: RQ-Bench folder, NovBench JSONL, or instance JSONL."""
    path = Path(path)
    if path.is_dir():
        if (path / RQ_FILE).is_file():
            return load_rqbench(path)
        raise DatasetError([f"{path}: <file>: is a folder without {RQ_FILE} (not an RQ-Bench folder)"])
    first = _first_record(path) if path.is_file() else None
    if first is not None and "paper_novelty" in first:
        return load_novbench(path)
    if first is not None and "introduction_sentences" in first and "reviews" in first:
        return load_coling(path)  # papers with their real reviews
    return load_instances(path)
