"""Study modes: which prompts a study sends for one instance. Each mode is one module here plus one YAML in
conf/mode/ naming its class (`_target_`); the prompts it builds describe themselves (experiments.prompt).

independent = one prompt per candidate; comparative = per generator, the reference and that generator's K
candidates in one prompt (the paper's setting); comparative_all = the reference and every generator's
candidates in one prompt; pairwise = every (candidate, reference) pair in both orders.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol

from core.modes import ModeKind
from experiments.config import ModeConfig
from experiments.datasets.instances import Candidate, Instance
from experiments.prompt import Prompt, shapes_of
from judge.rubric import Rubric, RubricKind

# names a multi-item prompt's positions: labels(position, n) (default Q1..Qn; experiment=robustness permutes them)
Labels = Callable[[int, int], str]
# the template variables every shipped mode renders (a rubric whose template needs others cannot run in it)
RENDERS = frozenset({"background", "items", "comparative"})


class Mode(Protocol):
    """What a study needs from a mode: its name (for the table), what it shows (`kind`: the analysis chooses
    its tables by it), what it asks and renders, its prompts."""

    name: str
    k_per_source: int | None
    kind: ClassVar[ModeKind]
    asks: ClassVar[RubricKind]
    renders: ClassVar[frozenset[str]]

    def prompts(
        self, instance: Instance, rubric: Rubric, seed: int, labels: Labels | None = None
    ) -> list[Prompt]: ...


class ModeError(ValueError):
    """A mode config that names no usable mode class (one line)."""


def mode_from_config(mode: ModeConfig) -> Mode:
    """The mode a `mode:` config names through `_target_`."""
    module_name, _, class_name = mode._target_.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError):
        raise ModeError(f"mode._target_={mode._target_!r}: no such mode class") from None
    if not isinstance(getattr(cls, "kind", None), ModeKind):
        raise ModeError(
            f"mode._target_={mode._target_!r}: the class declares no `kind` "
            f"(one of {', '.join(k.value for k in ModeKind)}: what its prompts show)"
        )
    return cls(name=mode.name, k_per_source=mode.k_per_source)  # type: ignore[no-any-return]


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


def build_prompts(
    instances: Sequence[Instance], rubric: Rubric, mode: Mode, *, seed: int, labels: Labels | None = None
) -> list[Prompt]:
    """All prompts of a study, in dataset order; rendered once per prompt shape (experiments.prompt), or all
    in full again if a shape's skeleton ever gave another prompt than the full render."""
    was_broken = shapes_of(rubric).broken
    prompts = [prompt for inst in instances for prompt in mode.prompts(inst, rubric, seed, labels)]
    if (
        shapes_of(rubric).broken and not was_broken
    ):  # every later prompt renders in full: render the earlier ones again too
        prompts = [prompt for inst in instances for prompt in mode.prompts(inst, rubric, seed, labels)]
    return prompts
