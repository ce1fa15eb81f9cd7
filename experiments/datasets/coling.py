"""COLING 2020 papers with their real reviews (``coling2020_reviews.jsonl``, from NovBench's repository).

One paper a line: ``paper_id, title, abstract, decision, introduction_sentences [str],
review_novelty_sentences [str], reviews [{review_text, scores {overall, Originality, ...}}]`` with the
reviewers' integer scores 1–5. Three uses:

* as a study dataset: each paper is an instance whose one candidate is the paper itself (title, abstract,
  introduction), so a judge can rate it with the ``paper_originality`` rubric (:func:`load_coling`);
* the reviewers' scores per review (:func:`review_scores`), the ground truth for judge-vs-reviewers;
* extraction labels (:func:`extraction_labels`): an introduction sentence is a novelty description when
  NovBench's ``paper_novelty`` for that paper holds it (whitespace aside; :func:`unmatched_chosen` lists
  the chosen sentences that match none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from experiments.datasets.instances import Candidate, Instance
from experiments.datasets.validation import ProblemLog, get_str, read_jsonl

SCORE_RANGE = (1, 5)


def _check_reviews(record: dict[str, Any], line: int, log: ProblemLog) -> None:
    reviews = record.get("reviews")
    if not isinstance(reviews, list):
        log.add(line, "reviews", "must be a list of {review_text, scores}")
        return
    for i, review in enumerate(reviews):
        scores = review.get("scores") if isinstance(review, dict) else None
        if not isinstance(scores, dict):
            log.add(line, f"reviews[{i}].scores", "must be an object of integer scores")
            continue
        for aspect, value in scores.items():
            ok = (
                isinstance(value, int)
                and not isinstance(value, bool)
                and SCORE_RANGE[0] <= value <= SCORE_RANGE[1]
            )
            if value is not None and not ok:
                log.add(
                    line, f"reviews[{i}].scores.{aspect}", f"must be an integer 1-5 or null, got {value!r}"
                )


def _check_record(record: Any, line: int, log: ProblemLog) -> bool:
    if not isinstance(record, dict):
        log.add(line, "<record>", "must be a JSON object")
        return False
    before = len(log.items)
    if not isinstance(record.get("paper_id"), (str, int)) or isinstance(record.get("paper_id"), bool):
        log.add(line, "paper_id", "is required (a string or an integer)")
    for key in ("title", "abstract"):
        get_str(record, key, key, line, log)
    get_str(record, "decision", "decision", line, log, empty_ok=True)
    intro = record.get("introduction_sentences")
    if not isinstance(intro, list) or not all(isinstance(s, str) for s in intro):
        log.add(line, "introduction_sentences", "must be a list of strings")
    _check_reviews(record, line, log)
    return len(log.items) == before


def load_coling_records(path: str | Path) -> list[dict[str, Any]]:
    """The validated records (every problem as file:line: field: message, all at once)."""
    path = Path(path)
    log = ProblemLog(path)
    records, seen = [], set()
    for line, value in read_jsonl(path, log):
        if not _check_record(value, line, log):
            continue
        pid = str(value["paper_id"])
        if pid in seen:
            log.add(line, "paper_id", f"duplicate id {pid!r}")
            continue
        seen.add(pid)
        records.append(value)
    if not records and not log.items:
        log.add(None, "<file>", "no records (the file is empty)")
    log.raise_if_any()
    return records


def paper_text(record: dict[str, Any]) -> str:
    """What the judge reads: title, abstract and introduction."""
    intro = " ".join(s.strip() for s in record["introduction_sentences"])
    return f"Title: {record['title']}\n\nAbstract: {record['abstract']}\n\nIntroduction: {intro}"


def load_coling(path: str | Path) -> list[Instance]:
    """One instance per paper; its only candidate (source ``paper``) is the paper's text."""
    return [
        Instance(
            instance_id=str(r["paper_id"]),
            field="",
            background=(),
            reference=None,
            candidates=(Candidate(f"{r['paper_id']}:paper", "paper", paper_text(r)),),
        )
        for r in load_coling_records(path)
    ]


def review_scores(records: list[dict[str, Any]], aspect: str = "Originality") -> pd.DataFrame:
    """One row per review with a score for ``aspect``: paper_id, decision, review_idx, score."""
    rows = [
        {
            "paper_id": str(r["paper_id"]),
            "decision": r["decision"],
            "review_idx": i,
            "score": float(rev["scores"][aspect]),
        }
        for r in records
        for i, rev in enumerate(r["reviews"])
        if rev["scores"].get(aspect) is not None
    ]
    return pd.DataFrame(rows, columns=["paper_id", "decision", "review_idx", "score"])


def _spaced(sentence: str) -> str:
    """The form sentences are matched in: NovBench's copies differ from the introductions' in spacing only
    (double spaces, newlines, blanks at the ends), and such a difference must not lose a positive."""
    return " ".join(sentence.split())


def extraction_labels(papers: list[dict[str, Any]], novelty: list[dict[str, Any]]) -> pd.DataFrame:
    """Introduction sentences of the papers NovBench covers, labelled 1 when NovBench chose them as novelty
    descriptions (``paper_novelty``, matched after whitespace normalisation) and 0 otherwise; papers are
    joined on id. Chosen sentences that match nothing are :func:`unmatched_chosen`."""
    chosen = {str(r["id"]): {_spaced(s) for s in r["paper_novelty"]} for r in novelty}
    rows = [
        {
            "paper_id": str(p["paper_id"]),
            "title": p["title"],
            "sentence_idx": i,
            "sentence": s,
            "label": int(_spaced(s) in chosen[str(p["paper_id"])]),
        }
        for p in papers
        if str(p["paper_id"]) in chosen
        for i, s in enumerate(p["introduction_sentences"])
    ]
    return pd.DataFrame(rows, columns=["paper_id", "title", "sentence_idx", "sentence", "label"])


def unmatched_chosen(papers: list[dict[str, Any]], novelty: list[dict[str, Any]]) -> pd.DataFrame:
    """NovBench's chosen sentences (each distinct one once) of the papers both files hold that match no
    introduction sentence even after whitespace normalisation: positives the labels lost, to be reported."""
    intro = {str(p["paper_id"]): {_spaced(s) for s in p["introduction_sentences"]} for p in papers}
    rows = [
        {"paper_id": str(r["id"]), "sentence": s}
        for r in novelty
        if str(r["id"]) in intro
        for s in dict.fromkeys(r["paper_novelty"])
        if _spaced(s) not in intro[str(r["id"])]
    ]
    return pd.DataFrame(rows, columns=["paper_id", "sentence"])
