"""Planted study folders for analysis tests: results.csv + config.json + manifest.json as experiments.run
writes them, over the shipped sample dataset, with scores chosen by the test (a fake run, named as such)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from experiments.datasets.loader import load_dataset

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample" / "instances.jsonl"
DIMENSIONS = ("originality", "gap_addressing", "non_obviousness")

Scorer = Callable[[str, str, str, int], float | None]  # (judge, candidate_id, dimension, sample) -> score


#: The kind each shipped mode declares (experiments.modes), written into a fixture's rows as a real run does.
SHIPPED_KINDS = {
    "independent": "single",
    "comparative": "multi",
    "comparative_all": "multi",
    "pairwise": "pair",
}


def sample_candidates() -> list[tuple[str, str, str, str]]:
    """(instance_id, candidate_id, source, text) of every candidate in the shipped sample."""
    return [
        (inst.instance_id, c.candidate_id, c.source, c.text)
        for inst in load_dataset(SAMPLE)
        for c in inst.all_candidates()
    ]


def write_fake_run(
    folder: Path, judge: str, mode: str, scorer: Scorer, n_samples: int = 1, **manifest: object
) -> Path:
    """One run folder whose scores come from `scorer` (None = an unparsed answer)."""
    rubric = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "rubric" / "novelty.yaml"))
    rows = []
    for inst, cand, source, text in sample_candidates():
        for dim in DIMENSIONS:
            for k in range(n_samples):
                score = scorer(judge, cand, dim, k)
                rows.append(
                    dict(
                        run_id=folder.name,
                        judge=judge,
                        model=f"fake/{judge}",
                        mode=mode,
                        mode_kind=SHIPPED_KINDS[mode],
                        rubric="novelty",
                        rubric_version="v1",
                        prompt_id=f"{cand}",
                        instance_id=inst,
                        candidate_id=cand,
                        source=source,
                        dimension=dim,
                        higher_is_better=True,
                        sample_idx=k,
                        score=score,
                        parse_ok=score is not None,
                        cost_usd=None,
                        latency_s=0.5,
                        cached=False,
                        candidate_text=text,
                    )
                )
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    config = {
        "judge": {"name": judge, "model": f"fake/{judge}"},
        "mode": {"name": mode},
        "rubric": rubric,
        "dataset": {"name": "sample", "path": str(SAMPLE)},
    }
    (folder / "config.json").write_text(json.dumps(config))
    info = {
        "judge": judge,
        "model": f"fake/{judge}",
        "mode": mode,
        "rubric": "novelty",
        "rubric_versions": {"novelty": "v1"},
        "dataset_path": str(SAMPLE),
        "dataset_hash": "abc123",
    } | manifest
    (folder / "manifest.json").write_text(json.dumps(info))
    return folder
