"""A prompt that says what it shows and what it asks: the study and the row builder read it, not mode names."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.datasets.instances import Candidate, Paper
from judge.rubric import Rubric, RubricKind, neutralise
from judge.shapes import PromptShapes


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


# per rubric (by identity): its prompt shapes' skeletons, for the study being built (build_prompts resets them)
_SHAPES: dict[int, tuple[Rubric, PromptShapes]] = {}


def shapes_of(rubric: Rubric) -> PromptShapes:
    """The rubric's prompt-shape renderer (judge.shapes), made on first use."""
    known = _SHAPES.get(id(rubric))
    if known is None or known[0] is not rubric:
        known = _SHAPES[id(rubric)] = (rubric, PromptShapes(rubric.render, neutralise))
    return known[1]


def forget_shapes() -> None:
    """Drop every rubric's skeletons (a new study; or, after a broken one, render in full)."""
    _SHAPES.clear()
    _BUDGETS.clear()


_BUDGETS: dict[tuple[int, tuple[str, ...] | None], tuple[Rubric, int]] = {}


def answer_tokens(rubric: Rubric, labels: Sequence[str] | None) -> int:
    """`rubric.answer_tokens(labels)`, once per rubric and labels (it serialises an example answer)."""
    key = (id(rubric), None if labels is None else tuple(labels))
    known = _BUDGETS.get(key)
    if known is None or known[0] is not rubric:
        known = _BUDGETS[key] = (rubric, rubric.answer_tokens(labels))
    return known[1]


def render_shown(
    rubric: Rubric,
    background: Sequence[Paper],
    shown: tuple[Shown, ...],
    comparative: bool,
    *,
    full: bool = False,
) -> list[dict[str, str]]:
    """`rubric.render(background=..., items=items(shown), comparative=...)`, from the skeleton of its shape
    (the labels, the number of papers, comparative or not) unless `full`: the texts are the papers' titles and
    texts and the shown candidates' texts."""
    labels = tuple(s.label or "" for s in shown)
    n_papers = len(background)

    def build(texts: Sequence[str]) -> dict[str, Any]:
        papers = tuple(Paper(texts[2 * i], texts[2 * i + 1]) for i in range(n_papers))
        shown_items = [
            {"label": label, "text": t} for label, t in zip(labels, texts[2 * n_papers :], strict=True)
        ]
        return {"background": papers, "items": shown_items, "comparative": comparative}

    texts = [t for p in background for t in (p.title, p.text)] + [s.candidate.text for s in shown]
    if full:
        return rubric.render(**build(texts))
    return shapes_of(rubric).render((comparative, labels, n_papers), texts, build)
