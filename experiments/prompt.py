"""A prompt that says what it shows and what it asks: the study and the row builder read it, not mode names."""

from __future__ import annotations

from dataclasses import dataclass

from experiments.datasets.instances import Candidate
from judge.rubric import RubricKind


@dataclass(frozen=True)
class Shown:
    """A candidate as the judge saw it: its place in the prompt and its neutral label."""

    candidate: Candidate
    position: int | None
    label: str | None


@dataclass(frozen=True)
class Judged:
    """One text that gets rows from the answer, and (pairwise) the text it was compared with."""

    shown: Shown
    against: Shown | None = None


@dataclass(frozen=True)
class Prompt:
    """One prompt of a study: the messages sent and everything needed to read the answer back.

    `labelled`: the answer holds one entry per shown label (else one object for the whole prompt);
    `asks`: scores per dimension or a preference; `judged`: the texts that get rows; `answer_tokens`: the
    output budget a complete answer needs (the study's max_tokens when that is not set)."""

    prompt_id: str
    instance_id: str
    messages: list[dict[str, str]]
    shown: tuple[Shown, ...]
    mode: str
    asks: RubricKind
    judged: tuple[Judged, ...]
    labelled: bool
    answer_tokens: int
    order: str | None = None  # pairwise: "ab" when the judged candidate was shown first, else "ba"

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The labels the answer is keyed by (None: one object for the whole prompt)."""
        return tuple(s.label or "" for s in self.shown) if self.labelled else None

    @property
    def asks_preference(self) -> bool:
        return self.asks is RubricKind.preference


def items(shown: tuple[Shown, ...]) -> list[dict[str, str]]:
    """What a template's `items` variable holds: each shown text under its label."""
    return [{"label": s.label or "", "text": s.candidate.text} for s in shown]
