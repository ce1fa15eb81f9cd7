"""RQ-Bench's published folder layout as instances (the reference is the held-out research question).

Layout, per the dataset card of ``declare-lab/rq-bench`` on Hugging Face: a folder holding
``rq_dataset.jsonl`` (one held-out research question per line: ``question`` and
``grounded_in_refs``, a list of objects with ``arxiv_id``) and ``cited_papers/<arxiv_id>.json``,
the full text of each cited paper by section. The card does not spell out every other field, so
the loader is tolerant, with these assumptions:

- instance id: the first of ``id``, ``rq_id``, ``question_id``, ``qid``, ``uid`` (string or integer),
  else ``rq-<line>``; field: the first of ``field``, ``category``, ``primary_category``, ``subfield``,
  ``arxiv_category``, ``domain``, else ``""``.
- a ``grounded_in_refs`` entry may also be a bare arXiv id string; repeated ids are used once; an entry
  whose ``arxiv_id`` is null or absent is skipped (no full text), but a record needs at least one.
- a cited paper's passage is its ``abstract`` if non-empty, else a section headed "Abstract", else
  the first section with text, else ``text``/``full_text``/``body``; at most ~1500 characters, cut at a
  word. Sections may be a list (of strings, or objects with ``text``/``content``/``paragraphs``) or a
  heading -> text mapping. The title is ``title``, else the reference entry's ``title``, else the id.
- an id with ``/`` (old arXiv style) or a version suffix also matches ``cs_0601001.json`` / the
  unversioned file name; a name that would leave ``cited_papers/`` is never opened.

Candidates are empty: they come from generation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from experiments.datasets.instances import Candidate, Instance, Paper
from experiments.datasets.validation import ProblemLog, get_str, read_jsonl

RQ_FILE = "rq_dataset.jsonl"

ID_KEYS = ("id", "rq_id", "question_id", "qid", "uid")
FIELD_KEYS = ("field", "category", "primary_category", "subfield", "arxiv_category", "domain")
SECTION_KEYS = ("sections", "body_text", "full_text", "body", "text")
PASSAGE_CHARS = 1500
_MISSING, _INVALID = "missing", "invalid"


def _clip(text: str, limit: int = PASSAGE_CHARS) -> str:
    """Whitespace-normalised text cut at a word boundary near ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return (cut or text[:limit]) + " ..."


def _section_texts(sections: Any) -> list[tuple[str, str]]:
    """(heading, text) pairs from the shapes a sectioned full text is commonly stored in."""
    if isinstance(sections, str):
        return [("", sections)]
    if isinstance(sections, dict):
        items: list[Any] = [{"heading": k, "text": v} for k, v in sections.items()]
    elif isinstance(sections, list):
        items = sections
    else:
        return []
    pairs = []
    for item in items:
        if isinstance(item, str):
            pairs.append(("", item))
            continue
        if not isinstance(item, dict):
            continue
        heading = next(
            (item[k] for k in ("heading", "title", "name", "section") if isinstance(item.get(k), str)), ""
        )
        body = next((item[k] for k in ("text", "content", "paragraphs") if k in item), "")
        if isinstance(body, list):
            body = " ".join(p for p in body if isinstance(p, str))
        if isinstance(body, str):
            pairs.append((heading, body))
    return [(h, t) for h, t in pairs if t.strip()]


def paper_passage(doc: dict[str, Any], fallback_title: str) -> Paper | None:
    """The background passage for one cited paper: abstract, else the first section, else the text."""
    raw_title = doc.get("title")
    title = raw_title.strip() if isinstance(raw_title, str) and raw_title.strip() else fallback_title
    abstract = doc.get("abstract")
    if isinstance(abstract, str) and abstract.strip():
        return Paper(title=title, text=_clip(abstract))
    for key in SECTION_KEYS:
        pairs = _section_texts(doc.get(key))
        if pairs:
            named = [t for h, t in pairs if h.strip().lower().strip(".:0123456789 ") == "abstract"]
            return Paper(title=title, text=_clip(named[0] if named else pairs[0][1]))
    return None


def _paper_file(cited_dir: Path, arxiv_id: str) -> Path | None:
    """The file holding a cited paper, trying the id's common spellings; never outside cited_dir."""
    unversioned = re.sub(r"v\d+$", "", arxiv_id)
    for name in dict.fromkeys(
        (arxiv_id, arxiv_id.replace("/", "_"), unversioned, unversioned.replace("/", "_"))
    ):
        candidate = cited_dir / f"{name}.json"
        try:
            if candidate.resolve().is_relative_to(cited_dir.resolve()) and candidate.is_file():
                return candidate
        except (OSError, ValueError):  # NUL bytes, over-long names: no such file
            continue
    return None


def _load_paper(cited_dir: Path, arxiv_id: str, title: str, log: ProblemLog) -> Paper | str:
    """A cited paper's passage, or _MISSING / _INVALID (an invalid file is reported here, once)."""
    file = _paper_file(cited_dir, arxiv_id)
    if file is None:
        return _MISSING
    paper_log = ProblemLog(file)
    try:
        doc = json.loads(file.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        paper_log.add(None, "<utf-8>", f"not valid UTF-8 (byte offset {exc.start})")
    except json.JSONDecodeError as exc:
        paper_log.add(exc.lineno, "<json>", f"invalid JSON ({exc.msg} at col {exc.colno})")
    except (OSError, ValueError, RecursionError) as exc:
        paper_log.add(None, "<file>", f"cannot be read ({type(exc).__name__})")
    else:
        if not isinstance(doc, dict):
            paper_log.add(1, "<record>", "must be a JSON object")
        elif (paper := paper_passage(doc, title)) is not None:
            return paper
        else:
            paper_log.add(1, "<paper>", "no abstract, sections or text to use as background")
    log.items.extend(paper_log.items)
    return _INVALID


def _refs(value: dict[str, Any], line: int, log: ProblemLog) -> list[tuple[str, str, str]]:
    """(field path, arxiv id, title) for each grounded reference, first occurrence only."""
    raw = value.get("grounded_in_refs")
    if not isinstance(raw, list) or not raw:
        log.add(line, "grounded_in_refs", "must be a non-empty list" if raw is not None else "is required")
        return []
    refs: dict[str, tuple[str, str, str]] = {}
    skipped = 0
    for i, item in enumerate(raw):
        if isinstance(item, str) and item.strip():
            refs.setdefault(item.strip(), (f"grounded_in_refs[{i}]", item.strip(), item.strip()))
        elif isinstance(item, dict):
            if item.get("arxiv_id") is None:  # a citation without an arXiv id has no full text to use
                skipped += 1
                continue
            aid = get_str(item, "arxiv_id", f"grounded_in_refs[{i}].arxiv_id", line, log)
            title = item.get("title") if isinstance(item.get("title"), str) else None
            if aid is not None:
                refs.setdefault(
                    aid.strip(), (f"grounded_in_refs[{i}].arxiv_id", aid.strip(), title or aid.strip())
                )
        else:
            log.add(line, f"grounded_in_refs[{i}]", "must be an object with arxiv_id")
    if skipped == len(raw):
        log.add(line, "grounded_in_refs", "no entry has an arxiv_id")
    return list(refs.values())


def _first_value(value: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` holding a non-empty string or an integer, as a string."""
    for key in keys:
        item = value.get(key)
        if isinstance(item, str) and item.strip():
            return item.strip()
        if isinstance(item, int) and not isinstance(item, bool):
            return str(item)
    return None


def _record(
    value: Any, line: int, folder: Path, cache: dict[str, Paper | str], log: ProblemLog
) -> Instance | None:
    """One rq_dataset.jsonl record as an instance, or None after recording its problems."""
    if not isinstance(value, dict):
        log.add(line, "<record>", "must be a JSON object")
        return None
    before = len(log.items)
    question = get_str(value, "question", "question", line, log)
    papers: list[Paper] = []
    for path, aid, title in _refs(value, line, log):
        if aid not in cache:
            cache[aid] = _load_paper(folder / "cited_papers", aid, title, log)
        paper = cache[aid]
        if paper == _MISSING:
            log.add(line, path, f"no cited_papers/{aid}.json")
        elif isinstance(paper, Paper):
            papers.append(paper)
    if len(log.items) > before or question is None or not papers:
        return None
    instance_id = _first_value(value, ID_KEYS) or f"rq-{line}"
    reference = Candidate(candidate_id=f"{instance_id}:ref", source="reference", text=question)
    return Instance(
        instance_id=instance_id,
        field=_first_value(value, FIELD_KEYS) or "",
        background=tuple(papers),
        reference=reference,
        candidates=(),
    )


def load_rqbench(folder: str | Path) -> list[Instance]:
    """Load an RQ-Bench folder; raise DatasetError listing every problem (and return nothing)."""
    folder = Path(folder)
    log = ProblemLog(folder / RQ_FILE)
    cache: dict[str, Paper | str] = {}
    instances: list[Instance] = []
    first_line: dict[str, int] = {}
    for line, value in read_jsonl(folder / RQ_FILE, log):
        inst = _record(value, line, folder, cache, log)
        if inst is None:
            continue
        if inst.instance_id in first_line:
            log.add(
                line,
                "id",
                f"duplicate id {inst.instance_id!r} (first on line {first_line[inst.instance_id]})",
            )
            continue
        first_line[inst.instance_id] = line
        instances.append(inst)
    if not instances and not log.items:
        log.add(None, "<file>", "no records (the file is empty)")
    log.raise_if_any()
    return instances
