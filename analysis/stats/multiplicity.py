"""Many tests, a controlled error rate per family: Benjamini–Hochberg q-values within test families that the
study's design fixes before any data are seen.

A study's report runs dozens of tests (a McNemar test per judge × generator × dimension mode shift, the same
for each combination of judges, one per judge-vs-human preference gap, a self-preference test per judge, a
position test per pairwise judge). Read one by one at α = 0.05, some will be "significant" by chance. Each
table with a p-value declares its family beside it (`TableSpec.p_family`): the per-judge mode shifts; the
combined-judge mode shifts, a family of their own (they reuse the per-judge verdicts, so pooling them with
those would count each shift twice); the bias tests; the tests against human labels. BH runs within each
family (statsmodels' `multipletests(method="fdr_bh")`), so a family's q-values do not change when another
family's inputs (say, expert labels) are added. Each p-value gets its q-value in a `<p column>_q` column beside
it, and the summary counts significance on q.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

#: What each family tests, for the report's sentence.
FAMILY_WORDS: Mapping[str, str] = {
    "mode_shift": "mode shift per judge × generator × dimension",
    "mode_shift_combined": "mode shift of each judge combination",
    "bias": "bias tests (self-preference, pairwise position)",
    "human_agreement": "judge vs human preference gaps",
}


def family_of(table: str, families: Mapping[str, str] | None = None) -> str:
    """The family a table's tests belong to (`families`, as the tables declare them; else the table alone)."""
    return (families or {}).get(table, table)


METHOD = "fdr_bh"
ALPHA = 0.05


def q_column(p_column: str) -> str:
    return f"{p_column}_q"


def bh_q_values(p: np.ndarray) -> np.ndarray:
    """BH-adjusted q-values of `p` (NaN p-values stay NaN and are not counted as tests)."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], method=METHOD)[1]
    return out


def add_q_values(
    tables: MutableMapping[str, pd.DataFrame],
    p_columns: Mapping[str, str],
    alpha: float = ALPHA,
    families: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Adjust the p-values of `tables` (the `p_columns` present: table -> p column, as the table registry
    declares them, `analysis.tables.registry.p_columns`) within each family (`families`: table -> family,
    `analysis.tables.registry.p_families`; a table not in it is a family of its own), in place: a `<p>_q` column right after each p column, and a table's `significant` column (if any) read on
    q < `alpha`. Returns the families: one row per table with its family, p column and number of tests."""
    found = [(name, col) for name, col in p_columns.items() if name in tables and col in tables[name]]
    p = {name: pd.to_numeric(tables[name][col], errors="coerce").to_numpy(dtype=float) for name, col in found}
    q: dict[str, np.ndarray] = {}
    for fam in dict.fromkeys(family_of(name, families) for name, _ in found):
        members = [name for name, _ in found if family_of(name, families) == fam]
        adjusted = bh_q_values(np.concatenate([p[name] for name in members]))
        start = 0
        for name in members:
            q[name], start = adjusted[start : start + len(p[name])], start + len(p[name])
    rows = []
    for name, col in found:
        table = tables[name].copy()
        table.insert(table.columns.get_loc(col) + 1, q_column(col), q[name])
        if "significant" in table:
            table["significant"] = q[name] < alpha
        tables[name] = table
        n_tests = int(np.isfinite(p[name]).sum())
        rows.append(
            {"table": name, "test_family": family_of(name, families), "p_column": col, "n_tests": n_tests}
        )
    family = pd.DataFrame(rows, columns=["table", "test_family", "p_column", "n_tests"])
    family["method"] = METHOD
    return family


def family_size(family: pd.DataFrame | None, name: str) -> int:
    """The number of tests in family `name` of a `add_q_values` result (0: none)."""
    if family is None or family.empty or "test_family" not in family:
        return 0
    return int(family.loc[family["test_family"] == name, "n_tests"].sum())


def family_sentence(family: pd.DataFrame) -> str:
    """One sentence naming what was corrected."""
    if family.empty:
        return "No test was run, so nothing was corrected for multiplicity."
    if "test_family" not in family:
        family = family.assign(test_family=[family_of(str(t)) for t in family["table"]])
    sizes = family.groupby("test_family", sort=False)["n_tests"].sum()
    parts = "; ".join(
        f"{FAMILY_WORDS.get(str(f), str(f).replace('_', ' '))}: {int(n)}" for f, n in sizes.items()
    )
    return (
        f"Significance is read on Benjamini–Hochberg q-values (false discovery rate {ALPHA:.0%}) within each "
        f"test family the design fixes, whatever other inputs the report has ({parts} tests)."
    )
