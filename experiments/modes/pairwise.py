"""Pairwise mode: each generated candidate against the reference, asked in both orders (flips = inconsistent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from core.modes import ModeKind
from experiments.datasets.instances import Instance
from experiments.modes import RENDERS, Labels, select_candidates
from experiments.prompt import Judged, Prompt, Shown, answer_tokens, render_shown
from judge.rubric import Rubric, RubricKind


@dataclass(frozen=True)
class Pairwise:
    name: str = "pairwise"
    k_per_source: int | None = None
    kind: ClassVar[ModeKind] = ModeKind.pair
    asks: ClassVar[RubricKind] = RubricKind.preference
    renders: ClassVar[frozenset[str]] = RENDERS

    def prompts(
        self, instance: Instance, rubric: Rubric, seed: int, labels: Labels | None = None
    ) -> list[Prompt]:
        """(A=candidate, B=reference) and swapped; the judged candidate's rows hold the preference."""
        if instance.reference is None:
            return []
        out = []
        ref = instance.reference
        for cand in select_candidates(instance, self.k_per_source)[1:]:
            for order, pair in (("ab", (cand, ref)), ("ba", (ref, cand))):
                shown = tuple(Shown(c, pos, "AB"[pos]) for pos, c in enumerate(pair))
                messages = render_shown(rubric, instance.background, shown, comparative=False)
                judged = Judged(shown[0], shown[1]) if order == "ab" else Judged(shown[1], shown[0])
                out.append(
                    Prompt(
                        f"{instance.instance_id}|{cand.candidate_id}|{ref.candidate_id}|{order}",
                        instance.instance_id,
                        messages,
                        shown,
                        self.name,
                        self.asks,
                        (judged,),
                        labelled=False,
                        answer_tokens=answer_tokens(rubric, None),
                        order=order,
                    )
                )
        return out
