"""Generation stage and EchoReview issue sets, through litellm's HTTP path to a local scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from analysis.novbench import report as novbench_report
from experiments.datasets.loader import load_instances
from experiments.stages.candidates import few_shot_demos, parse_list
from experiments.stages.generate import generate
from experiments.stages.issues import run_issues
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import public_data, typed

ROOT = Path(__file__).resolve().parent.parent
EVALUATION = (
    "Positive Novelty Evaluations:\n- The syllable features are a new idea for Thai tagging.\n"
    "Neutral Novelty Evaluations:\n- The tag mapping follows prior work.\n"
    "Negative Novelty Evaluations:\n- BERT for tagging is not new.\n"
)


def answer(body: dict[str, Any]) -> str:
    """Answers shaped like each generation prompt asks (a fake provider for tests)."""
    prompt = body["messages"][-1]["content"]
    if "Answer with a numbered list" in prompt:
        return "Here are my questions:\n1. Does A cause B?\n2. Can C replace D?\n3) Why does E fail?\nThanks."
    if "bullet list" in prompt:
        if "baselines" in prompt.lower():
            return "- The evaluation lacks strong baselines.\n- No ablation of the encoder."
        return "- The evaluation lacks strong baselines.\n- The writing is unclear."
    if "Novelty Evaluations:" in prompt:
        return EVALUATION
    if "Write a peer review" in prompt:
        return "Summary: fine.\nWeaknesses:\n- The evaluation lacks strong baselines.\nScores: overall 3"
    if "same underlying research issue" in prompt:
        same = prompt.count("baselines") >= 2
        return json.dumps({"same_issue": "yes" if same else "no"})
    return rubric_answer(body)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, answer(body)))
    with srv.running():
        yield srv


def config(server: ScriptedServer, tmp: Path, **overrides: Any) -> dict[str, Any]:
    judge = yaml.safe_load((ROOT / "conf" / "judge" / "qwen.yaml").read_text())
    judge.update(api_base=server.api_base)
    base = {
        "judge": judge,
        "dataset": {"name": "sample", "path": str(ROOT / "data/sample/instances.jsonl")},
        "task": "questions",
        "k": 5,
        "strategy": "zero_shot",
        "rag_top_k": 2,
        "corpus": None,
        "temperature": 0.7,
        "max_tokens": 100,
        "seed": 0,
        "limit": 2,
        "cache_dir": str(tmp / "cache"),
        "progress": False,
    }
    return {**base, **overrides}


def test_parse_list() -> None:
    assert parse_list("intro\n1. a?\n2) b?\n- c\n* d\nnot an item", 3) == ["a?", "b?", "c"]


def test_questions_become_a_runnable_dataset(server: ScriptedServer, tmp_path: Path) -> None:
    manifest = generate(typed(config(server, tmp_path), "generate"), tmp_path / "out")
    assert manifest.calls_made == 2 and manifest.provider_errors == 0 and manifest.schema_version == 1
    generated = load_instances(tmp_path / "out" / "generated.jsonl")  # valid in the project's own format
    assert [len(i.candidates) for i in generated] == [3, 3]
    cand = generated[0].candidates[2]
    assert cand.source == "qwen" and cand.text == "Why does E fail?" and cand.candidate_id.endswith(":qwen:3")
    assert generated[0].reference is not None  # the reference is kept for win/tie/loss
    again = generate(typed(config(server, tmp_path), "generate"), tmp_path / "out2")
    assert again.calls_made == 0 and again.calls_cached == 2


def test_novelty_strategies_and_few_shot_never_uses_the_item(server: ScriptedServer, tmp_path: Path) -> None:
    novbench = public_data("novbench_coling2020.jsonl")
    records = [json.loads(line) for line in novbench.read_text().splitlines()[:6]]
    for i in range(len(records)):
        demos = few_shot_demos(records, records[i], seed=0)
        assert len(demos) == 2 and all(d["evaluation"] != records[i]["output_format"] for d in demos)
    seen = len(server.requests)
    for strategy in ("zero_shot", "few_shot"):
        cfg = config(
            server,
            tmp_path,
            task="novelty",
            strategy=strategy,
            limit=2,
            dataset={"name": "nb", "path": str(novbench)},
        )
        generate(typed(cfg, "generate"), tmp_path / strategy)
        rows = [
            json.loads(x)
            for x in (tmp_path / strategy / "novelty_evaluations.jsonl").read_text().splitlines()
        ]
        assert [r["strategy"] for r in rows] == [strategy] * 2 and rows[0]["generated"] == EVALUATION
    prompts = [r["messages"][-1]["content"] for r in server.requests[seen:]]
    assert sorted(p.count("Example ") for p in prompts) == [0, 0, 2, 2]  # zero-shot: none; few-shot: two
    # NovBench Table 2 over both runs (real MiniLM embeddings; clarity as in the released code)
    assert novbench_report.main([str(tmp_path), "--clarity", "released"]) == 0
    table = pd.read_csv(tmp_path / "novbench_table.csv")
    assert sorted(table["strategy"]) == ["few_shot", "zero_shot"] and (table["n"] == 2).all()
    assert table["DistAcc"].between(0, 1).all() and table["Rel."].between(1, 5).all()
    md = (tmp_path / "novbench_table.md").read_text()
    assert "| 2 | 0 | 2 |" in md  # n, failed, in the sectioned format
    assert "clarity_variant: released" in md and "unit: sentence" in md and "failed_policy: zero" in md


def test_issue_sets_by_judge(server: ScriptedServer, tmp_path: Path) -> None:
    cfg = config(
        server,
        tmp_path,
        dataset={"name": "r", "path": str(ROOT / "data/sample/reviews.jsonl")},
        matcher="judge",
        threshold=0.7,
        temperature=0.0,
        limit=1,
    )
    cfg["rubric"] = yaml.safe_load((ROOT / "conf" / "rubric" / "issue_match.yaml").read_text())
    for generation_only in ("task", "k", "strategy", "rag_top_k", "corpus"):
        del cfg[generation_only]
    macro = run_issues(typed(cfg, "issues"), tmp_path / "issues")
    matches = pd.read_csv(tmp_path / "issues" / "matches.csv")
    # human: 2 issues; each generated review: 2 issues -> 4 pairs per source; only the baselines pair matches
    assert len(matches) == 4 * macro["n_papers"].sum()
    per = pd.read_csv(tmp_path / "issues" / "overlap_per_paper.csv")
    links = pd.read_csv(
        tmp_path / "issues" / "same_issue_links.csv"
    )  # within one review: no two say one thing
    assert list(links.columns) == ["instance_id", "source", "side", "a", "b"] and links.empty
    # |O| = 1, |H ∪ E| = 2 + 2 - 1 = 3 -> overlap 1/3; human-only 1/2; model-only 1/2
    assert per["overlap"].tolist() == pytest.approx([1 / 3] * len(per))
    assert per["human_only"].tolist() == pytest.approx([0.5] * len(per))
