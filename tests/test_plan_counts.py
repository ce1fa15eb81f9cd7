"""The plan's prompt-token counts (issue 35, item 5): litellm's fixed counts taken once per message layout and
its text count per message, checked against litellm's whole count as the plan goes; the plan stays the one
litellm's per-prompt counts give (plan.json byte for byte)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments import plan
from experiments.config import StudyConfig, load
from experiments.inputs import load_study_inputs
from experiments.modes import build_prompts
from experiments.prompt import Prompt
from judge.spend import pricing
from judge.spend.pricing import PromptCounter, prompt_tokens, prompts_counted
from judge.types import Message
from tests.support.configs import compose
from tests.support.studies import typed


def sample_prompts(mode: str) -> tuple[str, list[Prompt]]:
    """The shipped sample's prompts in one mode, and the qwen judge's model."""
    rubric = "pairwise" if mode == "pairwise" else "novelty"
    cfg: StudyConfig = load(OmegaConf.create(compose(f"rubric={rubric}", f"mode={mode}", "judge=qwen")))
    inputs = load_study_inputs(cfg)
    assert inputs.mode is not None
    return cfg.judge.model, build_prompts(inputs.instances, inputs.rubric, inputs.mode, seed=0)


@pytest.mark.parametrize("mode", ["independent", "comparative", "pairwise"])
@pytest.mark.parametrize("model", ["sample's judge", "gpt-4o"])
def test_counts_from_texts_are_litellms_whole_counts(
    mode: str, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known value: litellm's `token_counter` on each whole prompt. No check in between (CHECK_EVERY past the
    end), so every prompt after the first of its layout is counted from its texts alone."""
    judge_model, prompts = sample_prompts(mode)
    model = judge_model if model == "sample's judge" else model
    monkeypatch.setattr(pricing, "CHECK_EVERY", 10**9)
    whole = [prompt_tokens(model, p.messages) for p in prompts]
    with prompts_counted(model) as counter:
        counted = [counter(p.messages) for p in prompts]
    assert counter.exact and counted == whole and len(set(whole)) > 1
    # a system message, a name and several layouts in one plan: each layout's fixed count of its own
    system: list[list[Message]] = [
        [{"role": "system", "content": "Grade it."}, {"role": "user", "content": p.messages[-1]["content"]}]
        for p in prompts[:3]
    ]
    named: list[list[Message]] = [
        [{"role": "user", "content": f"text {i}", "name": "grader"}] for i in range(3)
    ]
    layouts = system + named
    with prompts_counted(model) as counter:
        assert [counter(m) for m in layouts] == [prompt_tokens(model, m) for m in layouts]


def test_a_count_that_differs_from_litellms_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted: a text count one token off for some texts. The check of every CHECK_EVERY-th prompt finds it,
    the counter says so (`exact` false) and counts every later prompt whole."""
    model, prompts = sample_prompts("independent")
    monkeypatch.setattr(pricing, "CHECK_EVERY", 2)
    counter = PromptCounter(model)
    true_count = counter._text
    counter._text = lambda text: true_count(text) + (counter._counted > 1)  # right for the first prompt only
    first = counter(prompts[0].messages)
    assert first == prompt_tokens(model, prompts[0].messages) and counter.exact
    assert counter(prompts[1].messages) == prompt_tokens(model, prompts[1].messages)  # the check
    assert not counter.exact
    assert [counter(p.messages) for p in prompts[2:6]] == [
        prompt_tokens(model, p.messages) for p in prompts[2:6]
    ]


def _plan_json(tmp_path: Path, mode: str) -> str:
    cfg = compose(
        "judge=qwen", "judge.api_base=http://127.0.0.1:9/v1", "limit=3", f"mode={mode}", "plan=true"
    )
    cfg["cache_dir"] = str(tmp_path / "cache")
    return json.dumps(plan.plan_study(typed(cfg), load_study_inputs(typed(cfg))), indent=2)


@pytest.mark.parametrize("mode", ["independent", "comparative"])
def test_plan_json_is_the_one_litellms_whole_counts_give(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """plan.json byte for byte as main wrote it (every prompt counted by litellm whole), and the same when a
    planted difference sends the plan back to litellm's whole counts half-way."""
    fast = _plan_json(tmp_path, mode)

    @contextlib.contextmanager
    def whole(model: str) -> Iterator[PromptCounter]:
        counter = PromptCounter(model)
        counter._text = None  # every prompt by litellm.token_counter: main's plan
        yield counter

    monkeypatch.setattr(plan, "prompts_counted", whole)
    assert _plan_json(tmp_path, mode) == fast and json.loads(fast)["prompt_tokens"] > 0

    @contextlib.contextmanager
    def off_by_one(model: str) -> Iterator[PromptCounter]:
        counter = PromptCounter(model)
        true_count = counter._text
        counter._text = lambda text: true_count(text) + (counter._counted > 1)
        yield counter

    monkeypatch.setattr(plan, "prompts_counted", off_by_one)
    monkeypatch.setattr(pricing, "CHECK_EVERY", 2)
    assert _plan_json(tmp_path, mode) == fast
