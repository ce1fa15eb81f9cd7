"""NovBench's extraction stage (Sec. 3.1 / App. A): `python -m experiments.extract judge=<model> [limit=N]`.

Novelty-description extraction is binary classification of introduction sentences. Each sentence of the
COLING 2020 papers NovBench covers is shown to the judge with the ``novelty_sentence`` rubric (one cached
call per sentence, through the same judge path as every call); the gold label is whether NovBench chose the
sentence (``experiments.datasets.coling.extraction_labels``). Writes ``extraction_predictions.csv`` (every sentence,
label, prediction, raw answer), ``extraction_metrics.json`` (accuracy and Macro F1, the two App. A reports;
precision, recall and F1 of the "novelty description" class beside them; the all-"no" baseline's accuracy,
unscored answers, chosen sentences that matched no introduction sentence) and ``manifest.json``. An unparsable answer is unscored: counted, left
out of the metrics, never read as "no". Sentences are matched whitespace aside; labels that join nothing
are an error before any call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from core.cells import write_csv  # model text in a CSV people open: no formulas
from core.schema import MANIFEST_NAME, ExtractionManifest, write_manifest
from experiments.cli.entry import run_stage
from experiments.config import ExtractConfig
from experiments.datasets.coling import extraction_labels, load_coling_records, unmatched_chosen
from experiments.datasets.novbench import load_novbench_records
from experiments.inputs import StudyError, check_api_key_env, check_rubric, resolve_path
from experiments.outputs import write_atomic
from judge.parse import parse_object
from judge.rubric import response_format


def classification_metrics(labels: Sequence[int], predicted: Sequence[int | None]) -> dict[str, float]:
    """Accuracy and Macro F1 (the unweighted mean of both classes' F1, NovBench App. A), with precision, recall and
    F1 of class 1 beside them (scikit-learn), over the scored predictions. With few positives the two F1s
    differ a lot (23% positives: 0.815 vs 0.733), so each is named for what it is."""
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support

    # unscored predictions are None, NaN or NA
    scored = [(y, p) for y, p in zip(labels, predicted, strict=True) if p is not None and not pd.isna(p)]
    pairs = [(int(y), int(p)) for y, p in scored]
    out: dict[str, float] = {
        "n": len(pairs),
        "n_unscored": len(labels) - len(pairs),
        "n_positive": sum(y for y, _ in pairs),
    }
    if not pairs:
        return out | dict.fromkeys(
            ("accuracy", "macro_f1", "precision", "recall", "f1", "baseline_all_no_accuracy"), float("nan")
        )
    y, p = zip(*pairs, strict=True)
    prec, rec, f1, _ = precision_recall_fscore_support(y, p, labels=[1], average="binary", zero_division=0.0)
    macro = f1_score(y, p, labels=[0, 1], average="macro", zero_division=0.0)
    return out | {
        "accuracy": float(accuracy_score(y, p)),
        "macro_f1": float(macro),
        "precision": float(prec),
        "recall": float(rec),
        "f1": float(f1),
        "baseline_all_no_accuracy": 1.0 - sum(y) / len(y),
    }


async def classify(
    judge: Any,
    rubric: Any,
    rows: pd.DataFrame,
    params: Mapping[str, Any],
    structured: bool,
    tally: Any,
    progress: bool,
) -> list[tuple[int | None, str]]:
    """(1 / 0 / None, raw answer) per sentence: one cached judge call each, counted in ``tally``."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.stages.candidates import Request, call_many

    call_params = {**params, "response_format": response_format(rubric)} if structured else dict(params)
    dim = rubric.dimensions[0].name
    requests = [
        Request(rubric.render(title=t, sentence=s), rubric.version)
        for t, s in zip(rows["title"], rows["sentence"], strict=True)
    ]
    out = []
    for res in await call_many(judge, requests, call_params, progress=progress):
        raw = res.completion.text if res.completion else ""
        parsed = parse_object(raw, rubric.fields)
        tally.add(res, scored=parsed.ok)
        out.append(((1 if parsed.values[dim] == "yes" else 0) if parsed.ok else None, raw))
    return out


def check_joined(
    cfg: ExtractConfig, papers: list[dict[str, Any]], novelty: list[dict[str, Any]], rows: pd.DataFrame
) -> tuple[int, int]:
    """How many chosen sentences of the run's papers matched no introduction sentence (lost positives), and how
    many NovBench records name no paper of the papers file (left out); one `note:` line for each kind when any.
    A StudyError, before any call, when the labels joined nothing: no NovBench id is a
    paper id (metrics of nothing), or no chosen sentence matched (every label 0, so recall and F1 would read
    0 about sentences that were never compared)."""
    if rows.empty:
        ids = sorted({str(r["id"]) for r in novelty})[:3], sorted({str(p["paper_id"]) for p in papers})[:3]
        raise StudyError(
            f"novelty={cfg.novelty} (id) and papers={cfg.papers} (paper_id) share no paper: "
            f"ids e.g. {ids[0]} vs {ids[1]}; nothing to label"
        )
    kept = set(rows["paper_id"])
    n_chosen = sum(len(dict.fromkeys(r["paper_novelty"])) for r in novelty if str(r["id"]) in kept)
    lost = unmatched_chosen(papers, novelty)
    n_lost = int(lost["paper_id"].isin(kept).sum())
    where = (
        f"novelty={cfg.novelty}: {{}} of the {n_chosen} chosen sentences (paper_novelty) of the "
        f"{len(kept)} paper(s) matched {{}} introduction sentence in papers={cfg.papers}"
    )
    if n_chosen and not rows["label"].any():
        raise StudyError(where.format("none", "an"))
    if n_lost:
        print(
            f"note: {where.format(n_lost, 'no')} (whitespace aside): they are no label (n_unmatched_labels)",
            file=sys.stderr,
        )
    paper_ids = {str(p["paper_id"]) for p in papers}
    unjoined = [str(r["id"]) for r in novelty if str(r["id"]) not in paper_ids]  # records, not distinct ids
    if unjoined:
        print(
            f"note: novelty={cfg.novelty}: {len(unjoined)} record(s) name no paper of papers={cfg.papers} "
            f"(e.g. {sorted(set(unjoined))[:3]}); left out (n_unjoined_records)",
            file=sys.stderr,
        )
    return n_lost, len(unjoined)


def run_extract(cfg: ExtractConfig, out_dir: Path) -> dict[str, Any]:
    """Label, call, score, write; returns the metrics."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.judges import make_judge, sampling_params
    from experiments.manifest import Tally

    papers = load_coling_records(resolve_path(cfg.papers))
    novelty = load_novbench_records(resolve_path(cfg.novelty))
    labels = extraction_labels(papers, novelty)
    keep = list(dict.fromkeys(labels["paper_id"]))[: cfg.limit]
    rows = labels[labels["paper_id"].isin(keep)].reset_index(drop=True)
    n_unmatched, n_unjoined = check_joined(cfg, papers, novelty, rows)
    rubric = cfg.rubric
    check_rubric(rubric)  # before any call: something to score, a template that compiles, a key variable
    check_api_key_env(cfg.judge)
    judge, tally = make_judge(cfg), Tally()
    try:
        structured = cfg.judge.structured_output
        answers = asyncio.run(
            classify(judge, rubric, rows, sampling_params(cfg), structured, tally, cfg.progress)
        )
    finally:
        judge.cache.close()
    rows = rows.assign(predicted=[a for a, _ in answers], raw=[r for _, r in answers])
    metrics = {
        "judge": cfg.judge.name,
        "papers": len(keep),
        "n_unmatched_labels": n_unmatched,
        "n_unjoined_records": n_unjoined,
        **classification_metrics(rows["label"], rows["predicted"]),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(out_dir / "extraction_predictions.csv", lambda p: write_csv(rows, p))
    write_atomic(out_dir / "extraction_metrics.json", lambda p: p.write_text(json.dumps(metrics, indent=2)))
    manifest = ExtractionManifest(
        judge=cfg.judge.name,
        model=cfg.judge.model,
        rubric_version=rubric.version,
        sentences=len(rows),
        papers=len(keep),
        calls_made=tally.calls,
        calls_cached=tally.cached,
        retries=tally.retries,
        provider_errors=tally.provider_errors,
        unscored=tally.unscored,
    )
    write_atomic(out_dir / MANIFEST_NAME, lambda p: write_manifest(p, manifest))
    return metrics


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="extract")
def main(cfg: DictConfig) -> None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    metrics = run_stage(lambda typed: run_extract(typed, out_dir), cfg, out_dir, ExtractConfig)
    print(json.dumps(metrics), file=sys.stderr)


if __name__ == "__main__":
    from experiments.cli.entry import start

    start("extract")
    main()
