"""Independent mode: one prompt per candidate (the reference included), judged alone against the background."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.modes import ModeKind
from experiments.datasets.instances import Instance
from experiments.modes import RENDERS, Labels, select_candidates
from experiments.prompt import Judged, Prompt, Shown, answer_tokens, render_shown
from judge.rubric import Rubric, RubricKind


@dataclass(frozen=True)
class Independent:
    name: str = "independent"
    k_per_source: int | None = None
    kind: ClassVar[ModeKind] = ModeKind.single
    asks: ClassVar[RubricKind] = RubricKind.scores
    renders: ClassVar[frozenset[str]] = RENDERS

    def prompts(
        self, instance: Instance, rubric: Rubric, seed: int, labels: Labels | None = None
    ) -> list[Prompt]:
        out = []
        for cand in select_candidates(instance, self.k_per_source):
            shown = (Shown(cand, None, None),)
            messages = render_shown(rubric, instance.background, shown, comparative=False)
            out.append(
                Prompt(
                    f"{instance.instance_id}|{cand.candidate_id}",
                    instance.instance_id,
                    messages,
                    shown,
                    self.name,
                    self.asks,
                    (Judged(shown[0]),),
                    labelled=False,
                    answer_tokens=answer_tokens(rubric, None),
                )
            )
        return out
