"""The types a table is declared with, low enough that every statistic's module can declare its own tables.

A statistic's module ends with its `TableSpec`s, beside the functions that compute them: the spec is the
table's handle (other modules import it and read a table with `SPEC.of(tables)`, never by a string key), and
it names the table's report section (`Section`, in the report's order), its figure, the headline of its
folded summary line, its judge-card field, its leaderboard columns, its p-value column (with its
multiple-testing family) and the meanings of its columns. `analysis.tables.registry` collects the specs and
computes them; the report, the card and the viewer read them from there. This module imports no statistic:
the study's inputs are a `Protocol` here (`analysis.tables.registry.StudyInputs` is the one that computes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol

import pandas as pd

from core.modes import ModeKind

Tables = dict[str, pd.DataFrame]


class Inputs(Protocol):
    """What every computation starts from (`analysis.tables.registry.StudyInputs`)."""

    results: pd.DataFrame
    humans: pd.DataFrame | None
    reference: str
    n_boot: int
    seed: int
    families: Mapping[str, str] | None
    root: str | Path | None
    n_null: int

    @property
    def study(self) -> pd.DataFrame: ...
    @property
    def cands(self) -> pd.DataFrame: ...
    @property
    def mode_kinds(self) -> dict[str, ModeKind]: ...
    @property
    def has_humans(self) -> bool: ...
    @property
    def outcomes(self) -> pd.DataFrame: ...
    def shared(self, name: str, compute: Callable[[], Any]) -> Any: ...


class Section(StrEnum):
    """The report's sections, in the report's order (their words: `analysis.report.sections`)."""

    leaderboard = "Judge leaderboard"
    humans = "Agreement with the experts"
    runs = "Runs"
    winrate = "Win / tie / loss against the reference"
    combined = "Judges combined"
    mode_shift = "Mode shift (the novelty illusion)"
    experts = "Experts vs judges"
    score_agreement = "Agreement on candidate scores"
    winners = "Agreement on winners"
    human_reliability = "Human reliability"
    alignment = "Cross-dimension alignment"
    latent = "Latent truth (Dawid–Skene, MACE, majority vote)"
    scores = "Score summaries"
    self_consistency = "Self-consistency"
    position = "Position and order bias"
    length = "Length bias"
    self_preference = "Self-preference"
    corrected = "Corrected estimates (prediction-powered)"
    calibration = "Calibration to the experts' scale"
    multiple_testing = "Multiple testing"


class Headline(NamedTuple):
    """A folded table's summary number: the row where `column` is largest (`max`), smallest (`min`) or
    furthest from 0 (`absmax`), named `words`."""

    column: str
    pick: Literal["max", "min", "absmax"]
    words: str


@dataclass(frozen=True)
class FigureSpec:
    """A figure shown in its table's section, saved as figures/<name>.png: `analysis.report.plots.<plot>`
    called with `args(tables, inputs)` (None: nothing to draw). Named, not imported: matplotlib and the
    report's plots stay above the statistics."""

    name: str
    plot: str
    args: Callable[[Tables, Inputs], tuple[Any, ...] | None]


@dataclass(frozen=True)
class CardField:
    """How a judge's card reads a table: its rows of that judge (`read` may reshape the table first), these
    columns, under `title`; `why_empty` goes to the card's notes when the judge has no row. `order` places
    the field among the card's fields (two fields of one order are refused when the second is declared)."""

    title: str
    columns: tuple[str, ...]
    why_empty: str
    order: int
    read: Callable[[pd.DataFrame], pd.DataFrame] | None = None


@dataclass(frozen=True)
class TableSpec:
    """One table, and its handle: `compute(inputs, tables so far)` returns it, or None where it does not apply
    (one judge, no humans, ...). `report=False`: a card-only table, computed for the cards and not written by
    the report. `place` orders the tables of one section (ties: declaration order). `leaderboard`: a frame of
    judge and the columns this table adds to the leaderboard. `p_column`: its p-values get BH q-values within
    `p_family` (None: a family of its own). `meanings`: the glossary's entries for its columns."""

    key: str
    compute: Callable[[Inputs, Tables], pd.DataFrame | None]
    columns: tuple[str, ...] = ()
    section: Section | None = None
    place: int = 0
    figure: FigureSpec | None = None
    headline: Headline | None = None
    card: CardField | None = None
    leaderboard: Callable[[Tables], pd.DataFrame] | None = None
    p_column: str | None = None
    p_family: str | None = None
    meanings: Mapping[str, str] | None = None
    report: bool = True
    reads_all: bool = False  # computed after every other table (the leaderboard, the multiple-testing family)

    def of(self, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame | None:
        """This table among `tables`, or None where it was not computed."""
        return tables.get(self.key)

    def need(self, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
        """This table among `tables` (a table computed before it, or one whose figure is drawn)."""
        return tables[self.key]

    def __str__(self) -> str:
        return self.key
