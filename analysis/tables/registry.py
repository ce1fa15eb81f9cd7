"""The table registry: every declared table (`analysis.stats.spec.TableSpec`) collected, checked and computed.

Each statistic's module declares its tables beside the functions that compute them (the spec is the table's
handle); `analysis.tables.declarations` collects the study's own in compute order, and a plug-in calls
`register` with its own. `compute_tables` runs the declarations in order; the report's sections
(`section_tables`), the card's fields (`card_specs`), the leaderboard's columns (`leaderboard_parts`), the
multiple-testing families (`p_columns`, `p_families`), the glossary (`meanings`) and the folded tables'
headlines (`headlines`) are read from them. A declaration is checked when it is registered: a second table of
one key, an unknown report section or a card order already taken is refused in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd
from tqdm import tqdm

from analysis.stats import humans as human_mod
from analysis.stats import modes
from analysis.stats.spec import CardField, FigureSpec, Headline, Section, Tables, TableSpec
from analysis.stats.study import study_candidates, unperturbed
from core.modes import ModeKind

if TYPE_CHECKING:  # matplotlib only when drawing
    from matplotlib.figure import Figure

__all__ = ["CardField", "FigureSpec", "Headline", "Section", "StudyInputs", "TableSpec", "Tables", "register"]
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
        """Candidate scores per prompt context, with the same-prompt reference (`study.study_candidates`), or
        the candidate table given as `shared("cands")` (`analysis.tables.combined.winrate_tables`)."""
        given: pd.DataFrame | None = self._shared.get("cands")
        return given if given is not None else study_candidates(self.results, self.reference)

    @cached_property
    def mode_kinds(self) -> dict[str, ModeKind]:
        """mode -> what it shows (analysis.stats.modes): the tables of a mode are chosen by its kind."""
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


REGISTRY: list[TableSpec] = []


def _checked(spec: TableSpec) -> TableSpec:
    """`spec`, or one line saying what is wrong with it: a key declared twice, a section the report does not
    have, a card order another field holds."""
    if any(s.key == spec.key for s in REGISTRY):
        raise ValueError(f"table {spec.key!r} is declared twice")
    if spec.section is not None and not isinstance(spec.section, Section):
        known = "; ".join(s.value for s in Section)
        raise ValueError(
            f"table {spec.key!r}: unknown report section {spec.section!r} (the sections: {known})"
        )
    if spec.card is not None:
        taken = next((s.key for s in REGISTRY if s.card and s.card.order == spec.card.order), None)
        if taken is not None:
            raise ValueError(
                f"table {spec.key!r}: card order {spec.card.order} is already the place of {taken!r}'s field"
            )
    return spec


def register(spec: TableSpec, last: bool = False) -> TableSpec:
    """Declare a table, computed before the tables that read every other one (the leaderboard and the
    multiple-testing family, `TableSpec.reads_all`), or after every declared table when `last`."""
    _checked(spec)
    at = len(REGISTRY) if last else next((i for i, s in enumerate(REGISTRY) if s.reads_all), len(REGISTRY))
    REGISTRY.insert(at, spec)
    return spec


def unregister(spec: TableSpec) -> None:
    """Remove a declaration (for a plug-in or a test that declared one)."""
    REGISTRY[:] = [s for s in REGISTRY if s.key != spec.key]


@contextmanager
def registered(spec: TableSpec) -> Iterator[TableSpec]:
    """`register` for the duration of a block."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec)


def spec(key: str) -> TableSpec:
    """The declaration of the table written as `tables/<key>.csv` (a reader of the written files, which knows
    only its name)."""
    for s in REGISTRY:
        if s.key == key:
            return s
    raise KeyError(f"no table {key!r} is declared")


def compute_tables(
    inputs: StudyInputs, report_only: bool = True, keys: Collection[str] | None = None
) -> Tables:
    """Every declared table that applies, keyed by name, in declaration order; card-only tables too when
    `report_only` is False; only the declarations named in `keys` when given (the cards: the tables they read,
    `analysis.card.build.card_tables`). On a terminal a progress bar on stderr names the table being computed (the cards
    and a large study's report take minutes); piped or redirected output stays silent (tqdm's disable=None)."""
    tables: Tables = {}
    specs = [s for s in REGISTRY if (s.report or not report_only) and (keys is None or s.key in keys)]
    bar = tqdm(specs, desc="tables", unit="table", disable=None, leave=False, file=sys.stderr)
    for s in bar:
        bar.set_postfix_str(s.key, refresh=True)
        table = s.compute(inputs, tables)
        if table is not None:
            tables[s.key] = table
    return tables


def draw_figures(tables: Tables, inputs: StudyInputs, plots: object) -> dict[str, Figure | None]:
    """The figures of the tables present, keyed by figure name: each `FigureSpec.plot` of the module `plots`
    (`analysis.report.plots`, passed by the report so that the registry stays below it)."""
    out: dict[str, Figure | None] = {}
    for s in REGISTRY:
        if s.figure and s.key in tables:
            args = s.figure.args(tables, inputs)
            out[s.figure.name] = None if args is None else getattr(plots, s.figure.plot)(*args)
    return out


def section_tables(section: Section) -> tuple[str, ...]:
    """The tables shown in the report section `section`, in their order."""
    mine = [(s.place, i, s.key) for i, s in enumerate(REGISTRY) if s.section is section]
    return tuple(key for _, _, key in sorted(mine))


def section_figure(section: Section) -> str | None:
    """The figure shown in the report section `section` (the first of its tables that has one)."""
    mine = sorted((s.place, i, s) for i, s in enumerate(REGISTRY) if s.section is section and s.figure)
    figure = mine[0][2].figure if mine else None
    return figure.name if figure else None


def headlines() -> dict[str, Headline]:
    """table -> its folded summary line's headline (`TableSpec.headline`)."""
    return {s.key: s.headline for s in REGISTRY if s.headline}


def card_specs() -> list[TableSpec]:
    """The tables that are judge-card fields, in the card's order."""
    return sorted((s for s in REGISTRY if s.card), key=lambda s: s.card.order if s.card else 0)


def p_columns() -> dict[str, str]:
    """table -> its p-value column, for the tables that declare one (`TableSpec.p_column`)."""
    return {s.key: s.p_column for s in REGISTRY if s.p_column}


def p_families() -> dict[str, str]:
    """table -> the multiple-testing family of its p-values, where declared (`TableSpec.p_family`)."""
    return {s.key: s.p_family for s in REGISTRY if s.p_column and s.p_family}


def meanings() -> dict[str, str]:
    """column -> its meaning, as the declarations give it (`TableSpec.meanings`; the first declaration of a
    column gives its meaning)."""
    out: dict[str, str] = {}
    for s in REGISTRY:
        for col, text in (s.meanings or {}).items():
            out.setdefault(col, text)
    return out


def leaderboard_parts() -> list[Callable[[Tables], pd.DataFrame]]:
    """The leaderboard columns declared by tables, in declaration order."""
    return [s.leaderboard for s in REGISTRY if s.leaderboard]
