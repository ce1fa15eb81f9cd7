"""NovBench's record format (``id, title, abstract, decision, paper_novelty, review_novelty, output_format``).

The raw records feed the NovBench metrics (Relevance/Clarity use ``paper_novelty``; Correctness/Coverage
use ``output_format``), so they are returned validated as-is; :func:`load_novbench` also maps them to
instances whose reference is the reviewers' consolidated novelty evaluation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.datasets.instances import Candidate, Instance, Paper
from experiments.datasets.validation import ProblemLog, get_str, read_jsonl

REQUIRED_KEYS = ("id", "title", "abstract", "decision", "paper_novelty", "review_novelty", "output_format")


def _record_id(record: dict[str, Any], line: int, log: ProblemLog) -> str | None:
    """The record id as a string (published files use strings; integers are accepted too)."""
    value = record.get("id")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    log.add(line, "id", "is required" if "id" not in record else "must be a non-empty string or an integer")
    return None


def _check_sentences(
    record: dict[str, Any], key: str, line: int, log: ProblemLog, *, non_empty: bool
) -> None:
    """``record[key]`` must be a list of strings (non-empty when the metrics need at least one)."""
    if key not in record:
        log.add(line, key, "is required")
        return
    value = record[key]
    if not isinstance(value, list) or (non_empty and not value):
        log.add(
            line, key, "must be a non-empty list of strings" if non_empty else "must be a list of strings"
        )
        return
    for i, item in enumerate(value):
        if not isinstance(item, str):
            log.add(line, f"{key}[{i}]", "must be a string")


def _check_record(record: Any, line: int, log: ProblemLog) -> str | None:
    """Record every problem of one NovBench record; its id when it has none."""
    if not isinstance(record, dict):
        log.add(line, "<record>", "must be a JSON object")
        return None
    before = len(log.items)
    record_id = _record_id(record, line, log)
    get_str(record, "title", "title", line, log)
    get_str(record, "abstract", "abstract", line, log)
    get_str(record, "decision", "decision", line, log, empty_ok=True)
    get_str(record, "output_format", "output_format", line, log)
    _check_sentences(record, "paper_novelty", line, log, non_empty=True)
    _check_sentences(record, "review_novelty", line, log, non_empty=False)
    return record_id if len(log.items) == before else None


def load_novbench_records(path: str | Path) -> list[dict[str, Any]]:
    """The raw NovBench records, validated; raise DatasetError listing every problem."""
    path = Path(path)
    log = ProblemLog(path)
    records: list[dict[str, Any]] = []
    first_line: dict[str, int] = {}
    for line, value in read_jsonl(path, log):
        record_id = _check_record(value, line, log)
        if record_id is None:
            continue
        if record_id in first_line:
            log.add(line, "id", f"duplicate id {record_id!r} (first on line {first_line[record_id]})")
            continue
        first_line[record_id] = line
        records.append(value)
    if not records and not log.items:
        log.add(None, "<file>", "no records (the file is empty)")
    log.raise_if_any()
    return records


def novbench_instance(record: dict[str, Any]) -> Instance:
    """One validated record as an instance: background = title + abstract, reference = human evaluation."""
    record_id = str(record["id"])
    reference = Candidate(
        candidate_id=f"{record_id}:human_eval", source="reference", text=record["output_format"]
    )
    return Instance(
        instance_id=record_id,
        field="",
        background=(Paper(record["title"], record["abstract"]),),
        reference=reference,
        candidates=(),
    )


def load_novbench(path: str | Path) -> list[Instance]:
    """NovBench records as instances (see :func:`novbench_instance`)."""
    return [novbench_instance(record) for record in load_novbench_records(path)]


# ---- NovBench human study (App. D): A/B pairs with expert preferences -----------------------------------------
PAIR_KEYS = ("id", "review_text", "introduction", "original_text_1", "original_text_2")
VOTES = ("A", "B")


def _check_pair(record: Any, line: int, log: ProblemLog) -> dict[str, Any] | None:
    """One pair as {id, source, human, text_a, text_b, votes}; None (with problems logged) if unusable."""
    if not isinstance(record, dict):
        log.add(line, "<record>", "must be a JSON object")
        return None
    before = len(log.items)
    record_id = _record_id(record, line, log)
    texts = {k: get_str(record, k, k, line, log, empty_ok=True) for k in PAIR_KEYS[1:]}
    annotators = sorted(k for k in record if k.startswith("annotator"))
    if not annotators:
        log.add(line, "annotator_*", "at least one annotator column is required")
    for k in annotators:
        if record[k] not in VOTES:
            log.add(line, k, f"must be 'A' or 'B', got {record[k]!r}")
    if len(log.items) != before:
        return None
    source = [s.strip() for s in str(texts["introduction"]).splitlines() if s.strip()]
    return {
        "id": record_id,
        "source": source,
        "human": texts["review_text"],
        "text_a": texts["original_text_1"],
        "text_b": texts["original_text_2"],
        "votes": {k: record[k] for k in annotators},
    }


def load_human_pairs(path: str | Path) -> list[dict[str, Any]]:
    """The pairs of a NovBench human-study file, validated (every problem as file:line: field: message)."""
    path = Path(path)
    log = ProblemLog(path)
    pairs, first = [], None
    for line, value in read_jsonl(path, log):
        pair = _check_pair(value, line, log)
        if pair is None:
            continue
        first = first or (line, sorted(pair["votes"]))
        if sorted(pair["votes"]) != first[1]:
            log.add(
                line,
                "annotator_*",
                f"has {sorted(pair['votes'])}; line {first[0]} has {first[1]} "
                "(every pair needs the same annotators for Fleiss' kappa)",
            )
            continue
        pairs.append(pair)
    if not pairs and not log.items:
        log.add(None, "<file>", "no pairs (the file is empty)")
    log.raise_if_any()
    return pairs
