"""The RQ-Bench paper's tables, ready to paste: paper_tables.md and paper_tables.tex.

Every cell is a value of one of the report's tables (`best_of_k_scores`, `winrate`, `winrate_combined`,
`mode_shift`, `mode_shift_combined`, `expert_vs_judge`, `preference_gap`, `human_majority`,
`winner_agreement_by_kind`, `alignment`), only formatted, never recomputed, so the paper and the CSVs cannot
disagree. The layouts are the papers': compact pivots (generators as rows, dimensions as columns, judges as
column groups, n in every cell), experts and judges on the same pairs, one chosen cross-dimension pair.
Markdown comes from pandas/tabulate; the LaTeX is written here (`to_latex`: booktabs, numbered and labelled,
never scaled: \\small or \\footnotesize in a `table` where that fits the column, else a `table*`; a table wider
than a page's text is split by its column groups); a table whose inputs are absent (no humans, one mode, …) is
left out. A judge run under several rubrics is one judge with the rubric in a column of its own
(`collect.rubric_column`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.collect import rubric_column, split_rubric
from analysis.stats.corrected import CORRECTED_ESTIMATES
from analysis.stats.humans import HUMAN_MAJORITY
from analysis.stats.illusion import ALIGNMENT, EXPERT_VS_JUDGE, PREFERENCE_GAP, WINNER_AGREEMENT_BY_KIND
from analysis.stats.winrate import WINRATE
from analysis.tables.combined import (
    BEST_OF_K_SCORES,
    MODE_SHIFT,
    MODE_SHIFT_COMBINED,
    OVERVIEW,
    WINRATE_COMBINED,
)
from core.cells import md_cell

Tables = dict[str, pd.DataFrame]
MODES: tuple[str, ...] = ("independent", "comparative")
OUTCOMES: tuple[str, ...] = ("win", "tie", "loss")


@dataclass(frozen=True)
class PaperTable:
    """One table as shown: display strings, and column groups (spanner label, columns) for the header."""

    key: str
    title: str
    note: str
    frame: pd.DataFrame
    spanners: tuple[tuple[str, tuple[str, ...]], ...] = ()


def mean_sd(mean: float, sd: float, digits: int = 2) -> str:
    """``1.98 ± 0.25``; the mean alone where the sd is undefined (one instance)."""
    if pd.isna(mean):
        return ""
    return f"{mean:.{digits}f}" if pd.isna(sd) else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def pct(value: float, digits: int = 1) -> str:
    """A share as a percentage, ``27.2%``."""
    return "" if pd.isna(value) else f"{100 * value:.{digits}f}%"


def pct_ci(value: float, lo: float, hi: float) -> str:
    """``27.2% [18.0, 36.4]``."""
    if pd.isna(value):
        return ""
    return pct(value) if pd.isna(lo) else f"{pct(value)} [{100 * lo:.1f}, {100 * hi:.1f}]"


def p_value(p: float) -> str:
    return "" if pd.isna(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def _ordered(frame: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """Rows by judge (combinations last), mode (independent first), source (reference first), dimension."""
    text = {
        c: frame[c].astype(str).to_numpy() for c in ("judge", "mode", "source", "dimension") if c in frame
    }
    keys = []  # np.lexsort sorts by the last key first
    if "dimension" in text:
        keys.append(text["dimension"])
    if "source" in text:
        keys += [text["source"], text["source"] != reference]
    if "mode" in text:
        keys += [text["mode"], np.array([MODES.index(m) if m in MODES else len(MODES) for m in text["mode"]])]
    keys += [text["judge"], np.char.find(text["judge"].astype(str), "(") >= 0]
    return frame.iloc[np.lexsort(keys)].reset_index(drop=True)


def best_five(tables: Tables, reference: str = "reference") -> PaperTable | None:
    """Best-of-K mean ± sd per judge × mode × source (rows) and dimension (columns)."""
    scores = BEST_OF_K_SCORES.of(tables)
    if scores is None or scores.empty:
        return None
    cells = scores.assign(
        cell=[
            f"{mean_sd(m, s)} {_n_judges(n, j)}"
            for m, s, n, j in zip(
                scores["mean"], scores["sd"], scores["n"], scores["n_judges_min"], strict=True
            )
        ]
    )
    wide = cells.pivot_table(
        index=["judge", "mode", "source"], columns="dimension", values="cell", aggfunc="first", sort=False
    ).reset_index()
    wide.columns.name = None
    return PaperTable(
        "best_five",
        "Best-of-K scores",
        "mean ± sd over n instances of each generator's "
        "best-of-K candidate score (the reference: its own score); a judges' mean is over the "
        "candidates all its judges scored, and each cell says how many judges it rests on",
        _ordered(wide.fillna(""), reference),
    )


def _judge_group(label: str, several_rubrics: bool) -> str:
    """A judge's column-group name: the judge, with its rubric only where the study ran several."""
    judge, rubric = split_rubric(label)
    judge = short_judge(judge)
    return f"{judge} ({rubric})" if several_rubrics and rubric else judge


def _sources_first(sources: Sequence[str], reference: str) -> list[str]:
    return sorted(set(sources), key=lambda v: (v != reference, v))


def _pivot(
    frame: pd.DataFrame, cell: pd.Series, reference: str
) -> tuple[pd.DataFrame, tuple[tuple[str, tuple[str, ...]], ...]]:
    """Rows mode × generator (the reference first), one column group per judge (combinations last), one
    column per dimension in each group: the paper's layout. `frame` holds judge, mode, source, dimension."""
    keys = frame[["judge", "mode", "source", "dimension"]].astype(str)
    several = len({r for _, r in map(split_rubric, keys["judge"].unique()) if r}) > 1
    keys = keys.assign(group=[_judge_group(j, several) for j in keys["judge"]], cell=cell.to_numpy())
    groups = sorted(keys["group"].unique(), key=lambda g: ("(" in g.split(" (", 1)[0] or " of " in g, g))
    dims = sorted(keys["dimension"].unique())
    modes = [m for m in MODES if m in set(keys["mode"])] + sorted(set(keys["mode"]) - set(MODES))
    rows = [
        (m, src) for m in modes for src in _sources_first(keys.loc[keys["mode"] == m, "source"], reference)
    ]
    found = keys.set_index(["mode", "source", "group", "dimension"])["cell"]
    found = found[~found.index.duplicated()]
    out = pd.DataFrame(rows, columns=["mode", "generator"])
    spanners = []
    for g in groups:
        names = []
        for d in dims:
            if not any((m, src, g, d) in found.index for m, src in rows):
                continue  # a dimension this judge never scored (another rubric's): no empty column
            out[f"{g} {d}"] = [found.get((m, src, g, d), "") for m, src in rows]
            names.append(f"{g} {d}")
        if names:
            spanners.append((g, tuple(names)))
    if out["mode"].nunique() == 1:
        out = out.drop(columns="mode")
    return out, tuple(spanners)


def best_five_pivot(tables: Tables, reference: str = "reference") -> PaperTable | None:
    """RQ-Bench's best-of-K table: mean ± sd (n instances) per generator (rows) and dimension (columns), the
    judges (and their means) as column groups."""
    scores = BEST_OF_K_SCORES.of(tables)
    if scores is None or scores.empty:
        return None
    cell = pd.Series(
        [
            f"{mean_sd(m, sd)} ({int(n)})"
            for m, sd, n in zip(scores["mean"], scores["sd"], scores["n"], strict=True)
        ]
    )
    frame, spanners = _pivot(scores.reset_index(drop=True), cell, reference)
    return PaperTable(
        "best_five",
        "Best-of-K scores",
        "mean ± sd (n instances) of each generator's best-of-K candidate score (the reference: its own score), "
        "per judge and dimension; a judges' mean is over the candidates all its judges scored",
        frame,
        spanners,
    )


def win_tie_pivot(tables: Tables, reference: str = "reference") -> PaperTable | None:
    """RQ-Bench's win / tie table: each generator's win and tie rates (%) against the reference (n
    instances), per dimension (columns) and judge (column groups), the judges' mean among them."""
    rates = _rates(tables)
    if rates.empty:
        return None
    rates = rates.reset_index(drop=True)
    cell = pd.Series(
        [
            "" if pd.isna(w) else f"{100 * w:.1f} / {100 * t:.1f} ({int(n)})"
            for w, t, n in zip(rates["win"], rates["tie"], rates["n"], strict=True)
        ]
    )
    frame, spanners = _pivot(rates, cell, reference)
    return PaperTable(
        "win_tie",
        "Win / tie vs the reference",
        "win / tie in percent (n instances) of each generator's best-of-K candidate against the instance's "
        "reference; a win is better in the rubric's direction (lower on a lower-is-better dimension); a "
        "judges' mean is over the judges it names in every mode shown",
        frame,
        spanners,
    )


_COMBINED = re.compile(r"^(?P<how>\w+) of \d+ judges \((?P<names>[^)]*)\)")


def short_judge(label: str) -> str:
    """A judge's name as a paper table shows it: a combination ``mean of 2 judges (a+b)`` as ``mean (a+b)``."""
    return _COMBINED.sub(r"\g<how> (\g<names>)", str(label))


def by_dimension(
    frame: pd.DataFrame, keys: Sequence[str], cells: Sequence[tuple[str, Sequence[str]]]
) -> tuple[pd.DataFrame, tuple[tuple[str, tuple[str, ...]], ...]]:
    """A long table (one row per `keys` × dimension) as one row per `keys` and one column group per dimension
    holding the `cells` (name, display strings in `frame`'s order); blank where a row has no such dimension."""
    dims = frame["dimension"].astype(str).to_numpy()
    rows = frame[list(keys)].astype(str).drop_duplicates().reset_index(drop=True)
    index = pd.MultiIndex.from_frame(frame[list(keys)].astype(str))
    out, spanners = rows.copy(), []
    at = pd.MultiIndex.from_frame(rows)
    for dim in sorted(set(dims)):
        mine = dims == dim
        names = []
        for name, values in cells:
            found = pd.Series(np.asarray(values, dtype=object)[mine], index=index[mine])
            out[f"{dim} {name}"] = found[~found.index.duplicated()].reindex(at).fillna("").to_numpy()
            names.append(f"{dim} {name}")
        spanners.append((dim, tuple(names)))
    return out, tuple(spanners)


def mode_shift_table(tables: Tables) -> PaperTable | None:
    """The independent → comparative shift per judge × generator (rows) and dimension (column groups) on
    the paired instances: n, the win and tie rates before → after, the shifts, and McNemar's q (BH) where
    the report corrected its p-values, else p."""
    frames = [t for t in (MODE_SHIFT.of(tables), MODE_SHIFT_COMBINED.of(tables)) if t is not None]
    if not frames:
        return None
    shift = _ordered(pd.concat(frames, ignore_index=True).astype({"judge": str, "source": str}))
    shift = shift.assign(generator=shift["source"])
    corrected = "mcnemar_p_q" in shift
    cells: list[tuple[str, Sequence[str]]] = [("n", [str(int(n)) for n in shift["n"]])]
    for what in ("win", "tie"):
        before, after = shift[f"{what}_before"], shift[f"{what}_after"]
        cells.append(
            (
                f"{what} ind.→comp.",
                [f"{100 * a:.1f}→{100 * b:.1f}" for a, b in zip(before, after, strict=True)],
            )
        )
        cells.append((f"Δ{what}", shift[f"delta_{what}"].map(_points).tolist()))
    cells.append(
        ("q" if corrected else "p", shift["mcnemar_p_q" if corrected else "mcnemar_p"].map(p_value).tolist())
    )
    frame, spanners = by_dimension(shift, ["judge", "generator"], cells)
    test = "McNemar's exact test on win / not-win, its BH q over the report's family (significant: q < 0.05)"
    return PaperTable(
        "mode_shift",
        "Independent vs comparative",
        "win and tie rates in percent, independent → comparative, on the n instances scored in both modes; "
        f"Δ = comparative − independent, in points; {test if corrected else 'McNemar exact p, uncorrected'}",
        frame,
        spanners,
    )


def experts_and_judges(tables: Tables) -> PaperTable | None:
    """Experts and judges on the same pairs: one row per rater (each expert, each judge, the majority), one
    column group per dimension (n, reference preferred, generated preferred, tie)."""
    table = EXPERT_VS_JUDGE.of(tables)
    if table is None or table.empty:
        return None
    rows = _rater_rows(table)
    raters = list(dict.fromkeys(zip(rows["rater"], rows["kind"], strict=True)))
    out = pd.DataFrame(raters, columns=["rater", "kind"])
    found = rows.set_index(["rater", "kind", "dimension"])
    spanners = []
    for dim in sorted(rows["dimension"].unique()):
        names = []
        for col, short in (
            ("n", "n"),
            ("GT preferred", "GT"),
            ("generated preferred", "gen."),
            ("tie", "tie"),
        ):
            name = f"{dim} {short}"
            out[name] = [found[col].get((r, k, dim), "") for r, k in raters]
            names.append(name)
        spanners.append((dim, tuple(names)))
    return PaperTable(
        "experts_and_judges",
        "Experts and judges on the same pairs",
        "per rater and dimension, over the pairs it rated (a candidate the experts rated vs the instance's "
        "reference): n pairs, reference (GT) preferred, generated preferred, tie, in percent; each expert and "
        "judge on every pair, the majority on the pairs with a strict majority",
        out,
        tuple(spanners),
    )


def _n_judges(n: int, judges: int) -> str:
    """``(n=12, 2 judges)``: the instances and the fewest judges behind a best-of-K cell."""
    return f"(n={int(n)}, {int(judges)} judge{'' if int(judges) == 1 else 's'})"


def _rates(tables: Tables) -> pd.DataFrame:
    """Per-judge and `mean`-combined win/tie/loss rows (judge, mode, source, dimension, n, win, tie, loss)."""
    frames = [t for t in (WINRATE.of(tables),) if t is not None]
    combined = WINRATE_COMBINED.of(tables)
    if combined is not None:
        frames.append(combined.loc[combined["combine"] == "mean"])
    if not frames:
        return pd.DataFrame()
    cols = ["judge", "mode", "source", "dimension", "n", *OUTCOMES]
    return pd.concat([f[cols].astype({c: str for c in cols[:4]}) for f in frames], ignore_index=True)


def _shifts(tables: Tables) -> pd.DataFrame:
    frames = [t for t in (MODE_SHIFT.of(tables), MODE_SHIFT_COMBINED.of(tables)) if t is not None]
    if not frames:
        return pd.DataFrame(columns=["judge", "source", "dimension"])
    cols = ["judge", "source", "dimension", "n", *PAIRED, "delta_win", "delta_tie", "mcnemar_p"]
    return pd.concat([f[cols].astype({c: str for c in cols[:3]}) for f in frames], ignore_index=True)


def win_tie_loss_by_mode(tables: Tables) -> PaperTable | None:
    """Win / tie / loss vs the reference, independent next to comparative, per judge and combined, with the
    shift (Δwin, Δtie, McNemar p) where both modes ran; a judge that ran one mode has blank cells for the
    other and "n/a" shifts, named in the note."""
    rates = _rates(tables)
    if rates.empty:
        return None
    keys = ["judge", "source", "dimension"]
    out = rates[keys].drop_duplicates().reset_index(drop=True)
    spanners = []
    for mode in [m for m in MODES if m in set(rates["mode"])]:
        part = rates.loc[rates["mode"] == mode].drop(columns="mode")
        part = part.assign(**{o: part[o].map(pct) for o in OUTCOMES})
        names = {c: f"{mode} {c}" for c in ("n", *OUTCOMES)}
        out = out.merge(part.rename(columns=names), on=keys, how="left")
        n = out[names["n"]].astype("Int64")  # a judge that did not run this mode: blank, not a crash
        out[names["n"]] = n.astype(object).where(n.notna().to_numpy(), "")
        spanners.append((mode, tuple(names.values())))
    note = (
        "per judge and for the judges' mean, each mean over the judges it names in every mode shown; rates "
        "over each mode's instances; the shift (comparative - independent, in percentage points) is over the "
        "n paired instances scored in both modes, whose rates stand beside it: shift = paired comparative - "
        "paired independent"
    )
    shifts = _shifts(tables)
    if len(shifts):
        out, missing = _with_shifts(out, shifts, keys)
        spanners.append((SHIFT_SPANNER, SHIFT_COLUMNS))
        if missing:
            note += f"; no shift (n/a) for {', '.join(missing)}: it (or one of its judges) ran one mode only"
    return PaperTable(
        "win_tie_loss",
        "Win / tie / loss vs the reference, independent vs comparative",
        note,
        _ordered(out.fillna("")),
        tuple(spanners),
    )


#: The shift's inputs beside it (issue 24 item 2): mode_shift's paired rates, before = independent.
PAIRED: tuple[str, ...] = ("win_before", "win_after", "tie_before", "tie_after")
SHIFT_SPANNER = "on the instances in both modes"
SHIFT_COLUMNS: tuple[str, ...] = (
    "n paired",
    "independent win (paired)",
    "comparative win (paired)",
    "win shift",
    "independent tie (paired)",
    "comparative tie (paired)",
    "tie shift",
    "McNemar p",
)


def _with_shifts(out: pd.DataFrame, shifts: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """`out` with the shift columns: n paired, the paired rates and the shifts between them; rows without a
    shift read "n/a", and the judges they belong to."""
    shown = pd.DataFrame(
        {
            **{k: shifts[k] for k in keys},
            "n paired": shifts["n"].astype(int).astype(object),
            "independent win (paired)": shifts["win_before"].map(pct),
            "comparative win (paired)": shifts["win_after"].map(pct),
            "win shift": shifts["delta_win"].map(_points),
            "independent tie (paired)": shifts["tie_before"].map(pct),
            "comparative tie (paired)": shifts["tie_after"].map(pct),
            "tie shift": shifts["delta_tie"].map(_points),
            "McNemar p": shifts["mcnemar_p"].map(p_value),
        }
    )
    out = out.merge(shown, on=keys, how="left")
    absent = out["win shift"].isna().to_numpy()
    out.loc[absent, list(SHIFT_COLUMNS)] = "n/a"
    return out, sorted(set(out.loc[absent, "judge"].astype(str)))


def _points(delta: float) -> str:
    return "" if pd.isna(delta) else f"{100 * delta:+.1f}"


def preference_gap(tables: Tables) -> PaperTable | None:
    """The experts' strict majority and each judge's win rate on the same pairs, the gap with its CI and p,
    and how many pairs had no strict majority; rows judge × mode × generator, one column group per dimension."""
    gap = PREFERENCE_GAP.of(tables)
    if gap is None or gap.empty:
        return None
    gap = _ordered(gap.astype({c: str for c in ("judge", "mode", "source", "dimension")}))
    gap = gap.assign(generator=gap["source"])
    cells: list[tuple[str, Sequence[str]]] = [
        ("n", [str(int(n)) for n in gap["n"]]),
        ("experts", gap["human_win"].map(pct).tolist()),
        ("judge", gap["judge_win"].map(pct).tolist()),
        (
            "gap [95% CI]",
            [
                _gap(g, lo, hi)
                for g, lo, hi in zip(gap["gap_win"], gap["gap_win_lo"], gap["gap_win_hi"], strict=True)
            ],
        ),
        ("p", gap["mcnemar_p"].map(p_value).tolist()),
    ]
    majority = HUMAN_MAJORITY.of(tables)
    note = ""
    if majority is not None and len(majority):
        excluded = majority.astype({"source": str, "dimension": str}).set_index(["source", "dimension"])[
            "n_excluded"
        ]
        excluded = excluded[~excluded.index.duplicated()]
        at = pd.MultiIndex.from_frame(gap[["source", "dimension"]])
        cells.append(("no maj.", ["" if pd.isna(v) else str(int(v)) for v in excluded.reindex(at)]))
        note = "; no maj.: pairs without a strict majority, left out"
    frame, spanners = by_dimension(gap, ["judge", "mode", "generator"], cells)
    return PaperTable(
        "preference_gap",
        "Judges vs the expert majority on the same pairs",
        "win rate of the rated candidate over the reference, in percent, by the experts' strict majority and "
        "by the judge, on the same n pairs; gap = judge − experts, in points [95% CI]; McNemar p" + note,
        frame,
        spanners,
    )


RATES: tuple[tuple[str, str], ...] = (
    ("gt_win", "GT preferred"),
    ("gen_win", "generated preferred"),
    ("tie", "tie"),
)


def _rater_rows(table: pd.DataFrame) -> pd.DataFrame:
    """rater, kind, dimension, n and the three rates as percentages, from `expert_vs_judge` rows."""
    out = table[["rater", "kind", "dimension"]].astype(str)
    out["n"] = table["n"].astype(int).to_numpy()
    for col, name in RATES:
        out[name] = table[col].map(pct).to_numpy()
    return out.reset_index(drop=True)


def expert_vs_judge(tables: Tables) -> PaperTable | None:
    """The paper's experts-vs-judges layout: each expert's rates on every pair they rated, each judge's on
    the same candidates, and the strict majority as an extra row (`illusion.rater_rates`)."""
    table = EXPERT_VS_JUDGE.of(tables)
    if table is None or table.empty:
        return None
    return PaperTable(
        "expert_vs_judge",
        "Experts vs judges on the same pairs",
        "per rater, over the pairs it rated (a candidate the experts rated vs the instance's reference): "
        "reference (GT) preferred, generated preferred, tie; each expert on every pair, the majority on the "
        "pairs with a strict majority",
        _rater_rows(table),
    )


#: Pair kinds of the paper's agreement table, as the paper names them.
PAPER_KINDS: tuple[tuple[str, str], ...] = (
    ("expert-expert", "expert–expert"),
    ("judge-judge", "LLM–LLM"),
    ("expert-judge", "expert–LLM"),
)


def agreement_by_kind(tables: Tables) -> PaperTable | None:
    """Mean agreement on winners over the expert–expert, LLM–LLM (two different judges in one mode) and
    expert–LLM rater pairs (`winner_agreement_by_kind`)."""
    table = WINNER_AGREEMENT_BY_KIND.of(tables)
    if table is None or table.empty:
        return None
    by_kind = table.assign(kind=table["kind"].astype(str)).set_index("kind")
    rows = [(name, by_kind.loc[kind]) for kind, name in PAPER_KINDS if kind in by_kind.index]
    if not rows:
        return None
    out = pd.DataFrame(
        {
            "pairs of": [name for name, _ in rows],
            "rater pairs": [int(r["pairs"]) for _, r in rows],
            "items": [int(r["items"]) for _, r in rows],
            "agreement": [pct(r["percent"]) for _, r in rows],
            "kappa": ["" if pd.isna(r["kappa"]) else f"{r['kappa']:.2f}" for _, r in rows],
        }
    )
    return PaperTable(
        "agreement_by_kind",
        "Agreement on winners: experts and LLM judges",
        "mean over the rater pairs of each kind of the share of items (win / tie / loss) on which both agree, "
        "and Cohen's κ; LLM–LLM pairs are two different judges in one mode",
        out,
    )


def boundedness_on_rated_pairs(tables: Tables, dimension: str = "source_boundedness") -> PaperTable | None:
    """Each judge's rates on one dimension over the pairs the experts rated (`expert_vs_judge` rows)."""
    table = EXPERT_VS_JUDGE.of(tables)
    if table is None or table.empty:
        return None
    part = table.loc[
        (table["dimension"].astype(str) == dimension).to_numpy() & (table["kind"] == "judge").to_numpy()
    ]
    if part.empty:
        return None
    return PaperTable(
        "boundedness_on_rated_pairs",
        f"{dimension} on the human-rated pairs",
        f"per judge, over the pairs the experts rated: the reference (GT) or the generated candidate preferred "
        f"on {dimension} (better in the rubric's direction), or a tie",
        _rater_rows(part).drop(columns=["kind", "dimension"]),
    )


def _gap(g: float, lo: float, hi: float) -> str:
    return "" if pd.isna(g) else f"{100 * g:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def boundedness(
    tables: Tables, dimension: str = "source_boundedness", reference: str = "reference"
) -> PaperTable | None:
    """One dimension's best-of-K mean ± sd per judge × mode × generator, with each generator's win and loss
    rates against the reference (the paper's source-boundedness table)."""
    scores = BEST_OF_K_SCORES.of(tables)
    if scores is None or not (scores["dimension"].astype(str) == dimension).any():
        return None
    part = scores.loc[scores["dimension"].astype(str) == dimension]
    out = part[["judge", "mode", "source"]].astype(str)
    out["mean ± sd"] = [mean_sd(m, s) for m, s in zip(part["mean"], part["sd"], strict=True)]
    out["n"] = part["n"].astype(int).to_numpy()
    rates = _rates(tables)
    if len(rates):
        rates = rates.loc[rates["dimension"] == dimension, ["judge", "mode", "source", "n", "win", "loss"]]
        shown = rates.assign(win=rates["win"].map(pct), loss=rates["loss"].map(pct))
        out = out.merge(shown.rename(columns={"n": "n (w/l)"}), on=["judge", "mode", "source"], how="left")
        n = out["n (w/l)"].astype("Int64")
        out["n (w/l)"] = n.astype(object).where(n.notna().to_numpy(), "")
    out = _ordered(out.fillna(""), reference)
    out = out.rename(columns={"source": "generator"})
    return PaperTable(
        "boundedness",
        f"{dimension}: best-of-K mean ± sd with win / loss",
        "mean ± sd over n instances of each generator's best-of-K score (a judges' mean: over the candidates "
        "all its judges scored); win / loss against the reference on the n (w/l) instances with a reference "
        "score, a win better in the rubric's direction",
        out,
    )


#: the pair the RQ-Bench paper reports: the experts' non-obviousness against a judge's source-boundedness
PAPER_ALIGNMENT: tuple[str, str] = ("non_obviousness", "source_boundedness")


def parse_alignment(text: str) -> tuple[str, str]:
    """``human:A,judge:B`` as (A, B); a ValueError naming the expected form otherwise."""
    parts = dict(part.strip().split(":", 1) for part in text.split(",") if ":" in part)
    if set(parts) != {"human", "judge"} or text.count(",") != 1 or not all(parts.values()):
        raise ValueError(
            f"--alignment {text!r}: expected human:DIMENSION,judge:DIMENSION "
            "(e.g. human:non_obviousness,judge:source_boundedness)"
        )
    return parts["human"].strip(), parts["judge"].strip()


def alignment_pairs(tables: Tables) -> list[tuple[str, str]]:
    """The (human dimension, judge dimension) pairs the report's `alignment` table holds."""
    table = ALIGNMENT.of(tables)
    if table is None or table.empty:
        return []
    pairs = table[["dimension_a", "dimension_b"]].astype(str).drop_duplicates()
    return sorted(map(tuple, pairs.to_numpy().tolist()))


def alignment_note(tables: Tables, pair: tuple[str, str] | None) -> str | None:
    """Why the paper tables have no alignment table although the report has one (the pair is absent), in
    one line naming the option and the pairs there are; None when it is shown or there is none."""
    pairs = alignment_pairs(tables)
    chosen = pair or PAPER_ALIGNMENT
    if not pairs or chosen in pairs:
        return None
    shown = ", ".join(f"human:{a},judge:{b}" for a, b in pairs[:6]) + (", …" if len(pairs) > 6 else "")
    given = f"the pair human:{chosen[0]},judge:{chosen[1]} is not in the study" if pair else "no pair chosen"
    return f"note: paper tables: no cross-dimension alignment table ({given}); choose one with --alignment: {shown}"


def alignment(tables: Tables, pair: tuple[str, str] | None = None) -> PaperTable | None:
    """Agreement between a human rater's winner on one dimension and each judge's on another, on the same
    pairs, for one chosen pair of dimensions (the paper reports one; default `PAPER_ALIGNMENT`): one row per
    judge, one column per expert and for the majority."""
    table = ALIGNMENT.of(tables)
    human, judge = pair or PAPER_ALIGNMENT
    if table is None or table.empty:
        return None
    frame = table.astype({c: str for c in ("rater_a", "dimension_a", "rater_b", "dimension_b")})
    frame = frame.loc[(frame["dimension_a"] == human).to_numpy() & (frame["dimension_b"] == judge).to_numpy()]
    if frame.empty:
        return None
    frame = frame.assign(
        cell=[
            "" if pd.isna(v) else f"{pct_ci(v, lo, hi)} ({int(n)})"
            for v, lo, hi, n in zip(
                frame["percent"], frame["percent_lo"], frame["percent_hi"], frame["n"], strict=True
            )
        ]
    )
    raters = list(dict.fromkeys(frame["rater_a"]))
    wide = frame.pivot_table(index="rater_b", columns="rater_a", values="cell", aggfunc="first", sort=False)
    wide = wide.reindex(columns=raters).reset_index().rename(columns={"rater_b": "judge"})
    wide.columns.name = None
    return PaperTable(
        "alignment",
        f"Alignment: experts' {human} vs judges' {judge}",
        f"share of pairs on which a human rater's winner on {human} equals the judge's winner on {judge} "
        "[95% CI] (n pairs); one column per expert and for the strict majority",
        wide.fillna(""),
    )


def _estimate(value: float, lo: float, hi: float, quantity: str) -> str:
    """A win rate in percent as ``27.2 [18.0, 36.4]``, a mean score as ``2.31 [2.10, 2.52]``."""
    if quantity == "win_rate":  # in percent, the unit in the quantity's name
        if pd.isna(value):
            return ""
        return f"{100 * value:.1f}" if pd.isna(lo) else f"{100 * value:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    if pd.isna(value):
        return ""
    return f"{value:.2f}" if pd.isna(lo) else f"{value:.2f} [{lo:.2f}, {hi:.2f}]"


ESTIMATES: tuple[tuple[str, str], ...] = (
    ("judge_only", "judge only"),
    ("human_only", "experts only"),
    ("corrected", "corrected"),
)


def corrected_estimates(tables: Tables) -> PaperTable | None:
    """The report's `corrected_estimates` (analysis.stats.corrected, PPI++): judge-only, expert-only and
    prediction-powered estimates with 95% CIs, and the expert labels' effective sample size."""
    table = CORRECTED_ESTIMATES.of(tables)
    if table is None or table.empty:
        return None
    out = table[["judge", "mode", "source", "dimension"]].astype(str).reset_index(drop=True)
    out["quantity"] = (
        table["quantity"].map({"win_rate": "win rate (%)", "mean_score": "mean score"}).to_numpy()
    )
    for col, name in ESTIMATES:
        out[name] = [
            _estimate(r[col], r[f"{col}_lo"], r[f"{col}_hi"], r["quantity"]) for _, r in table.iterrows()
        ]
    out["labelled"] = table["n_labeled"].astype(int).to_numpy()
    out["effective n"] = [("" if pd.isna(v) else f"{v:.0f}") for v in table["n_effective"]]
    return PaperTable(
        "corrected_estimates",
        "Corrected estimates",
        "per judge, mode, generator and dimension: the judge on every instance, the experts on the instances "
        "they rated, and the corrected estimate of the experts' value from both under the labels' design "
        "(PPI++ for a random sample, inverse-probability weighted for known unequal probabilities), each with "
        "its 95% CI; effective n is the number of expert labels a human-only estimate would need for the "
        "corrected CI's width",
        out,
        # column groups only so that a table too wide for the page splits between them (`split_wide`)
        (
            ("single-source estimates", ("judge only", "experts only")),
            ("prediction-powered", ("corrected", "labelled", "effective n")),
        ),
    )


BUILDERS: tuple[Callable[[Tables], PaperTable | None], ...] = (
    best_five_pivot,
    win_tie_pivot,
    mode_shift_table,
    experts_and_judges,
    preference_gap,
    agreement_by_kind,
    boundedness,
    boundedness_on_rated_pairs,
    corrected_estimates,
)


def _ci3(frame: pd.DataFrame, col: str) -> list[str]:
    """``0.412 [0.380, 0.441]`` per row of `frame`'s `col` and its `_lo` / `_hi` bounds."""
    return [
        "" if pd.isna(v) else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        for v, lo, hi in zip(frame[col], frame[f"{col}_lo"], frame[f"{col}_hi"], strict=True)
    ]


NOVBENCH_METRICS: tuple[str, ...] = ("Rel.", "Cov.", "Clarity", "DistAcc")


def novbench_quality(table: pd.DataFrame) -> PaperTable:
    """NovBench's Table 2 (`analysis.novbench.report`'s novbench_table.csv): mean [95% CI] per metric, per
    model and strategy; the metrics as one column group, so a page too narrow splits them."""
    out = table[["model", "strategy"]].astype(str).reset_index(drop=True)
    out["n"] = table["n"].astype(int).to_numpy()
    for metric in NOVBENCH_METRICS:
        out[metric] = _ci3(table.reset_index(drop=True), metric)
    return PaperTable(
        "novbench_quality",
        "NovBench: novelty-assessment quality",
        "mean [95% CI] per metric over the n papers of each model and strategy (relevance, coverage, "
        "clarity, distinction accuracy)",
        out,
        (("metric", NOVBENCH_METRICS[:2]), ("", NOVBENCH_METRICS[2:])),
    )


def novbench_validation(table: pd.DataFrame) -> PaperTable:
    """NovBench's App. D validation (novbench_human.csv): agreement with the human majority, Spearman ρ and
    Fleiss κ per metric and combination, with their 95% CIs."""
    frame = table.reset_index(drop=True)
    out = pd.DataFrame(
        {"metric": frame["metric"].astype(str), "combination": frame["combination"].astype(str)}
    )
    out["agreement"] = _ci3(frame, "agreement")
    out["n"] = frame["n_agreement"].astype(int).to_numpy()
    out["ρ"] = _ci3(frame, "rho")
    out["κ"] = _ci3(frame, "kappa")
    return PaperTable(
        "novbench_validation",
        "NovBench: metric validation against human judgements",
        "agreement with the strict human majority over n pairs (a metric tie counts as a disagreement), "
        "Spearman ρ and Fleiss κ, each [95% CI]",
        out,
    )


def _one_rubric(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """`frame` with its judges' rubric in a column of its own (`rubric_column`), or, where one rubric holds
    every row, without it and the rubric named for the note."""
    frame = rubric_column(frame.reset_index(drop=True))
    if "rubric" in frame and frame["rubric"].nunique() == 1:
        return frame.drop(columns="rubric"), f"; rubric {frame['rubric'].iloc[0]}"
    return frame, ""


def paper_tables(tables: Tables, pair: tuple[str, str] | None = None) -> list[PaperTable]:
    """Every paper table the report's tables can fill, in the paper's order; `pair`: the (human, judge)
    dimensions of the alignment table (`--alignment`)."""
    built = [build(tables) for build in BUILDERS]
    built.insert(len(built) - 1, alignment(tables, pair))
    shown = [t for t in built if t is not None]
    overview = OVERVIEW.of(tables)
    rubrics = (
        sorted(map(str, overview["rubric"].dropna().unique()))
        if overview is not None and "rubric" in overview
        else []
    )
    one = f"; rubric {rubrics[0]}" if len(rubrics) == 1 else ""  # several: a column beside the judge
    return [replace(t, frame=_short_judges(rubric_column(t.frame)), note=t.note + one) for t in shown]


def _short_judges(frame: pd.DataFrame) -> pd.DataFrame:
    """A judge column with combinations named short (`short_judge`), after the rubric has its own column."""
    return frame.assign(judge=frame["judge"].map(short_judge)) if "judge" in frame else frame


def to_markdown(shown: Sequence[PaperTable]) -> str:
    """One section per table: title, note, and a pipe table (spanner names prefix their columns); names in
    cells and notes shown as text (`cells.md_cell`: tabulate escapes nothing)."""
    parts = ["# Paper tables", ""]
    for t in shown:
        frame = t.frame.rename(columns=md_cell).map(md_cell)
        parts += [
            f"## {md_cell(t.title)}",
            "",
            f"*{md_cell(t.note)}*",
            "",
            frame.to_markdown(index=False, disable_numparse=True),
            "",
        ]
    return "\n".join(parts)


#: LaTeX for characters the tables' names and notes may hold (pdflatex, default OT1 text fonts); any other
#: character outside ASCII is transliterated (é -> e) or written as its code point (`tex`)
TEX_SPECIAL: dict[str, str] = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\ensuremath{<}",
    ">": r"\ensuremath{>}",
    "±": r"\ensuremath{\pm}",
    "×": r"\ensuremath{\times}",
    "≤": r"\ensuremath{\le}",
    "≥": r"\ensuremath{\ge}",
    "−": "--",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "Δ": r"\ensuremath{\Delta}",
    "κ": r"\ensuremath{\kappa}",
    "ρ": r"\ensuremath{\rho}",
    "α": r"\ensuremath{\alpha}",
    "τ": r"\ensuremath{\tau}",
    "→": r"\ensuremath{\to}",
    "·": r"\ensuremath{\cdot}",
    "|": r"\ensuremath{|}",
}
_TEX_CHAR = re.compile("|".join(map(re.escape, TEX_SPECIAL)) + r"|[^\x20-\x7e]")
#: the file's preamble: what to load, and `\judgescopetable`, which sets a tabular in the largest size that
#: fits (\small, else \footnotesize: 8 pt in a 10 pt paper) in a `table` where it fits the column, else in a
#: `table*` over the text width; nothing is scaled, so no table is ever set below 8 pt
TEX_PREAMBLE = r"""% judgescope paper tables: \input{paper_tables} after \usepackage{booktabs}
% Every table is numbered and labelled (\label{tab:judgescope-<key>}) and never scaled: \judgescopetable sets
% it in \small, else \footnotesize (8 pt in a 10 pt paper), in a one-column `table` where that fits
% \columnwidth, else in a `table*` over \textwidth; a table wider than a page was split by its column groups
% ("part 1 of 2"). Names outside ASCII are transliterated (e with an accent -> e) or written as their code
% point (U+4E2D), so the file compiles under pdflatex with no font or inputenc package.
\ifdefined\judgescopebox\else\newsavebox{\judgescopebox}\fi
\providecommand{\judgescopetable}[3]{%
  \sbox{\judgescopebox}{\small#3}%
  \ifdim\wd\judgescopebox>\columnwidth\sbox{\judgescopebox}{\footnotesize#3}\fi
  \ifdim\wd\judgescopebox>\columnwidth
    \sbox{\judgescopebox}{\small#3}%
    \ifdim\wd\judgescopebox>\textwidth\sbox{\judgescopebox}{\footnotesize#3}\fi
    \begin{table*}[t]\centering\caption{#1}\label{#2}\usebox{\judgescopebox}\end{table*}%
  \else
    \begin{table}[t]\centering\caption{#1}\label{#2}\usebox{\judgescopebox}\end{table}%
  \fi}
"""
#: columns holding names (left-aligned); every other column holds numbers (right-aligned)
TEXT_COLUMNS: tuple[str, ...] = (
    "judge",
    "rubric",
    "mode",
    "source",
    "generator",
    "dimension",
    "rater",
    "kind",
    "pairs of",
    "quantity",
    "model",
    "strategy",
    "metric",
    "combination",
    "rater_a",
    "dimension_a",
    "rater_b",
    "dimension_b",
    "vs",
    "protocol",
)
#: widths of the default two-column article (10 pt), in pt, and of one character at \footnotesize (cmr8's
#: digits are 4.25 pt; a little more for wide letters): what a table is split to fit
TEXT_WIDTH_PT = 469.0
COLUMN_PAD_PT = 12.0  # 2 \tabcolsep
#: character widths at \footnotesize (cmr8), in pt: digits, narrow and wide marks; any other 4.8 (a little
#: over the lower-case mean, so an estimate errs wide)
CHAR_PT: dict[str, float] = {
    **dict.fromkeys("0123456789", 4.25),
    **dict.fromkeys(".,:;'!|()[]", 2.4),
    " ": 2.9,
    "%": 7.1,
    "±": 6.6,
    "→": 8.5,
    "Δ": 7.1,
}
WIDE_PT = 4.8


def text_pt(text: str) -> float:
    """An estimate of `text`'s width at \\footnotesize, in pt (upper-case letters count wide; a character
    outside ASCII as the code point `tex` writes for it)."""
    return sum(
        CHAR_PT.get(c, 6.5 if c.isupper() else WIDE_PT)
        if ord(c) <= 0x7E
        else WIDE_PT * len(f"U+{ord(c):04X}")
        for c in text
    )


def _tex_char(char: str) -> str:
    """One character as LaTeX that pdflatex sets with its default fonts."""
    if char in TEX_SPECIAL:
        return TEX_SPECIAL[char]
    if char.isspace() or unicodedata.category(char).startswith("C"):
        return " "  # a newline, tab or control character in a name: a space
    plain = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    if plain and all(" " <= c <= "~" for c in plain):
        return tex(plain)  # é -> e, ﬁ -> fi
    return rf"\texttt{{U+{ord(char):04X}}}"  # 中, 🔥: its code point, in no font package's way


def tex(text: object) -> str:
    """A cell, caption or header as LaTeX text: every special character escaped, every character outside
    ASCII transliterated or written as its code point, a leading ``[`` or ``*`` protected (after ``\\\\`` or
    ``\\midrule`` LaTeX would read it as an optional argument)."""
    out = _TEX_CHAR.sub(lambda m: _tex_char(m.group(0)), str(text))
    return "{}" + out if out.lstrip().startswith(("[", "*")) else out


def _width(t: PaperTable, columns: Sequence[str]) -> float:
    """An upper estimate of a tabular's width at \\footnotesize, in pt (header names under a spanner lose
    their prefix)."""
    prefix = {c: f"{label} " for label, cols in t.spanners for c in cols}
    total = 0.0
    for c in columns:
        cells = [c.removeprefix(prefix.get(c, "")), *map(str, t.frame[c])]
        total += max(map(text_pt, cells)) + COLUMN_PAD_PT
    return total


def split_wide(t: PaperTable, width: float = TEXT_WIDTH_PT) -> list[PaperTable]:
    """`t` as it is where it fits `width`, else as parts that each repeat its name columns (those outside
    every column group; without groups, the leading `TEXT_COLUMNS`) and hold as many whole groups (without
    groups, columns) as fit ("part 1 of 2")."""
    cols = [str(c) for c in t.frame.columns]
    if _width(t, cols) <= width:
        return [t]
    units: list[tuple[str, tuple[str, ...]]] = list(t.spanners)
    if not units:
        lead = next((i for i, c in enumerate(cols) if c not in TEXT_COLUMNS), len(cols))
        units = [("", (c,)) for c in cols[lead:]]
    grouped = {c for _, group in units for c in group}
    keys = [c for c in cols if c not in grouped]
    chunks: list[list[tuple[str, tuple[str, ...]]]] = [[]]
    for unit in units:
        trial = keys + [c for _, group in [*chunks[-1], unit] for c in group]
        if chunks[-1] and _width(t, trial) > width:
            chunks.append([])
        chunks[-1].append(unit)
    if len(chunks) == 1:
        return [t]
    return [
        replace(
            t,
            key=t.key if i == 0 else f"{t.key}-{i + 1}",
            title=f"{t.title} (part {i + 1} of {len(chunks)})",
            frame=t.frame[keys + [c for _, group in chunk for c in group]],
            spanners=tuple(chunk) if t.spanners else (),
        )
        for i, chunk in enumerate(chunks)
    ]


def _tex_table(t: PaperTable) -> str:
    """One table through `\\judgescopetable`: a numbered caption (title: note), a label, booktabs rules,
    spanners over their columns with \\cmidrule."""
    cols = [str(c) for c in t.frame.columns]
    align = "".join("l" if c in TEXT_COLUMNS else "r" for c in cols)
    head, names = [], [tex(c) for c in cols]
    if t.spanners:
        spans, rules, at = [], [], 0
        for label, columns in t.spanners:
            first = cols.index(columns[0])
            spans += [""] * (first - at) + [rf"\multicolumn{{{len(columns)}}}{{c}}{{{tex(label)}}}"]
            rules.append(rf"\cmidrule(lr){{{first + 1}-{first + len(columns)}}}")
            for c in columns:
                names[cols.index(c)] = tex(c.removeprefix(f"{label} "))
            at = first + len(columns)
        spans += [""] * (len(cols) - at)
        head = [" & ".join(spans) + r" \\", " ".join(rules)]
    rows = [" & ".join(tex(v) for v in row) + r" \\" for row in t.frame.itertuples(index=False)]
    return "\n".join(
        [
            rf"\judgescopetable{{{tex(t.title)}: {tex(t.note)}.}}{{tab:judgescope-{t.key}}}{{%",
            rf"\begin{{tabular}}{{@{{}}{align}@{{}}}}",
            r"\toprule",
            *head,
            " & ".join(names) + r" \\",
            r"\midrule",
            *rows,
            r"\bottomrule",
            r"\end{tabular}}",
        ]
    )


def to_latex(shown: Sequence[PaperTable]) -> str:
    """The tables as LaTeX for a two-column paper (`TEX_PREAMBLE`), each as wide as its column or the text
    (`split_wide`)."""
    parts = [p for t in shown for p in split_wide(t)]
    return TEX_PREAMBLE + "\n" + "\n\n".join(_tex_table(t) for t in parts) + "\n"


def write_paper_tables(
    tables: Tables,
    out_dir: str | Path,
    pair: tuple[str, str] | None = None,
    one_rater: Sequence[tuple[str, str]] = (),
) -> tuple[Path, Path]:
    """Write paper_tables.md and paper_tables.tex under `out_dir`; return both paths. `pair`: the alignment
    table's (human, judge) dimensions. `one_rater`: pairs of judges that are one rater
    (`experiments.duplicates`), marked in every table's note: an LLM–LLM agreement of 100% between them is
    one model agreeing with itself."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shown = paper_tables(tables, pair)
    if one_rater:
        mark = "; ".join(f"{a} and {b} are one rater (the same model and answers)" for a, b in one_rater)
        shown = [replace(t, note=f"{t.note}. Note: {mark}") for t in shown]
    md, tex_path = out / "paper_tables.md", out / "paper_tables.tex"
    md.write_text(to_markdown(shown), encoding="utf-8")
    tex_path.write_text(to_latex(shown), encoding="utf-8")
    return md, tex_path
