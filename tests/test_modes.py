"""Modes: seeded and recorded order, label mapping, pairwise flips, rows in the contract's shape."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from core.schema import COLUMNS
from experiments.config import ModeConfig
from experiments.datasets.loader import Candidate, Instance, Paper
from experiments.modes import build_prompts, mode_from_config, select_candidates
from experiments.modes.comparative import Comparative, ComparativeAll
from experiments.modes.independent import Independent
from experiments.modes.pairwise import Pairwise
from experiments.rows import rows_for, to_frame
from judge.client import CallResult
from judge.rubric import Rubric, rubric_from_config
from judge.types import Completion

CONF = Path(__file__).resolve().parent.parent / "conf" / "rubric"
META = {
    "run_id": "r",
    "judge": "j",
    "model": "fake/m",
    "rubric": "novelty",
    "rubric_version": "v",
    "temperature": 0.1,
}


def load(name: str) -> Rubric:
    return rubric_from_config(yaml.safe_load((CONF / f"{name}.yaml").read_text()))


def instance(n_per_source: int = 3) -> Instance:
    cands = tuple(
        Candidate(f"i1:{s}:{k}", s, f"{s} question {k}?")
        for s in ("narrow_gen", "broad_gen")
        for k in range(n_per_source)
    )
    return Instance(
        "i1", "nlp", (Paper("T", "text"),), Candidate("i1:ref", "reference", "ref question?"), cands
    )


def result(text: str, finish: str = "stop") -> CallResult:
    return CallResult(Completion(text, finish, 10, 5, None, 0.5), cached=False, retries=0)


def comparative_prompts(inst: Instance, rubric: Rubric, seed: int, mode: Comparative | None = None) -> list:
    return (mode or Comparative()).prompts(inst, rubric, seed)


def pairwise_prompts(inst: Instance, rubric: Rubric) -> list:
    return Pairwise().prompts(inst, rubric, 0)


def test_comparative_all_order_is_seeded_recorded_and_varies_with_seed() -> None:
    inst = instance()
    first = comparative_prompts(inst, load("novelty"), 0, ComparativeAll())[0]
    again = comparative_prompts(inst, load("novelty"), 0, ComparativeAll())[0]
    other = comparative_prompts(inst, load("novelty"), 1, ComparativeAll())[0]
    ids = [s.candidate.candidate_id for s in first.shown]
    assert ids == [s.candidate.candidate_id for s in again.shown]
    assert ids != [s.candidate.candidate_id for s in other.shown]
    assert sorted(ids) == sorted(c.candidate_id for c in inst.all_candidates())
    assert [s.label for s in first.shown] == [f"Q{i}" for i in range(1, 8)]
    assert [s.position for s in first.shown] == list(range(7))
    assert first.mode == "comparative_all" and first.prompt_id == "i1|comparative"
    for s in first.shown:  # the prompt shows each text under its own label
        assert f"<<<QUESTION {s.label}>>>\n{s.candidate.text}\n" in first.messages[1]["content"]


def test_comparative_is_one_prompt_per_generator_with_the_reference() -> None:
    """The paper's setting: the reference and ONE generator's K candidates per prompt, seeded, neutral labels."""
    inst = instance(5)
    prompts = comparative_prompts(inst, load("novelty"), 0)
    assert [p.prompt_id for p in prompts] == ["i1|comparative|narrow_gen", "i1|comparative|broad_gen"]
    for prompt, gen in zip(prompts, ("narrow_gen", "broad_gen"), strict=True):
        sources = sorted({s.candidate.source for s in prompt.shown})
        assert sources == sorted(["reference", gen]) and len(prompt.shown) == 6  # 1 reference + K = 5
        assert [s.label for s in prompt.shown] == [f"Q{i}" for i in range(1, 7)]
        assert (
            prompt.labels == tuple(f"Q{i}" for i in range(1, 7))
            and prompt.labelled
            and not prompt.asks_preference
        )
        assert prompt.answer_tokens == load("novelty").answer_tokens(prompt.labels) > 160
        assert "narrow_gen" not in prompt.messages[1]["content"] or gen == "narrow_gen"
    again = comparative_prompts(inst, load("novelty"), 0)
    assert [[s.candidate.candidate_id for s in p.shown] for p in prompts] == [
        [s.candidate.candidate_id for s in p.shown] for p in again
    ]
    orders = {
        tuple(s.candidate.source == "reference" for s in p.shown)
        for p in comparative_prompts(inst, load("novelty"), 0) + comparative_prompts(inst, load("novelty"), 1)
    }
    assert len(orders) > 1  # the reference's place is drawn, not fixed
    k2 = comparative_prompts(inst, load("novelty"), 0, Comparative(k_per_source=2))
    assert [len(p.shown) for p in k2] == [3, 3]


def test_mode_from_config_names_the_class() -> None:
    mode = mode_from_config(ModeConfig("experiments.modes.comparative.Comparative", "comparative", 2))
    assert mode == Comparative(k_per_source=2)


def test_k_per_source() -> None:
    chosen = select_candidates(instance(), 2)
    assert [c.source for c in chosen] == ["reference", "narrow_gen", "narrow_gen", "broad_gen", "broad_gen"]


def test_comparative_answer_is_mapped_back_by_label() -> None:
    rubric = load("novelty")
    prompt = comparative_prompts(instance(1), rubric, 3, ComparativeAll())[0]
    scores = {s.label: i for i, s in enumerate(prompt.shown)}  # Q-label -> a distinct score 0..2
    raw = (
        "{"
        + ", ".join(
            f'"{lab}": {{"originality": {v}, "gap_addressing": 1, "non_obviousness": 1}}'
            for lab, v in scores.items()
        )
        + "}"
    )
    rows = rows_for(prompt, 0, result(raw), rubric, META)
    orig = {
        r["candidate_id"]: (r["score"], r["position"], r["label"])
        for r in rows
        if r["dimension"] == "originality"
    }
    for s in prompt.shown:
        assert orig[s.candidate.candidate_id] == (float(scores[s.label]), s.position, s.label)


def test_independent_rows_and_unscored_keeps_raw() -> None:
    rubric = load("novelty")
    prompts = build_prompts([instance(1)], rubric, Independent(), seed=0)
    assert len(prompts) == 3
    rows = rows_for(prompts[0], 2, result("I like it a lot"), rubric, META)
    assert len(rows) == 3 and all(not r["parse_ok"] and pd.isna(r["score"]) for r in rows)
    assert rows[0]["raw"] == "I like it a lot" and rows[0]["error"] == "no JSON object in the answer"
    assert rows[0]["sample_idx"] == 2 and rows[0]["position"] is None
    trunc = rows_for(prompts[0], 0, result('{"originality": 1', "length"), rubric, META)
    assert trunc[0]["error"].startswith("truncated (finish_reason=length)")


def test_provider_error_row() -> None:
    rubric = load("novelty")
    prompt = build_prompts([instance(1)], rubric, Independent(), seed=0)[0]
    rows = rows_for(
        prompt, 0, CallResult(None, False, 5, "provider: RateLimitError after 6 attempts"), rubric, META
    )
    assert (
        rows[0]["error"].startswith("provider: RateLimitError")
        and rows[0]["raw"] == ""
        and rows[0]["retries"] == 5
    )


def test_review_quality_adds_overall_mean() -> None:
    rubric = load("review_quality")
    prompt = build_prompts([instance(1)], rubric, Independent(), seed=0)[0]
    raw = '{"comprehensiveness": 8, "specificity": 6, "evidence_support": 5, "consistency": 9}'
    rows = {r["dimension"]: r["score"] for r in rows_for(prompt, 0, result(raw), rubric, META)}
    assert rows["overall"] == (8 + 6 + 5 + 9) / 4


def test_pairwise_both_orders_mapping_and_flip_detection() -> None:
    rubric = load("pairwise")
    prompts = pairwise_prompts(instance(1), rubric)
    assert [p.order for p in prompts] == ["ab", "ba", "ab", "ba"]
    ab, ba = prompts[0], prompts[1]
    assert ab.shown[0].candidate.candidate_id == ba.shown[1].candidate.candidate_id == "i1:narrow_gen:0"
    meta = {**META, "mode": "pairwise"}
    rows = rows_for(ab, 0, result('{"novelty": "a"}'), rubric, meta)  # candidate (shown A) preferred
    rows += rows_for(ba, 0, result('{"novelty": "b"}'), rubric, meta)  # candidate (shown B) preferred: same
    rows += rows_for(ab, 1, result('{"novelty": "a"}'), rubric, meta)  # candidate preferred ...
    rows += rows_for(ba, 1, result('{"novelty": "a"}'), rubric, meta)  # ... but reference when swapped: flip
    frame = to_frame(rows)
    assert list(frame["preference"]) == ["a", "a", "a", "b"]
    assert list(frame["candidate_id"].unique()) == ["i1:narrow_gen:0"]
    assert set(frame["other_id"]) == {"i1:ref"}
    assert list(frame["position"]) == [0, 1, 0, 1] and list(frame["label"]) == ["A", "B", "A", "B"]
    assert list(frame["inconsistent"]) == [False, False, True, True]
    assert list(frame.columns) == COLUMNS


def test_k_per_source_applies_to_every_mode() -> None:
    inst = instance(3)
    ind = build_prompts([inst], load("novelty"), Independent(k_per_source=1), seed=0)
    assert [p.shown[0].candidate.source for p in ind] == ["reference", "narrow_gen", "broad_gen"]
    pw = build_prompts([inst], load("pairwise"), Pairwise(k_per_source=1), seed=0)
    assert len(pw) == 4  # 2 candidates x 2 orders
