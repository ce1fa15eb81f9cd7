"""Hydra entry point of the generation stage: `python -m experiments.generate task=questions judge=gpt-4o`.

Writes into the run folder: `generated.jsonl` (questions / reviews: an instance file for experiments.run)
or `novelty_evaluations.jsonl` (NovBench records with the generated text), plus `manifest.json`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from core.schema import MANIFEST_NAME, GenerationManifest, write_manifest
from experiments.cli.entry import run_stage
from experiments.config import GenerateConfig
from experiments.datasets.loader import Instance, Paper, load_dataset
from experiments.datasets.novbench import load_novbench_records
from experiments.datasets.validation import ProblemLog, read_jsonl
from experiments.inputs import resolve_path
from experiments.outputs import write_atomic
from judge.local.embeddings import default_embedder


def instance_record(inst: Instance) -> dict[str, Any]:
    """The instance JSONL record (the format load_instances reads back)."""
    record: dict[str, Any] = {
        "instance_id": inst.instance_id,
        "field": inst.field,
        "background": [asdict(p) for p in inst.background],
        "candidates": [asdict(c) for c in inst.candidates],
    }
    if inst.reference is not None:
        record["reference"] = {"candidate_id": inst.reference.candidate_id, "text": inst.reference.text}
    return record


def write_jsonl(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """One JSON record per line, written atomically like every other study output."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def load_corpus(path: str | None, records: Sequence[Mapping[str, Any]]) -> list[Paper]:
    """RAG corpus: a JSONL of {title, abstract}, or by default the dataset's own papers."""
    if path is None:
        return [Paper(str(r["title"]), str(r["abstract"])) for r in records]
    log = ProblemLog(path)
    rows = [value for _, value in read_jsonl(Path(path), log)]
    log.raise_if_any()  # file:line of every undecodable line, as for a dataset
    return [Paper(str(r["title"]), str(r.get("abstract", r.get("text", "")))) for r in rows]


def generate(cfg: GenerateConfig, out_dir: Path) -> GenerationManifest:
    """Run one generation task; returns the manifest."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.judges import make_judge, sampling_params
    from experiments.manifest import Tally
    from experiments.stages import candidates as gen

    task, name, limit = cfg.task, cfg.judge.name, cfg.limit
    if task not in ("questions", "novelty", "reviews"):
        raise ValueError(f"task: unknown task {task!r}; choose questions, novelty or reviews")
    data_path = resolve_path(cfg.dataset.path)
    judge = make_judge(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if task == "novelty":
            pool = load_novbench_records(data_path)
            records = pool[:limit]
            related = None
            if cfg.strategy == "rag":
                corpus = load_corpus(cfg.corpus, pool)
                related = gen.rag_related(records, corpus, cfg.rag_top_k, default_embedder())
            requests = gen.novelty_requests(records, cfg.strategy, seed=cfg.seed, related=related, pool=pool)
        else:
            instances = load_dataset(data_path)[:limit]
            k = cfg.k if task == "questions" else 0
            requests = (
                gen.question_requests(instances, k) if task == "questions" else gen.review_requests(instances)
            )
        results = asyncio.run(gen.call_many(judge, requests, sampling_params(cfg), cfg.progress))
        if task == "novelty":
            rows = [
                {
                    "id": r["id"],
                    "title": r["title"],
                    "model": name,
                    "strategy": cfg.strategy,
                    "generated": res.completion.text if res.completion else "",
                    "error": res.error,
                    "paper_novelty": r["paper_novelty"],
                    "output_format": r["output_format"],
                }
                for r, res in zip(records, results, strict=True)
            ]
            write_jsonl(out_dir / "novelty_evaluations.jsonl", rows)
        else:
            if task == "questions":
                new, audit = gen.questions_to_instances(instances, results, name, k)
                write_jsonl(out_dir / "generation_audit.jsonl", audit)
            else:
                new = gen.reviews_to_instances(instances, results, name)
            write_jsonl(out_dir / "generated.jsonl", [instance_record(i) for i in new])
    finally:
        judge.cache.close()
    tally = Tally()
    for res in results:
        tally.add(res, scored=True)
    strategy = cfg.strategy
    manifest = GenerationManifest(
        task=str(task),
        generator=str(name),
        model=cfg.judge.model,
        strategy=None if strategy is None else str(strategy),
        dataset_path=str(data_path),
        items=len(results),
        calls_made=tally.calls,
        calls_cached=tally.cached,
        retries=tally.retries,
        provider_errors=tally.provider_errors,
    )
    write_atomic(out_dir / MANIFEST_NAME, lambda p: write_manifest(p, manifest))
    return manifest


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="generate")
def main(cfg: DictConfig) -> None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    manifest = run_stage(lambda typed: generate(typed, out_dir), cfg, out_dir, GenerateConfig)
    print(json.dumps(manifest.to_json()), file=sys.stderr)


if __name__ == "__main__":
    from experiments.cli.entry import start

    start("generate")
    main()
