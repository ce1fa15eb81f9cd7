"""The instance types every dataset loader produces (their own module, so loaders import no loader)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """One background passage (an abstract, a section, or a paper's introduction)."""

    title: str
    text: str


@dataclass(frozen=True)
class Candidate:
    """One text to judge; ``source`` is ``reference``, a generator name, or ``human``."""

    candidate_id: str
    source: str
    text: str


@dataclass(frozen=True)
class HumanLabel:
    """One annotator's score for one candidate on one rubric dimension."""

    annotator: str
    candidate_id: str
    dimension: str
    score: float


@dataclass(frozen=True)
class Instance:
    """One target paper's context: background, optional reference, generated candidates, labels."""

    instance_id: str
    field: str
    background: tuple[Paper, ...]
    reference: Candidate | None
    candidates: tuple[Candidate, ...]
    human_labels: tuple[HumanLabel, ...] = ()

    def all_candidates(self) -> tuple[Candidate, ...]:
        """Reference first (if any), then the generated candidates: the order modes show them in."""
        return ((self.reference,) if self.reference is not None else ()) + self.candidates
