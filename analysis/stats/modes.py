"""Which modes of a study are of which kind (core.modes.ModeKind): the analysis chooses its tables by what
the rows carry, never by a mode's name (issue 33, item 8).

A row written since the column exists carries its mode's declared `mode_kind`. A table written before it
gets the kind its rows show: `order` set -> pair, `position` set -> multi, else single (`fill_mode_kinds`).
"""

from __future__ import annotations

import pandas as pd

from core.modes import ModeKind

COLUMN = "mode_kind"
_KINDS = frozenset(k.value for k in ModeKind)


def fill_mode_kinds(results: pd.DataFrame) -> pd.Series:
    """Each row's mode kind: the recorded one, else what its (judge, mode)'s rows carry."""
    recorded = (
        results[COLUMN].astype("string") if COLUMN in results else pd.Series(pd.NA, index=results.index)
    )
    if not recorded.isna().any() or "mode" not in results:
        return recorded.astype("string")
    mode = results["mode"].astype(str)
    has_order = results["order"].notna() if "order" in results else pd.Series(False, index=results.index)
    has_position = (
        results["position"].notna() if "position" in results else pd.Series(False, index=results.index)
    )
    by_mode = pd.DataFrame({"mode": mode, "order": has_order, "position": has_position}).groupby("mode").any()
    shown = {
        m: ModeKind.pair.value
        if row.order
        else ModeKind.multi.value
        if row.position
        else ModeKind.single.value
        for m, row in by_mode.iterrows()
    }
    return recorded.fillna(mode.map(shown)).astype("string")


def kinds_by_mode(results: pd.DataFrame) -> dict[str, ModeKind]:
    """mode -> its kind, in the order the rows first show the modes."""
    if "mode" not in results or results.empty:
        return {}
    kinds = results[COLUMN] if COLUMN in results else fill_mode_kinds(results)
    pairs = pd.DataFrame({"mode": results["mode"].astype(str), "kind": kinds.astype(str)}).drop_duplicates()
    return {str(m): ModeKind(k) for m, k in zip(pairs["mode"], pairs["kind"], strict=True) if k in _KINDS}


def modes_of(kinds: dict[str, ModeKind], kind: ModeKind) -> list[str]:
    """The study's modes of `kind`."""
    return [m for m, k in kinds.items() if k is kind]


def shift_pairs(kinds: dict[str, ModeKind]) -> list[tuple[str, str]]:
    """(one-candidate mode, several-candidates mode) pairs a mode shift compares: the novelty illusion is the
    move from judging each candidate alone to judging it beside the others."""
    return [(a, b) for a in modes_of(kinds, ModeKind.single) for b in modes_of(kinds, ModeKind.multi)]
