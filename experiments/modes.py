"""Study modes: which prompts a study sends for one instance, and where each candidate was shown.

independent = one prompt per candidate; comparative = the reference and K candidates in one prompt, in a
seeded random order under neutral labels; pairwise = every (candidate, reference) pair in both orders.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from experiments.datasets import Candidate, Instance
from judge.rubric import Rubric

MODES = ("independent", "comparative", "pairwise")


@dataclass(frozen=True)
class Shown:
    """A candidate as the judge saw it: its place in the prompt and its neutral label."""

    candidate: Candidate
    position: int | None
    label: str | None


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    instance_id: str
    messages: list[dict[str, str]]
    shown: tuple[Shown, ...]
    mode: str
    order: str | None = None  # pairwise: "ab" when the judged candidate was shown first, else "ba"


def _items(shown: Sequence[Shown]) -> list[dict[str, str]]:
    return [{"label": s.label or "", "text": s.candidate.text} for s in shown]


def independent_prompts(instance: Instance, rubric: Rubric, k_per_source: int | None = None) -> list[Prompt]:
    """One prompt per candidate (the reference included), judged alone against the background."""
    prompts = []
    for cand in select_candidates(instance, k_per_source):
        shown = (Shown(cand, None, None),)
        messages = rubric.render(background=instance.background, items=_items(shown), comparative=False)
        prompt_id = f"{instance.instance_id}|{cand.candidate_id}"
        prompts.append(Prompt(prompt_id, instance.instance_id, messages, shown, "independent"))
    return prompts


def select_candidates(instance: Instance, k_per_source: int | None) -> list[Candidate]:
    """The reference plus the first K candidates of every generator (all of them when K is None).

    Every mode uses the same selection, so independent and comparative results cover the same candidates.
    """
    chosen: list[Candidate] = [instance.reference] if instance.reference else []
    taken: dict[str, int] = {}
    for cand in instance.candidates:
        if k_per_source is None or taken.get(cand.source, 0) < k_per_source:
            chosen.append(cand)
            taken[cand.source] = taken.get(cand.source, 0) + 1
    return chosen


def comparative_prompts(
    instance: Instance,
    rubric: Rubric,
    *,
    seed: int,
    k_per_source: int | None = None,
    labels: Callable[[int, int], str] | None = None,
) -> list[Prompt]:
    """One prompt per instance; the order is drawn from (seed, instance_id) so reruns show the same order.
    `labels(position, n)` names each position (default Q1..Qn; experiment=robustness permutes them)."""
    cands = select_candidates(instance, k_per_source)
    random.Random(f"{seed}:{instance.instance_id}").shuffle(cands)
    name = labels or (lambda pos, n: f"Q{pos + 1}")
    shown = tuple(Shown(c, pos, name(pos, len(cands))) for pos, c in enumerate(cands))
    messages = rubric.render(background=instance.background, items=_items(shown), comparative=True)
    prompt_id = f"{instance.instance_id}|comparative"
    return [Prompt(prompt_id, instance.instance_id, messages, shown, "comparative")]


def pairwise_prompts(instance: Instance, rubric: Rubric, k_per_source: int | None = None) -> list[Prompt]:
    """Each generated candidate against the reference, asked as (A=candidate, B=reference) and swapped."""
    if instance.reference is None:
        return []
    prompts = []
    ref = instance.reference
    for cand in select_candidates(instance, k_per_source)[1:]:
        for order, pair in (("ab", (cand, ref)), ("ba", (ref, cand))):
            shown = tuple(Shown(c, pos, "AB"[pos]) for pos, c in enumerate(pair))
            messages = rubric.render(background=instance.background, items=_items(shown), comparative=False)
            prompt_id = f"{instance.instance_id}|{cand.candidate_id}|{ref.candidate_id}|{order}"
            prompts.append(Prompt(prompt_id, instance.instance_id, messages, shown, "pairwise", order))
    return prompts


def build_prompts(
    instances: Sequence[Instance],
    rubric: Rubric,
    mode: str,
    *,
    seed: int,
    k_per_source: int | None,
    labels: Callable[[int, int], str] | None = None,
) -> list[Prompt]:
    """All prompts of a study, in dataset order."""
    if mode not in MODES:
        raise ValueError(f"mode: unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    prompts: list[Prompt] = []
    for inst in instances:
        if mode == "independent":
            prompts += independent_prompts(inst, rubric, k_per_source)
        elif mode == "comparative":
            prompts += comparative_prompts(inst, rubric, seed=seed, k_per_source=k_per_source, labels=labels)
        else:
            prompts += pairwise_prompts(inst, rubric, k_per_source)
    return prompts
