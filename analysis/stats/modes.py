"""Which modes of a study are of which kind (core.modes.ModeKind): the analysis chooses its tables by what
the rows carry, never by a mode's name (issue 33, item 8).

A row written since the column exists carries its mode's declared `mode_kind`. A table written before it
gets the kind its rows show: `order` set -> pair, `position` set -> multi, else single (`fill_mode_kinds`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from core.modes import ModeKind

COLUMN = "mode_kind"
_KINDS = frozenset(k.value for k in ModeKind)


def fill_mode_kinds(results: pd.DataFrame) -> pd.Series:
    """Each row's mode kind (a categorical): the recorded one, else what its (judge, mode)'s rows carry.
    Worked out per mode (category codes and one group-by), never from a string per row."""
    if COLUMN in results:
        recorded = results[COLUMN]
        if not isinstance(recorded.dtype, pd.CategoricalDtype):
            recorded = recorded.astype("category")
        if not recorded.isna().any() or "mode" not in results:
            return recorded
    else:
        recorded = pd.Series(pd.Categorical.from_codes(np.full(len(results), -1), categories=[]))
        recorded.index = results.index
        if "mode" not in results:
            return recorded
    mode = results["mode"]
    if not isinstance(mode.dtype, pd.CategoricalDtype):
        mode = mode.astype("category")
    has_order = results["order"].notna() if "order" in results else pd.Series(False, index=results.index)
    has_position = (
        results["position"].notna() if "position" in results else pd.Series(False, index=results.index)
    )
    codes = mode.cat.codes.to_numpy()
    shows = pd.DataFrame({"order": has_order.to_numpy(), "position": has_position.to_numpy()})
    by_mode = shows.groupby(codes).any()
    shown = {
        int(code): ModeKind.pair.value
        if row.order
        else ModeKind.multi.value
        if row.position
        else ModeKind.single.value
        for code, row in by_mode.iterrows()
    }
    # the recorded kinds and the shown ones as one categorical: a row's recorded kind, else its mode's
    kinds = list(dict.fromkeys([*map(str, recorded.cat.categories), *shown.values()]))
    at = {kind: i for i, kind in enumerate(kinds)}
    recoded = np.array([at[str(k)] for k in recorded.cat.categories] + [-1], dtype=np.int64)
    by_code = np.array([at[shown[c]] if c in shown else -1 for c in range(len(mode.cat.categories))] + [-1])
    rec = recoded[recorded.cat.codes.to_numpy()]  # code -1 (missing) picks the trailing -1
    out = np.where(rec >= 0, rec, by_code[codes])
    return pd.Series(pd.Categorical.from_codes(out, categories=kinds), index=results.index, name=COLUMN)


def kinds_by_mode(results: pd.DataFrame) -> dict[str, ModeKind]:
    """mode -> its kind, in the order the rows first show the modes."""
    if "mode" not in results or results.empty:
        return {}
    kinds = results[COLUMN] if COLUMN in results else fill_mode_kinds(results)
    pairs = pd.DataFrame({"mode": results["mode"].array, "kind": pd.Series(kinds).array})
    pairs = pairs.drop_duplicates()  # on category codes when both are categoricals: no string per row
    return {
        str(m): ModeKind(str(k))
        for m, k in zip(pairs["mode"], pairs["kind"], strict=True)
        if not pd.isna(m) and str(k) in _KINDS
    }


def modes_of(kinds: dict[str, ModeKind], kind: ModeKind) -> list[str]:
    """The study's modes of `kind`."""
    return [m for m, k in kinds.items() if k is kind]


def shift_pairs(kinds: dict[str, ModeKind]) -> list[tuple[str, str]]:
    """(one-candidate mode, several-candidates mode) pairs a mode shift compares: the novelty illusion is the
    move from judging each candidate alone to judging it beside the others."""
    return [(a, b) for a in modes_of(kinds, ModeKind.single) for b in modes_of(kinds, ModeKind.multi)]
