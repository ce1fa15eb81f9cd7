"""The RQ-Bench paper's tables, ready to paste: paper_tables.md and paper_tables.tex.

Every cell is a value of one of the report's tables (`best_of_k_scores`, `winrate`, `winrate_combined`,
`mode_shift`, `mode_shift_combined`, `expert_vs_judge`, `preference_gap`, `human_majority`,
`winner_agreement_by_kind`, `alignment`), only formatted, never recomputed, so the paper and the CSVs cannot
disagree. Markdown comes from pandas/tabulate; the LaTeX is written here for a two-column paper (`to_latex`:
booktabs, numbered and labelled, \\small, scaled to the column when wider); a table whose inputs are absent (no
humans, one mode, …) is left out. A judge run under several rubrics is one judge with the rubric in a column of
its own (`collect.rubric_column`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.collect import rubric_column
from analysis.tables.declarations import spec
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


def _read(tables: Tables, key: str) -> pd.DataFrame | None:
    """The report's table `key` (None when absent); `key` must be a declared table (`analysis.tables.declarations`), so a
    renamed declaration fails here instead of silently leaving its paper table out."""
    spec(key)
    return tables.get(key)


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
    scores = _read(tables, "best_of_k_scores")
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


def _n_judges(n: int, judges: int) -> str:
    """``(n=12, 2 judges)``: the instances and the fewest judges behind a best-of-K cell."""
    return f"(n={int(n)}, {int(judges)} judge{'' if int(judges) == 1 else 's'})"


def _rates(tables: Tables) -> pd.DataFrame:
    """Per-judge and `mean`-combined win/tie/loss rows (judge, mode, source, dimension, n, win, tie, loss)."""
    frames = [t for t in (_read(tables, "winrate"),) if t is not None]
    combined = _read(tables, "winrate_combined")
    if combined is not None:
        frames.append(combined.loc[combined["combine"] == "mean"])
    if not frames:
        return pd.DataFrame()
    cols = ["judge", "mode", "source", "dimension", "n", *OUTCOMES]
    return pd.concat([f[cols].astype({c: str for c in cols[:4]}) for f in frames], ignore_index=True)


def _shifts(tables: Tables) -> pd.DataFrame:
    frames = [t for t in (_read(tables, "mode_shift"), _read(tables, "mode_shift_combined")) if t is not None]
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
    and how many pairs had no strict majority."""
    gap = _read(tables, "preference_gap")
    if gap is None or gap.empty:
        return None
    out = gap[["judge", "mode", "source", "dimension", "n"]].astype(
        {c: str for c in ("judge", "mode", "source", "dimension")}
    )
    out["experts win"] = gap["human_win"].map(pct).to_numpy()
    out["judge win"] = gap["judge_win"].map(pct).to_numpy()
    out["gap [95% CI]"] = [
        _gap(g, lo, hi)
        for g, lo, hi in zip(gap["gap_win"], gap["gap_win_lo"], gap["gap_win_hi"], strict=True)
    ]
    out["McNemar p"] = gap["mcnemar_p"].map(p_value).to_numpy()
    majority = _read(tables, "human_majority")
    if majority is not None and len(majority):
        excluded = majority[["source", "dimension", "n_excluded"]].astype({"source": str, "dimension": str})
        out = out.merge(
            excluded.rename(columns={"n_excluded": "no majority"}), on=["source", "dimension"], how="left"
        )
    return PaperTable(
        "preference_gap",
        "Judges vs the expert majority on the same pairs",
        "win rate of the rated candidate over the reference; experts by strict majority (pairs "
        "without one excluded and counted); gap = judge - experts, in points",
        _ordered(out.fillna("")),
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
    table = _read(tables, "expert_vs_judge")
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
    table = _read(tables, "winner_agreement_by_kind")
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
    table = _read(tables, "expert_vs_judge")
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
    """One dimension's best-of-K mean ± sd per judge × mode × source, with each generator's win and loss
    rates against the reference (the paper's source-boundedness table)."""
    scores = _read(tables, "best_of_k_scores")
    if scores is None or not (scores["dimension"].astype(str) == dimension).any():
        return None
    part = scores.loc[scores["dimension"].astype(str) == dimension]
    out = part[["judge", "mode", "source"]].astype(str)
    out[f"{dimension} (mean ± sd)"] = [mean_sd(m, s) for m, s in zip(part["mean"], part["sd"], strict=True)]
    out["n"] = part["n"].astype(int).to_numpy()
    out["n_judges_min"] = part["n_judges_min"].astype(int).to_numpy()
    rates = _rates(tables)
    if len(rates):
        rates = rates.loc[rates["dimension"] == dimension, ["judge", "mode", "source", "n", "win", "loss"]]
        shown = rates.assign(win=rates["win"].map(pct), loss=rates["loss"].map(pct))
        out = out.merge(
            shown.rename(columns={"n": "n (win / loss)"}), on=["judge", "mode", "source"], how="left"
        )
        n = out["n (win / loss)"].astype("Int64")
        out["n (win / loss)"] = n.astype(object).where(n.notna().to_numpy(), "")
    return PaperTable(
        "boundedness",
        f"{dimension}: best-of-K mean ± sd with win / loss",
        "win / loss of each generator's best-of-K against the reference; n instances and the "
        "fewest judges (n_judges_min) behind the mean, n (win / loss) instances with a reference "
        "score",
        _ordered(out.fillna(""), reference),
    )


def alignment(tables: Tables) -> PaperTable | None:
    """Agreement between a human rater's winner on one dimension and a judge's on another, on the same pairs:
    one row per (dimension A, judge, dimension B), one column per expert and for the majority (the paper
    gives the alignment per expert)."""
    table = _read(tables, "alignment")
    if table is None or table.empty:
        return None
    keys = ["dimension_a", "rater_b", "dimension_b"]
    frame = table.astype({c: str for c in ("rater_a", *keys)})
    frame = frame.assign(
        cell=[
            "" if pd.isna(v) else f"{pct_ci(v, lo, hi)} n={int(n)}"
            for v, lo, hi, n in zip(
                frame["percent"], frame["percent_lo"], frame["percent_hi"], frame["n"], strict=True
            )
        ]
    )
    raters = list(dict.fromkeys(frame["rater_a"]))
    wide = frame.pivot_table(index=keys, columns="rater_a", values="cell", aggfunc="first", sort=False)
    wide = wide.reindex(columns=raters).reset_index()
    wide.columns.name = None
    return PaperTable(
        "alignment",
        "Cross-dimension alignment",
        "share of pairs on which a human rater's winner on dimension A equals the judge's winner on dimension B "
        "[95% CI], n pairs; one column per expert and for the strict majority",
        wide.rename(
            columns={"dimension_a": "human dimension", "rater_b": "judge", "dimension_b": "judge dimension"}
        ).fillna(""),
    )


def _estimate(value: float, lo: float, hi: float, quantity: str) -> str:
    """A win rate as ``27.2% [18.0, 36.4]``, a mean score as ``2.31 [2.10, 2.52]``."""
    if quantity == "win_rate":
        return pct_ci(value, lo, hi)
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
    table = _read(tables, "corrected_estimates")
    if table is None or table.empty:
        return None
    out = table[["judge", "mode", "source", "dimension"]].astype(str).reset_index(drop=True)
    out["quantity"] = table["quantity"].map({"win_rate": "win rate", "mean_score": "mean score"}).to_numpy()
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
    )


BUILDERS: tuple[Callable[[Tables], PaperTable | None], ...] = (
    best_five,
    win_tie_loss_by_mode,
    expert_vs_judge,
    preference_gap,
    agreement_by_kind,
    boundedness,
    boundedness_on_rated_pairs,
    alignment,
    corrected_estimates,
)


def paper_tables(tables: Tables) -> list[PaperTable]:
    """Every paper table the report's tables can fill, in the paper's order."""
    shown = [t for t in (build(tables) for build in BUILDERS) if t is not None]
    overview = _read(tables, "overview")
    rubrics = (
        sorted(map(str, overview["rubric"].dropna().unique()))
        if overview is not None and "rubric" in overview
        else []
    )
    one = f"; rubric {rubrics[0]}" if len(rubrics) == 1 else ""  # several: a column beside the judge
    return [replace(t, frame=rubric_column(t.frame), note=t.note + one) for t in shown]


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


#: LaTeX for characters the tables' names and notes may hold (pdflatex, default OT1 text fonts)
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
    "−": "--",
    "–": "--",
    "—": "---",
    "Δ": r"\ensuremath{\Delta}",
    "κ": r"\ensuremath{\kappa}",
    "ρ": r"\ensuremath{\rho}",
    "α": r"\ensuremath{\alpha}",
    "→": r"\ensuremath{\to}",
    "·": r"\ensuremath{\cdot}",
    "|": r"\ensuremath{|}",
}
_TEX_SPECIAL = re.compile("|".join(map(re.escape, TEX_SPECIAL)))
#: the file's preamble: what to load, and `\judgescopefit`, which scales a table down to the column's width
#: only when it is wider (never up), so every table fits a two-column paper's column without an overfull box
TEX_PREAMBLE = r"""% judgescope paper tables: \input{paper_tables} after \usepackage{booktabs,graphicx}
% every table is numbered and labelled (\label{tab:judgescope-<key>}), set in \small, and scaled down to the
% column's width where it is wider (\judgescopefit)
\ifdefined\judgescopebox\else\newsavebox{\judgescopebox}\fi
\providecommand{\judgescopefit}[1]{\sbox{\judgescopebox}{#1}%
  \ifdim\wd\judgescopebox>\columnwidth\resizebox{\columnwidth}{!}{\usebox{\judgescopebox}}%
  \else\usebox{\judgescopebox}\fi}
"""
#: columns holding names (left-aligned); every other column holds numbers (right-aligned)
TEXT_COLUMNS: tuple[str, ...] = (
    "judge",
    "rubric",
    "mode",
    "source",
    "dimension",
    "rater_a",
    "dimension_a",
    "rater_b",
    "dimension_b",
)


def tex(text: object) -> str:
    """A cell, caption or header as LaTeX text: every special character escaped."""
    return _TEX_SPECIAL.sub(lambda m: TEX_SPECIAL[m.group(0)], str(text))


def _tex_table(t: PaperTable) -> str:
    """One `table` float: \\small, a numbered caption (title: note) and a label, booktabs rules, spanners
    over their columns with \\cmidrule, the tabular scaled to the column where wider."""
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
            r"\begin{table}[t]",
            r"\centering\small",
            rf"\caption{{{tex(t.title)}: {tex(t.note)}.}}\label{{tab:judgescope-{t.key}}}",
            rf"\judgescopefit{{\begin{{tabular}}{{{align}}}",
            r"\toprule",
            *head,
            " & ".join(names) + r" \\",
            r"\midrule",
            *rows,
            r"\bottomrule",
            r"\end{tabular}}",
            r"\end{table}",
        ]
    )


def to_latex(shown: Sequence[PaperTable]) -> str:
    """The tables as LaTeX for a two-column paper (`TEX_PREAMBLE`), one `table` float each."""
    return TEX_PREAMBLE + "\n" + "\n\n".join(_tex_table(t) for t in shown) + "\n"


def write_paper_tables(
    tables: Tables, out_dir: str | Path, one_rater: Sequence[tuple[str, str]] = ()
) -> tuple[Path, Path]:
    """Write paper_tables.md and paper_tables.tex under `out_dir`; return both paths. `one_rater`: pairs of
    judges that are one rater (`analysis.stats.duplicates`), marked in every table's note: an LLM–LLM
    agreement of 100% between them is one model agreeing with itself."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shown = paper_tables(tables)
    if one_rater:
        mark = "; ".join(f"{a} and {b} are one rater (the same model and answers)" for a, b in one_rater)
        shown = [replace(t, note=f"{t.note}. Note: {mark}") for t in shown]
    md, tex = out / "paper_tables.md", out / "paper_tables.tex"
    md.write_text(to_markdown(shown), encoding="utf-8")
    tex.write_text(to_latex(shown), encoding="utf-8")
    return md, tex
