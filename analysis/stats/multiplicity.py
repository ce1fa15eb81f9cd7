"""Many tests, one error rate: Benjamini–Hochberg q-values over every p-value the report prints.

A study's report runs dozens of tests (a McNemar test per judge × generator × dimension mode shift, one per
judge-vs-human preference gap, a self-preference test per judge, a position test per pairwise judge). Read
one by one at α = 0.05, some will be "significant" by chance. The report's family is every p-value in
`P_COLUMNS` across its tables; each gets its BH-adjusted q-value in a `<p column>_q` column beside it
(statsmodels' `multipletests(method="fdr_bh")`), and the summary counts significance on q.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

#: Where the report's p-values are: table name -> its p-value column. One declaration; a new test adds a line.
P_COLUMNS: Mapping[str, str] = {
    "mode_shift": "mcnemar_p",
    "mode_shift_combined": "mcnemar_p",
    "preference_gap": "mcnemar_p",
    "self_preference": "p",
    "pairwise_bias": "first_p",
}
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
    tables: MutableMapping[str, pd.DataFrame], p_columns: Mapping[str, str] = P_COLUMNS, alpha: float = ALPHA
) -> pd.DataFrame:
    """Adjust every p-value of `tables` (the `p_columns` present: `P_COLUMNS` and those the table registry
    declares, `analysis.tables.registry.TableSpec.p_column`) as one family, in place: a `<p>_q`
    column right after each p column, and a table's `significant` column (if any) read on q < `alpha`.
    Returns the family: one row per table with its p column and number of tests."""
    found = [(name, col) for name, col in p_columns.items() if name in tables and col in tables[name]]
    p = [pd.to_numeric(tables[name][col], errors="coerce").to_numpy(dtype=float) for name, col in found]
    q = bh_q_values(np.concatenate(p)) if p else np.array([])
    start, rows = 0, []
    for (name, col), part in zip(found, p, strict=True):
        table = tables[name].copy()
        q_part = q[start : start + len(part)]
        table.insert(table.columns.get_loc(col) + 1, q_column(col), q_part)
        if "significant" in table:
            table["significant"] = q_part < alpha
        tables[name] = table
        rows.append({"table": name, "p_column": col, "n_tests": int(np.isfinite(part).sum())})
        start += len(part)
    family = pd.DataFrame(rows, columns=["table", "p_column", "n_tests"])
    family["method"] = METHOD
    return family


def family_sentence(family: pd.DataFrame) -> str:
    """One sentence naming what was corrected."""
    if family.empty:
        return "No test was run, so nothing was corrected for multiplicity."
    tables = ", ".join(str(t).replace("_", " ") for t in family["table"])
    return (
        f"Significance is read on Benjamini–Hochberg q-values (false discovery rate {ALPHA:.0%}); the corrected "
        f"family is all {int(family['n_tests'].sum())} p-values of this report ({tables})."
    )
