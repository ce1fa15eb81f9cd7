"""What every column of the report's tables means (the report's glossary), as the tables declare it
(`TableSpec.meanings`, beside each statistic: `analysis.tables.registry.meanings`).

`describe` also reads the families of names: `<x>_lo` / `<x>_hi` (the 95% CI of x), `kappa_w:<dimension> [<mode>]`
(leaderboard), `p[<label>]` (latent posterior) and a bare outcome label (a confusion-matrix count).
"""

from __future__ import annotations

import re

from analysis.tables.declarations import meanings  # every declared table's meanings

_CI = re.compile(r"^(?P<base>.+)_(?P<end>lo|hi)$")


def describe(column: object) -> str | None:
    """The meaning of a column name, or None when the glossary does not know it."""
    name = str(column)
    declared = meanings()  # each table's columns, from its declaration
    if name in declared:
        return declared[name]
    match = _CI.match(name)
    if match and match.group("base") in declared | {"score": "", "sd": ""}:
        end = "lower" if match.group("end") == "lo" else "upper"
        return f"{end} end of the 95% CI of {match.group('base')}"
    if name.startswith("kappa_w:"):
        dim, _, mode = name.split(":", 1)[1].partition(" [")
        return f"κ_w with the experts' mean score on {dim}" + (f", {mode.rstrip(']')} mode" if mode else "")
    if re.fullmatch(r"p\[.+\]", name):
        return f"posterior probability of label {name[2:-1]}"
    if re.fullmatch(r"-?\d+", name):
        return f"count of items whose latent label is {name}"
    return None
