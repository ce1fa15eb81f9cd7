"""Comparative mode as the RQ-Bench paper defines it, and the all-generators variant.

`Comparative`: one prompt per (instance, generator) holding the author-anchored reference and that generator's
K candidates (6 items for K = 5), in a seeded random order under neutral labels Q1..Qn. `ComparativeAll`
(conf/mode/comparative_all.yaml): one prompt per instance with the reference and every generator's candidates.
The order and labels are stored per row; the output budget grows with the number of items shown.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from core.modes import ModeKind
from experiments.datasets.instances import Candidate, Instance
from experiments.modes import RENDERS, Labels, select_candidates
from experiments.prompt import Judged, Prompt, Shown, answer_tokens, render_shown
from judge.rubric import Rubric, RubricKind


@dataclass(frozen=True)
class Comparative:
    name: str = "comparative"
    k_per_source: int | None = None
    kind: ClassVar[ModeKind] = ModeKind.multi
    asks: ClassVar[RubricKind] = RubricKind.scores
    renders: ClassVar[frozenset[str]] = RENDERS

    def groups(self, instance: Instance) -> list[tuple[str, list[Candidate]]]:
        """(prompt suffix, texts) per prompt: the reference with each generator's candidates in turn."""
        chosen = select_candidates(instance, self.k_per_source)
        ref = [c for c in chosen if c is instance.reference]
        generated = [c for c in chosen if c is not instance.reference]
        sources = list(dict.fromkeys(c.source for c in generated))
        if not sources:
            return [("comparative", ref)] if ref else []
        return [(f"comparative|{src}", ref + [c for c in generated if c.source == src]) for src in sources]

    def prompts(
        self, instance: Instance, rubric: Rubric, seed: int, labels: Labels | None = None
    ) -> list[Prompt]:
        """The order is drawn from (seed, instance, prompt) so reruns show the same order; `labels(pos, n)`
        names the positions (default Q1..Qn)."""
        name = labels or (lambda pos, n: f"Q{pos + 1}")
        out = []
        for suffix, cands in self.groups(instance):
            order = list(cands)
            random.Random(f"{seed}:{instance.instance_id}" + suffix.removeprefix("comparative")).shuffle(
                order
            )
            shown = tuple(Shown(c, pos, name(pos, len(order))) for pos, c in enumerate(order))
            messages = render_shown(rubric, instance.background, shown, comparative=True)
            shown_labels = [s.label or "" for s in shown]
            out.append(
                Prompt(
                    f"{instance.instance_id}|{suffix}",
                    instance.instance_id,
                    messages,
                    shown,
                    self.name,
                    self.asks,
                    tuple(Judged(s) for s in shown),
                    labelled=True,
                    answer_tokens=answer_tokens(rubric, shown_labels),
                )
            )
        return out


@dataclass(frozen=True)
class ComparativeAll(Comparative):
    """Every generator's candidates with the reference in one prompt (not the paper's setting)."""

    name: str = "comparative_all"

    def groups(self, instance: Instance) -> list[tuple[str, list[Candidate]]]:
        chosen = select_candidates(instance, self.k_per_source)
        return [("comparative", chosen)] if chosen else []
