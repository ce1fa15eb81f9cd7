"""The generation stage: candidates to judge, made with the same client, cache and retries as judging.

Three tasks: research questions from an instance's background (-> an instance file ready for
`experiments.run`), NovBench novelty evaluations (zero-shot / few-shot / RAG), and peer reviews (-> an
instance file whose candidates are reviews, for the review_quality and pairwise rubrics).
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from experiments.datasets.loader import Candidate, Instance, Paper
from judge.client import CallResult, Judge
from judge.rubric import render_template, template_version

_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+(.+?)\s*$")
STRATEGIES = ("zero_shot", "few_shot", "rag")


@dataclass(frozen=True)
class Request:
    """One generation prompt: its messages and the template version for the cache key."""

    messages: list[dict[str, str]]
    version: str


async def call_many(
    judge: Judge, requests: Sequence[Request], params: Mapping[str, Any], progress: bool = True
) -> list[CallResult]:
    """All requests concurrently (bounded by the judge's limit), results in request order."""
    bar = tqdm(total=len(requests), disable=not progress, file=sys.stderr, unit="call")

    async def one(req: Request) -> CallResult:
        result = await judge(req.messages, params, sample_idx=0, rubric_version=req.version)
        bar.update(1)
        return result

    try:
        return list(await asyncio.gather(*(one(r) for r in requests)))
    finally:
        bar.close()


def _messages(template: str, **variables: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": render_template(template, **variables)}]


def parse_list(text: str, limit: int | None = None) -> list[str]:
    """Items of a numbered or bulleted list; lines that are not list items are ignored."""
    items = [m.group(1) for line in text.splitlines() if (m := _NUMBERED.match(line))]
    return items[:limit] if limit else items


# --- research questions ---------------------------------------------------------------------------------


def question_requests(instances: Sequence[Instance], k: int) -> list[Request]:
    version = template_version("generate_questions.jinja", "_common.jinja")
    return [
        Request(_messages("generate_questions.jinja", background=inst.background, k=k), version)
        for inst in instances
    ]


def questions_to_instances(
    instances: Sequence[Instance], results: Sequence[CallResult], source: str, k: int
) -> tuple[list[Instance], list[dict[str, Any]]]:
    """New instances whose candidates are the generated questions; plus one audit record per call."""
    out, audit = [], []
    for inst, res in zip(instances, results, strict=True):
        text = res.completion.text if res.completion else ""
        questions = parse_list(text, k)
        cands = tuple(
            Candidate(f"{inst.instance_id}:{source}:{i + 1}", source, q) for i, q in enumerate(questions)
        )
        out.append(Instance(inst.instance_id, inst.field, inst.background, inst.reference, cands))
        audit.append(
            {
                "instance_id": inst.instance_id,
                "source": source,
                "n_questions": len(questions),
                "error": res.error,
                "raw": text,
            }
        )
    return out, audit


# --- NovBench novelty evaluations -----------------------------------------------------------------------


def few_shot_demos(
    pool: Sequence[Mapping[str, Any]], item: Mapping[str, Any], seed: int, n: int = 2
) -> list[dict[str, Any]]:
    """n demonstrations from the same dataset, never the item itself, drawn reproducibly per item."""
    others = [r for r in pool if r["id"] != item["id"]]
    chosen = random.Random(f"{seed}:{item['id']}").sample(others, min(n, len(others)))
    return [{"claims": r["paper_novelty"], "evaluation": r["output_format"]} for r in chosen]


def rag_related(
    records: Sequence[Mapping[str, Any]], corpus: Sequence[Paper], top_k: int, embedder: Any
) -> list[list[Paper]]:
    """Top-k corpus papers per record by cosine between its novelty claims and each title + abstract."""
    queries = [" ".join(r["paper_novelty"]) for r in records]
    docs = [f"{p.title}. {p.text}" for p in corpus]
    sims = embedder.encode(queries) @ embedder.encode(docs).T
    related = []
    for i, record in enumerate(records):
        order = [j for j in sims[i].argsort()[::-1] if corpus[j].title != record["title"]]
        related.append([corpus[j] for j in order[:top_k]])
    return related


def novelty_requests(
    records: Sequence[Mapping[str, Any]],
    strategy: str,
    *,
    seed: int,
    related: Sequence[Sequence[Paper]] | None = None,
    pool: Sequence[Mapping[str, Any]] | None = None,
) -> list[Request]:
    """One prompt per record; few-shot demonstrations come from `pool` (default: the records)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: unknown {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    version = template_version("novelty_evaluation.jinja")
    requests = []
    for i, rec in enumerate(records):
        demos = few_shot_demos(pool or records, rec, seed) if strategy == "few_shot" else []
        rel = list(related[i]) if strategy == "rag" and related else []
        messages = _messages(
            "novelty_evaluation.jinja",
            title=rec["title"],
            claims=rec["paper_novelty"],
            demonstrations=demos,
            related=rel,
        )
        requests.append(Request(messages, version))
    return requests


# --- reviews --------------------------------------------------------------------------------------------


def review_requests(instances: Sequence[Instance]) -> list[Request]:
    version = template_version("write_review.jinja")
    return [
        Request(_messages("write_review.jinja", background=inst.background), version) for inst in instances
    ]


def reviews_to_instances(
    instances: Sequence[Instance], results: Sequence[CallResult], source: str
) -> list[Instance]:
    """The instances with the generated review added as a candidate (an empty answer adds none)."""
    out = []
    for inst, res in zip(instances, results, strict=True):
        text = (res.completion.text if res.completion else "").strip()
        extra = (Candidate(f"{inst.instance_id}:{source}", source, text),) if text else ()
        out.append(Instance(inst.instance_id, inst.field, inst.background, inst.reference, extra))
    return out


def weakness_request(review: str) -> Request:
    """EchoReview: ask a judge to list a review's weaknesses (cached like every call)."""
    version = template_version("extract_weaknesses.jinja")
    return Request(_messages("extract_weaknesses.jinja", review=review), version)
