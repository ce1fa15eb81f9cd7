"""EchoReview issue sets: extract each review's weaknesses, match human vs model issues, compute overlaps.

`python -m experiments.issues judge=<model> dataset=sample_reviews matcher=judge|embedding` writes
`weaknesses.csv` (every extracted statement), `matches.csv` (every human–model pair's decision, for audit),
`same_issue_links.csv` (statements of one review found to express one issue),
`overlap_per_paper.csv` and `overlap.csv` (macro-averaged ratios with 95% CIs, per generator).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import pandas as pd
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from core.cells import write_csv  # model text in a CSV people open: no formulas
from experiments import inputs as study_inputs  # a module: tests replace load_study_inputs
from experiments.cli.entry import run_stage
from experiments.config import IssuesConfig
from experiments.outputs import write_atomic
from experiments.stages import issue_matching as matching
from judge.local.embeddings import cosine_matrix, default_embedder
from judge.parse import parse_object
from judge.rubric import response_format


async def extract_all(
    judge: Any, reviews: Sequence[str], params: Mapping[str, Any]
) -> list[list[str] | None]:
    """The weakness list of every review (one cached judge call each); None where the call failed or the
    answer held no list - a failure is not "no weaknesses" and must not enter the overlap ratios."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.stages.candidates import call_many, parse_list, weakness_request

    results = await call_many(judge, [weakness_request(r) for r in reviews], params, progress=False)
    return [(parse_list(r.completion.text) or None) if r.completion else None for r in results]


async def judge_decisions(
    judge: Any, rubric: Any, pairs: Sequence[tuple[str, str]], params: Mapping[str, Any], structured: bool
) -> list[bool | None]:
    """issue_match verdicts for (human issue, model issue) pairs; None where the answer did not parse."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.stages.candidates import Request, call_many

    call_params = {**params, "response_format": response_format(rubric)} if structured else dict(params)
    requests = [Request(rubric.render(statement_a=a, statement_b=b), rubric.version) for a, b in pairs]
    verdicts = []
    for res in await call_many(judge, requests, call_params, progress=False):
        parsed = parse_object(res.completion.text if res.completion else "", rubric.fields)
        verdicts.append(parsed.values["same_issue"] == "yes" if parsed.ok else None)
    return verdicts


def match_issues(
    cfg: IssuesConfig,
    judge: Any,
    rubric: Any,
    params: Mapping[str, Any],
    embedder: Any,
    human: Sequence[str],
    model: Sequence[str],
) -> list[Any]:
    """Every (human, model) issue pair decided by the embedding threshold or by the issue_match judge."""
    if embedder is not None:
        return matching.match_by_embedding(human, model, embedder, cfg.threshold)
    pairs = [(h, m) for h in human for m in model]
    structured = cfg.judge.structured_output
    verdicts = asyncio.run(judge_decisions(judge, rubric, pairs, params, structured))
    table = dict(zip(pairs, verdicts, strict=True))
    return matching.match_by_judge(human, model, lambda h, m: table[(h, m)])


def same_side(
    cfg: IssuesConfig,
    judge: Any,
    rubric: Any,
    params: Mapping[str, Any],
    embedder: Any,
    statements: Sequence[str],
) -> tuple[list[tuple[int, int]], int]:
    """Pairs (i < j) of one review's statements that express one issue, by the same matcher as across, and
    how many pairs' calls came back unscored (unknown, so not taken as "different issues")."""
    pairs = [(i, j) for i in range(len(statements)) for j in range(i + 1, len(statements))]
    if not pairs:
        return [], 0
    if embedder is not None:
        vecs = embedder.encode(list(statements))
        cos = cosine_matrix(vecs, vecs)
        return [(i, j) for i, j in pairs if cos[i, j] >= cfg.threshold], 0
    structured = cfg.judge.structured_output
    texts = [(statements[i], statements[j]) for i, j in pairs]
    verdicts = asyncio.run(judge_decisions(judge, rubric, texts, params, structured))
    same = [pair for pair, verdict in zip(pairs, verdicts, strict=True) if verdict is True]
    return same, sum(v is None for v in verdicts)


def score_paper(
    cfg: IssuesConfig,
    judge: Any,
    rubric: Any,
    params: Mapping[str, Any],
    embedder: Any,
    human: Sequence[str],
    model: Sequence[str],
) -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
    """Issue-set ratios of one (human, model) review pair, its cross decisions and its same-side links; an
    unscored matching call makes the ratios NaN and is counted in ``n_unscored`` (`issue_overlap`)."""
    decisions = match_issues(cfg, judge, rubric, params, embedder, human, model)
    same_h, unscored_h = same_side(cfg, judge, rubric, params, embedder, human)
    same_m, unscored_m = same_side(cfg, judge, rubric, params, embedder, model)
    links = [{"side": "human", "a": human[i], "b": human[j]} for i, j in same_h] + [
        {"side": "model", "a": model[i], "b": model[j]} for i, j in same_m
    ]
    unscored = sum(d.decision is None for d in decisions) + unscored_h + unscored_m
    pairs = matching.matched_pairs(decisions)
    ratios = matching.issue_overlap(human, model, pairs, same_h, same_m, n_unscored=unscored)
    return ratios, decisions, links


def run_issues(cfg: IssuesConfig, out_dir: Path) -> pd.DataFrame:
    """The whole issue-set study for one judge; returns the macro table."""
    # litellm: imported after run_stage has checked the inputs and chosen the price map
    from experiments.judges import make_judge, sampling_params

    inputs = study_inputs.load_study_inputs(cfg, with_mode=False)
    rubric, instances = inputs.rubric, inputs.instances
    judge = make_judge(cfg)
    params = sampling_params(cfg)
    reviews = [(inst, c) for inst in instances for c in inst.all_candidates()]
    try:
        issues = asyncio.run(extract_all(judge, [c.text for _, c in reviews], params))
        by_id = {(i.instance_id, c.candidate_id): iss for (i, c), iss in zip(reviews, issues, strict=True)}
        embedder = None
        if cfg.matcher == "embedding":
            embedder = default_embedder()
        per_paper, audit, same = [], [], []
        for inst in instances:
            human = by_id.get((inst.instance_id, inst.reference.candidate_id)) if inst.reference else None
            for cand in inst.candidates:
                model = by_id[(inst.instance_id, cand.candidate_id)]
                if human is None or model is None:  # unscored extraction: recorded, not counted
                    per_paper.append(
                        {
                            "instance_id": inst.instance_id,
                            "source": cand.source,
                            "error": "no weakness list extracted",
                        }
                    )
                    continue
                ratios, decisions, links = score_paper(cfg, judge, rubric, params, embedder, human, model)
                key = {"instance_id": inst.instance_id, "source": cand.source}
                per_paper.append({**key, **ratios})
                same += [{**key, **link} for link in links]
                audit += [
                    {
                        "instance_id": inst.instance_id,
                        "source": cand.source,
                        "human_issue": human[d.human_idx],
                        "model_issue": model[d.model_idx],
                        **vars(d),
                    }
                    for d in decisions
                ]
    finally:
        judge.cache.close()
    weaknesses = pd.DataFrame(
        [{"instance_id": k[0], "candidate_id": k[1], "issue": i} for k, v in by_id.items() for i in (v or [])]
    )
    frame = pd.DataFrame(per_paper)
    out_dir.mkdir(parents=True, exist_ok=True)

    def save(name: str, table: pd.DataFrame) -> None:  # through a temporary file: never half a table
        write_atomic(out_dir / f"{name}.csv", lambda p: write_csv(table, p))

    save("weaknesses", weaknesses)
    save("matches", pd.DataFrame(audit))
    save("same_issue_links", pd.DataFrame(same, columns=["instance_id", "source", "side", "a", "b"]))
    save("overlap_per_paper", frame)
    scored = frame[frame["error"].isna()] if "error" in frame else frame
    macro = matching.macro_overlap(scored, by=("source",))
    save("overlap", macro)
    return macro


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="issues")
def main(cfg: DictConfig) -> None:
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    macro = run_stage(lambda typed: run_issues(typed, out_dir), cfg, out_dir, IssuesConfig)
    print(macro.to_string(index=False), file=sys.stderr)
    if "n_unscored" in macro and macro["n_unscored"].sum():
        print(
            f"note: {int(macro['n_unscored'].sum())} issue-matching call(s) came back unscored; "
            f"{int(macro['n_papers_unscored'].sum())} review(s) left out of the ratios "
            "(n_unscored in overlap_per_paper.csv)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    from experiments.cli.entry import start

    start("issues")
    main()
