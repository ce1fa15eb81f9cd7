"""The study's tables, collected in compute order: each is declared (`analysis.stats.spec.TableSpec`) at the
bottom of the module whose function computes it, and imported here as a handle, never named by a string.

The order is the order `analysis.tables.registry.compute_tables` runs them (a table may read the ones before
it; the leaderboard and the multiple-testing family read them all) and, within a report section, the order
its tables are shown in (ties of `TableSpec.place`). Importing this module registers them; the report, the
paper tables and the card import the registry's readers from here so that they see every declaration.

What each table's statistics are, their formulas, assumptions and references: see docs/statistics.md (a new
table is described there too; tests/test_statistics_doc.py checks it).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from analysis import stats
from analysis.latent import (
    LATENT_COMPETENCE,
    LATENT_CONFUSION,
    LATENT_DUPLICATES,
    LATENT_POSTERIORS,
    LATENT_WINRATE,
)
from analysis.load.provider_params import REQUEST_CHANGES
from analysis.robustness import ROBUSTNESS
from analysis.stats.calibration import CALIBRATION, CALIBRATION_BINS
from analysis.stats.consistency import (
    LENGTH_BIAS,
    PAIRWISE_BIAS,
    POSITION_BIAS,
    SELF_CONSISTENCY,
    SELF_PREFERENCE,
)
from analysis.stats.corrected import CORRECTED_DESIGN, CORRECTED_ESTIMATES
from analysis.stats.humans import HUMAN_AGREEMENT, HUMAN_MAJORITY, HUMAN_RELIABILITY, HUMAN_UNMATCHED
from analysis.stats.illusion import (
    ALIGNMENT,
    EXPERT_VS_JUDGE,
    PREFERENCE_GAP,
    WINNER_AGREEMENT,
    WINNER_AGREEMENT_BY_KIND,
)
from analysis.stats.null_ranges import FLAGS
from analysis.stats.score_tables import SCORE_AGREEMENT, SCORE_SUMMARY, score_raters
from analysis.stats.spec import TableSpec
from analysis.stats.winrate import WINRATE
from analysis.tables.combined import (
    BEST_OF_K_SCORES,
    MODE_SHIFT,
    MODE_SHIFT_COMBINED,
    OVERVIEW,
    UNKNOWN,
    WINRATE_COMBINED,
    combined_label,
    overview,
    winrate_tables,
)
from analysis.tables.leaderboard import LEADERBOARD, MULTIPLE_TESTING, leaderboard
from analysis.tables.registry import (
    REGISTRY,
    card_specs,
    headlines,
    meanings,
    p_columns,
    p_families,
    register,
    section_figure,
    section_tables,
    spec,
)

#: the registry's readers and the tables' own functions, from here so that importing them loads the
#: declarations below
__all__ = [
    "BUILTIN",
    "UNKNOWN",
    "card_specs",
    "combined_label",
    "headlines",
    "leaderboard",
    "meanings",
    "overview",
    "p_columns",
    "p_families",
    "score_raters",
    "section_figure",
    "section_tables",
    "spec",
    "winrate_tables",
]

#: The study's tables in the order they are computed (a module of analysis/stats/ that declares a table not
#: listed here is collected too, after these: `declared_in`) (the leaderboard and the multiple-testing family read
#: the tables before them; `register` puts a new table before them).
BUILTIN: tuple[TableSpec, ...] = (
    OVERVIEW,
    SCORE_SUMMARY,
    BEST_OF_K_SCORES,
    WINRATE,
    WINRATE_COMBINED,
    MODE_SHIFT,
    MODE_SHIFT_COMBINED,
    SCORE_AGREEMENT,
    WINNER_AGREEMENT,
    WINNER_AGREEMENT_BY_KIND,
    HUMAN_MAJORITY,
    EXPERT_VS_JUDGE,
    PREFERENCE_GAP,
    HUMAN_RELIABILITY,
    ALIGNMENT,
    LATENT_COMPETENCE,
    LATENT_CONFUSION,
    LATENT_POSTERIORS,
    LATENT_WINRATE,
    LATENT_DUPLICATES,
    SELF_CONSISTENCY,
    POSITION_BIAS,
    PAIRWISE_BIAS,
    LENGTH_BIAS,
    SELF_PREFERENCE,
    HUMAN_AGREEMENT,
    CORRECTED_DESIGN,
    CORRECTED_ESTIMATES,
    CALIBRATION,
    CALIBRATION_BINS,
    HUMAN_UNMATCHED,
    LEADERBOARD,
    MULTIPLE_TESTING,
    REQUEST_CHANGES,
    ROBUSTNESS,
    FLAGS,
)


def declared_in(package: ModuleType, known: tuple[TableSpec, ...] = BUILTIN) -> list[TableSpec]:
    """The `TableSpec` constants of `package`'s modules that `known` does not list (a new statistic's module:
    its computation and its declaration, nothing to edit here), by module name, each once."""
    found: dict[str, TableSpec] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, TableSpec) and all(value is not k for k in known):
                found.setdefault(value.key, value)
    return list(found.values())


_plugins = list(REGISTRY)  # tables a plug-in registered before this module was imported
REGISTRY.clear()
for _spec in BUILTIN:
    register(_spec, last=True)
for _spec in [*declared_in(stats), *_plugins]:  # before the tables that read every other one
    register(_spec)
