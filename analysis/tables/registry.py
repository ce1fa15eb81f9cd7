"""The table registry: every table of the report and the card declared once (`TableSpec`).

A declaration names the table's key (its `tables/<key>.csv`), its computation from the study's inputs, the
columns it always has (and the meaning of any the glossary lacks), the report section it appears in, an
optional figure, the headline of its folded summary line, an optional judge-card field, an optional
leaderboard column and its p-value column (joining the report's multiple-testing family). `compute_tables` runs the
declarations in order; the report's sections (`section_tables`), the card's fields (`card_specs`) and the
folded tables' headlines (`headlines`) are read from them, so a new statistic is its own module plus one
`register(TableSpec(...))` (the study's own tables are declared in `analysis.tables.declarations`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
from tqdm import tqdm

from analysis.load import modes
from analysis.robustness import unperturbed
from analysis.stats import humans as human_mod
from analysis.stats.study import study_candidates
from core.modes import ModeKind

if TYPE_CHECKING:  # matplotlib only when drawing
    from matplotlib.figure import Figure

Tables = dict[str, pd.DataFrame]
T = TypeVar("T")


@dataclass
class StudyInputs:
    """What every computation starts from, with the quantities several tables share computed once."""

    results: pd.DataFrame
    humans: pd.DataFrame | None = None
    reference: str = "reference"
    n_boot: int = 1000
    seed: int = 0
    families: Mapping[str, str] | None = None
    root: str | Path | None = None  # the run folder, for tables read from its files (request_changes)
    n_null: int = 0  # the card's null-range replicates (card-only tables)
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @cached_property
    def study(self) -> pd.DataFrame:
        """The unperturbed rows (perturbed rows belong to `analysis.robustness`)."""
        return unperturbed(self.results)

    @cached_property
    def cands(self) -> pd.DataFrame:
        """Candidate scores per prompt context, with the same-prompt reference (`study.study_candidates`)."""
        return study_candidates(self.results, self.reference)

    @cached_property
    def mode_kinds(self) -> dict[str, ModeKind]:
        """mode -> what it shows (analysis.load.modes): the tables of a mode are chosen by its kind."""
        return modes.kinds_by_mode(self.results)

    @property
    def has_humans(self) -> bool:
        return self.humans is not None and len(self.humans) > 0

    @cached_property
    def outcomes(self) -> pd.DataFrame:
        """Win / tie / loss per rater (judges and annotators) against the reference."""
        return human_mod.rater_outcomes(self.cands, self.humans, self.reference)

    def shared(self, name: str, compute: Callable[[], T]) -> T:
        """`compute()` once per study, for a computation that fills several tables (e.g. the latent fits)."""
        if name not in self._shared:
            self._shared[name] = compute()
        value: T = self._shared[name]
        return value


@dataclass(frozen=True)
class FigureSpec:
    """A figure shown in its table's section, saved as figures/<name>.png; `draw` may return None."""

    name: str
    draw: Callable[[Tables, StudyInputs], Figure | None]


@dataclass(frozen=True)
class CardField:
    """How a judge's card reads a table: its rows of that judge (`read` may reshape the table first), these
    columns, under `title`; `why_empty` goes to the card's notes when the judge has no row. `order` places
    the field among the card's fields."""

    title: str
    columns: tuple[str, ...]
    why_empty: str
    order: int
    read: Callable[[pd.DataFrame], pd.DataFrame] | None = None


@dataclass(frozen=True)
class TableSpec:
    """One table: `compute(inputs, tables so far)` returns it, or None where it does not apply (one judge,
    no humans, ...). `report=False`: a card-only table, computed for the cards and not written by the
    report. `place` orders the tables of one section (ties: declaration order)."""

    key: str
    compute: Callable[[StudyInputs, Tables], pd.DataFrame | None]
    columns: tuple[str, ...] = ()
    section: str | None = None
    place: int = 0
    figure: FigureSpec | None = None
    headline: tuple[str, str, str] | None = None  # (column, "max" / "min" / "absmax", what the number is)
    card: CardField | None = None
    leaderboard: Callable[[Tables], pd.DataFrame] | None = None  # judge + columns added to the leaderboard
    p_column: str | None = None  # its p-values join the report's multiple-testing family
    meanings: Mapping[str, str] | None = None  # glossary entries for columns `analysis.report.glossary` lacks
    report: bool = True


REGISTRY: list[TableSpec] = []


def register(spec: TableSpec, before: str | None = "leaderboard") -> TableSpec:
    """Declare a table, computed before `before` (default: before the leaderboard and the multiple-testing
    family, which read the others), or last when `before` is None or not declared."""
    if any(s.key == spec.key for s in REGISTRY):
        raise ValueError(f"table {spec.key!r} is declared twice")
    at = next((i for i, s in enumerate(REGISTRY) if s.key == before), len(REGISTRY))
    REGISTRY.insert(at, spec)
    return spec


def unregister(key: str) -> None:
    """Remove a declaration (for a plug-in or a test that declared one)."""
    REGISTRY[:] = [s for s in REGISTRY if s.key != key]


@contextmanager
def registered(spec: TableSpec, before: str | None = "leaderboard") -> Iterator[TableSpec]:
    """`register` for the duration of a block."""
    register(spec, before)
    try:
        yield spec
    finally:
        unregister(spec.key)


def spec(key: str) -> TableSpec:
    """The declaration of `key`."""
    for s in REGISTRY:
        if s.key == key:
            return s
    raise KeyError(f"no table {key!r} is declared")


def compute_tables(inputs: StudyInputs, report_only: bool = True) -> Tables:
    """Every declared table that applies, keyed by name, in declaration order; card-only tables too when
    `report_only` is False. On a terminal a progress bar on stderr names the table being computed (the cards
    and a large study's report take minutes); piped or redirected output stays silent (tqdm's disable=None)."""
    tables: Tables = {}
    specs = [s for s in REGISTRY if s.report or not report_only]
    bar = tqdm(specs, desc="tables", unit="table", disable=None, leave=False, file=sys.stderr)
    for s in bar:
        bar.set_postfix_str(s.key, refresh=True)
        table = s.compute(inputs, tables)
        if table is not None:
            tables[s.key] = table
    return tables


def draw_figures(tables: Tables, inputs: StudyInputs) -> dict[str, Figure | None]:
    """The figures of the tables present, keyed by figure name."""
    return {s.figure.name: s.figure.draw(tables, inputs) for s in REGISTRY if s.figure and s.key in tables}


def section_tables(title: str) -> tuple[str, ...]:
    """The tables shown in the report section `title`, in their order."""
    mine = [(s.place, i, s.key) for i, s in enumerate(REGISTRY) if s.section == title]
    return tuple(key for _, _, key in sorted(mine))


def section_figure(title: str) -> str | None:
    """The figure shown in the report section `title` (the first of its tables that has one)."""
    mine = sorted((s.place, i, s) for i, s in enumerate(REGISTRY) if s.section == title and s.figure)
    figure = mine[0][2].figure if mine else None
    return figure.name if figure else None


def headlines() -> dict[str, tuple[str, str, str]]:
    """table -> its folded summary line's headline (`TableSpec.headline`)."""
    return {s.key: s.headline for s in REGISTRY if s.headline}


def card_specs() -> list[TableSpec]:
    """The tables that are judge-card fields, in the card's order."""
    return sorted((s for s in REGISTRY if s.card), key=lambda s: s.card.order if s.card else 0)


def p_columns() -> dict[str, str]:
    """table -> its p-value column, for the tables that declare one (`TableSpec.p_column`)."""
    return {s.key: s.p_column for s in REGISTRY if s.p_column}


def meanings() -> dict[str, str]:
    """column -> its meaning, as the declarations give it (`TableSpec.meanings`)."""
    return {col: text for s in REGISTRY for col, text in (s.meanings or {}).items()}


def leaderboard_parts() -> list[Callable[[Tables], pd.DataFrame]]:
    """The leaderboard columns declared by tables (beside the leaderboard's own)."""
    return [s.leaderboard for s in REGISTRY if s.leaderboard]
