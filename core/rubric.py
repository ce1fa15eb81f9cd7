"""The rubric model: what a judge is asked (dimensions, ranges, direction, wording), as data.

One model everywhere: a rubric YAML (conf/rubric/<name>.yaml) composes into it, a run's config.json reads back
into it (core.run_config), and judge.rubric.Rubric is this spec plus its prompt (a subclass that adds no
field). The analysis reads ranges, choices and directions here, never from a dict of its own. Only the
standard library: every layer may import it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Self

#: "overall": the mean of a rubric's scored dimensions, added per sample where the rubric asks (add_overall)
OVERALL = "overall"


class RubricKind(enum.Enum):
    """What a rubric asks the judge for: scores per dimension, a preference between two texts, or a match."""

    scores = "scores"
    preference = "preference"
    match = "match"


@dataclass(frozen=True)
class Dimension:
    """One thing the judge rates: a score in [low, high] or a choice among `choices` (a rubric YAML's
    `dimensions:` item). `description` says what it asks and `anchors` what each score means (score -> text,
    in the order the prompt shows them): the templates write both from here, so a rubric's prose lives in its
    YAML only. `anchors` is left out of the repr (and so of the rubric's version, which hashes the prose once,
    as the prompt shows it: judge.rubric)."""

    name: str
    description: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    higher_is_better: bool = True
    anchors: dict[int, str] = field(default_factory=dict, repr=False, hash=False)

    def __post_init__(self) -> None:
        # a composed config hands a list: a tuple keeps the rubric hashable and its `version` (a repr) stable
        object.__setattr__(self, "choices", tuple(str(c) for c in self.choices))
        object.__setattr__(self, "anchors", {int(k): str(v) for k, v in dict(self.anchors).items()})

    @property
    def scored(self) -> bool:
        """A score in a range (not a choice)."""
        return self.low is not None and self.high is not None

    def wording(self) -> str:
        """What an annotator is told about this dimension: its line and its anchors, as the judge reads them."""
        head = f"{self.name} - {self.description}" if self.description else self.name
        return "\n".join([head, *(f"{k}: {v}" for k, v in self.anchors.items())])


@dataclass(frozen=True, kw_only=True)
class RubricSpec:
    """A rubric spec (conf/rubric/<name>.yaml): its template, what it asks for and its dimensions."""

    name: str
    template: str
    kind: RubricKind = RubricKind.scores
    system: str
    dimensions: tuple[Dimension, ...] = ()
    add_overall: bool = False  # EchoReview: also report the mean of the dimensions as "overall"
    item_noun: str = "QUESTION"  # how the template names what is judged (pairwise / comparative)
    rationale: bool = False  # the judge writes a short rationale before its scores (stored, never scored)

    def __post_init__(self) -> None:
        # a composed config hands lists (and a mapping's kind may be its name): tuples keep `version` stable
        object.__setattr__(self, "kind", RubricKind(getattr(self.kind, "value", self.kind)))
        object.__setattr__(self, "dimensions", tuple(self.dimensions))

    @property
    def dimension_names(self) -> list[str]:
        """The dimensions a results row may name, "overall" included where the rubric adds it."""
        return [d.name for d in self.dimensions] + ([OVERALL] if self.add_overall else [])

    def directions(self) -> dict[str, bool]:
        """Dimension -> higher_is_better ("overall", the mean, points up)."""
        out = {d.name: d.higher_is_better for d in self.dimensions}
        if self.add_overall:
            out[OVERALL] = True
        return out

    def bounds(self) -> dict[str, tuple[float, float]]:
        """Dimension -> (low, high) of its scores (NaN for a choice); "overall" spans the dimensions' ranges."""
        out = {
            d.name: (float(d.low), float(d.high))
            if d.low is not None and d.high is not None
            else (math.nan, math.nan)
            for d in self.dimensions
        }
        if self.add_overall:
            out[OVERALL] = (min(low for low, _ in out.values()), max(high for _, high in out.values()))
        return out

    def ranges(self) -> dict[str, tuple[float, float]]:
        """The scored dimensions' (low, high), "overall" included where the rubric adds it."""
        return {k: v for k, v in self.bounds().items() if not math.isnan(v[0])}

    def choices(self) -> dict[str, tuple[str, ...]]:
        """Dimension -> its choices, for the dimensions that are a choice."""
        return {d.name: d.choices for d in self.dimensions if d.choices}

    def in_order(self, names: Sequence[str]) -> Self:
        """This rubric with its dimensions in the order `names` gives (a mode that shows them reordered): the
        prompt writes their prose and its answer format in that order, under a version of its own."""
        by_name = {d.name: d for d in self.dimensions}
        if sorted(names) != sorted(by_name):
            raise ValueError(
                f"rubric {self.name}: an order must name each of {', '.join(by_name)} once, got {', '.join(names)}"
            )
        return replace(self, dimensions=tuple(by_name[n] for n in names))


def spec_from_mapping(data: Mapping[str, Any], cls: type[RubricSpec] = RubricSpec) -> RubricSpec:
    """A rubric from plain data (a rubric YAML or a config.json entry); what it leaves out takes the dataclass's
    own defaults, so a default lives in one place. KeyError / TypeError / ValueError when it is not one."""
    dims = tuple(Dimension(**d) for d in data.get("dimensions") or ())
    return cls(**{**data, "dimensions": dims})
