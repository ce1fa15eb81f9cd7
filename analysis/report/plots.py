"""Figures of the report, drawn on matplotlib `Figure` objects (no pyplot state, no display needed).

Each function takes the table the report computed and returns a Figure, or None when there is nothing
worth drawing (the report then says so in a sentence). Every estimate is drawn with its 95% CI, and
legends sit outside the axes (above the panels), so they never cover data. A figure is as wide as its
longest label needs (`_content_width`, measured with matplotlib's own text layout) and never narrower than
a paper's column; colours are Okabe and Ito's colour-blind-safe palette.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import cbook
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path
from matplotlib.textpath import TextPath, text_to_path

#: Okabe & Ito (2008), the colour-blind-safe palette: blue, vermillion, bluish green, orange, sky blue,
#: reddish purple, yellow, black
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#E69F00",
    "#56B4E9",
    "#CC79A7",
    "#F0E442",
    "#000000",
)
COLOURS = {"win": "#009E73", "tie": "#BBBBBB", "loss": "#D55E00"}


#: a two-column paper's column is about 3.4 in wide: one panel per row at that width, every label at FONT pt,
#: so a figure reads at the size it is printed
PANEL_WIDTH = 3.4
FONT = 9


#: the plot area a panel keeps beside its row labels, in inches
PLOT_WIDTH = 2.4


def text_width(text: str, size: float = FONT) -> float:
    """`text`'s width in inches at `size` pt in the default font (matplotlib's own layout, no renderer): the
    extent of its outline, as `TextPath(...).get_extents()` gives it, from cached glyph extents
    (`_line_extent`)."""
    if not text:
        return 0.0
    prop = FontProperties()
    return (
        max(_line_extent(line, prop) for line in str(text).split("\n")) * size / text_to_path.FONT_SCALE / 72
    )


@functools.cache
def _line_extent(line: str, prop: FontProperties) -> float:
    """A line's outline width at matplotlib's path size (`FONT_SCALE` pt): the union of its glyphs' outline
    extents placed where the layout puts them, each glyph's measured once (`_glyph_extent`); the same number
    as `TextPath.get_extents` (whose curve-by-curve walk made 107 labels take seconds); mathtext measured whole."""
    if cbook.is_math_text(line):  # mathtext: positions and rules of its own
        path = TextPath((0, 0), line, size=text_to_path.FONT_SCALE, prop=prop)
        return float(path.get_extents().width)
    font = text_to_path._get_font(prop)  # type: ignore[attr-defined]  # noqa: SLF001 (TextPath's own font)
    glyphs, paths, _ = text_to_path.get_glyphs_with_font(font, line)
    spans = [
        (x + lo, x + hi)
        for glyph, x, _, _ in glyphs
        if (span := _glyph_extent(glyph, paths[glyph])) is not None
        for lo, hi in [span]
    ]
    return max(hi for _, hi in spans) - min(lo for lo, _ in spans) if spans else float("-inf")


_GLYPHS: dict[str, tuple[float, float] | None] = {}


def _glyph_extent(glyph: str, outline: tuple[np.ndarray, np.ndarray]) -> tuple[float, float] | None:
    """A glyph's outline x extent (None: nothing drawn, e.g. a space), measured once per glyph."""
    if glyph not in _GLYPHS:
        vertices, codes = outline
        extents = Path(vertices, codes).get_extents() if len(vertices) else None
        _GLYPHS[glyph] = None if extents is None else (float(extents.x0), float(extents.x1))
    return _GLYPHS[glyph]


def _content_width(
    row_labels: Sequence[str] = (), titles: Sequence[str] = (), inside: Sequence[str] = ()
) -> float:
    """A panel's width in inches: its row labels beside a plot area wide enough for its title and axis label
    (both centred over the plot area) and the text drawn inside it (`inside`); never narrower than a
    paper's column (`PANEL_WIDTH`)."""
    rows = max((text_width(t) for t in row_labels), default=0.0) + 0.5  # + ticks, padding, the y label
    area = max([PLOT_WIDTH, *(text_width(t) + 0.2 for t in [*titles, *inside])])
    return max(PANEL_WIDTH, rows + area)


def _grid(
    n: int, rows_per_panel: int, ncols: int = 1, sharex: bool = False, width: float = PANEL_WIDTH
) -> tuple[Figure, list[Axes]]:
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    height = max(1.8, 0.2 * rows_per_panel + 1.0) * nrows + 0.4  # + room for the legend above
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=sharex).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[:n]:
        ax.set_prop_cycle(color=OKABE_ITO)
        ax.tick_params(labelsize=FONT)
        ax.xaxis.label.set_size(FONT)
        ax.yaxis.label.set_size(FONT)
    return fig, axes[:n]


def direction_title(dimension: str, lower: Sequence[str]) -> str:
    """A panel's title: the dimension, and on a lower-is-better one what a win means there."""
    return f"{dimension}\n(lower is better: a win is a lower score)" if dimension in lower else dimension


def _legend_above(fig: Figure, ax: Axes, ncols: int = 4) -> None:
    """The legend in the figure's top margin, outside every panel."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        entry = max(text_width(t) for t in labels) + 0.6  # the handle and the gap to the next entry
        fits = max(1, int(fig.get_size_inches()[0] // entry))
        fig.legend(
            handles, labels, loc="outside upper center", ncols=min(ncols, fits), fontsize=FONT, frameon=False
        )


def _err(mid: pd.Series, lo: pd.Series, hi: pd.Series) -> np.ndarray:
    """Asymmetric error-bar lengths from a CI (NaN bounds draw no whisker)."""
    return np.nan_to_num(np.vstack([mid - lo, hi - mid]).astype(float), nan=0.0).clip(min=0)


def _panels(frame: pd.DataFrame, by: str = "dimension") -> list[str]:
    return sorted(frame[by].astype(str).unique())


def winrate_bars(wtl: pd.DataFrame, lower: Sequence[str] = ()) -> Figure | None:
    """Win, tie and loss stacked in one bar per judge × generator × mode, the modes (independent,
    comparative, …) side by side under each judge · generator, one panel per dimension; whiskers: the
    bootstrap CI of the win share (at its end) and of the loss share (at its start). `lower`: the
    lower-is-better dimensions, whose titles say that a win there is a lower score."""
    if wtl.empty:
        return None
    frame = wtl.assign(
        _group=wtl["judge"].astype(str) + " · " + wtl["source"].astype(str), _mode=wtl["mode"].astype(str)
    )
    modes = sorted(frame["_mode"].unique(), key=lambda m: (MODE_ORDER.index(m) if m in MODE_ORDER else 9, m))
    dims = _panels(frame)
    groups = int(frame.groupby(frame["dimension"].astype(str))["_group"].nunique().max())
    titles = [direction_title(d, lower) for d in dims]
    width = _content_width(modes, titles, [*frame["_group"].unique(), "share of instances (95% CI)"])
    fig, axes = _grid(len(dims), groups * (len(modes) + 1), sharex=True, width=width)
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim]
        names = sorted(part["_group"].unique(), reverse=True)
        base = {g: i * (len(modes) + 1) for i, g in enumerate(names)}
        y = np.array(
            [
                base[g] + len(modes) - 1 - modes.index(m)
                for g, m in zip(part["_group"], part["_mode"], strict=True)
            ]
        )
        left = np.zeros(len(part))
        for name in OUTCOMES:
            ax.barh(y, part[name], left=left, height=0.8, color=COLOURS[name], label=name)
            left = left + part[name].to_numpy(dtype=float)
        ax.errorbar(
            part["win"],
            y,
            xerr=_err(part["win"], part["win_lo"], part["win_hi"]),
            fmt="none",
            ecolor="black",
            capsize=2,
            lw=0.7,
        )
        start = 1 - part["loss"]
        ax.errorbar(
            start,
            y,
            xerr=_err(start, 1 - part["loss_hi"], 1 - part["loss_lo"]),
            fmt="none",
            ecolor="black",
            capsize=2,
            lw=0.7,
        )
        ax.set_yticks(y, part["_mode"])
        for group, at in base.items():
            ax.text(0, at + len(modes) - 0.35, group, fontsize=FONT, va="bottom", ha="left")
        ax.set_ylim(-0.6, max(base.values()) + len(modes) + 0.3)
        ax.set_xlim(0, 1)
        ax.set_title(direction_title(dim, lower), fontsize=FONT)
        ax.set_xlabel("share of instances (95% CI)")
    _legend_above(fig, axes[0], 3)
    return fig


MODE_ORDER: tuple[str, ...] = ("independent", "comparative")
OUTCOMES: tuple[str, ...] = ("win", "tie", "loss")


def significance_label(shift: pd.DataFrame) -> str:
    """What a star means, as the tables say it: McNemar's test, by BH q where the report corrected its
    p-values (`significant` then reads q), else by p."""
    rule = "BH q < 0.05" if "mcnemar_p_q" in shift else "McNemar p < 0.05, uncorrected"
    return f"Δwin significant ({rule}) *"


def mode_shift_plot(shift: pd.DataFrame, lower: Sequence[str] = ()) -> Figure | None:
    """Δwin and Δtie (comparative − independent) with paired bootstrap CIs per judge × generator; a filled
    marker and a star where McNemar's test on win / not-win is significant (by q, as the tables:
    `significance_label`). `lower`: the lower-is-better dimensions (a win there is a lower score)."""
    if shift.empty:
        return None
    dims = _panels(shift)
    frame = shift.assign(_label=shift["judge"].astype(str) + " · " + shift["source"].astype(str))
    rows = int(frame.groupby(frame["dimension"].astype(str))["_label"].nunique().max())
    titles = [direction_title(d, lower) for d in dims]
    width = _content_width(list(frame["_label"].unique()), titles, ["comp. − indep. (95% CI)"])
    fig, axes = _grid(
        len(dims), rows, sharex=True, width=width
    )  # one x scale: shifts compare across dimensions
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim].sort_values("_label", ascending=False)
        y = np.arange(len(part))
        sig = part["significant"].fillna(False).astype(bool).to_numpy()
        for name, offset, colour in (("win", 0.14, COLOURS["win"]), ("tie", -0.14, "#000000")):
            mid = part[f"delta_{name}"]
            ax.errorbar(
                mid,
                y + offset,
                xerr=_err(mid, part[f"delta_{name}_lo"], part[f"delta_{name}_hi"]),
                fmt="none",
                ecolor=colour,
                capsize=2,
                lw=0.8,
            )
            ax.scatter(
                mid[~sig],
                y[~sig] + offset,
                s=22,
                facecolors="white",
                edgecolors=colour,
                zorder=3,
                label=f"Δ{name}",
            )
            if name == "win":
                ax.scatter(
                    mid[sig],
                    y[sig] + offset,
                    s=26,
                    color=colour,
                    zorder=3,
                    label=significance_label(shift),
                )
        for yi, x in zip(y[sig], part["delta_win_hi"].to_numpy()[sig], strict=True):
            ax.annotate("*", (x, yi + 0.14), xytext=(3, -4), textcoords="offset points", fontsize=11)
        ax.axvline(0, color="black", lw=0.6)
        ax.set_yticks(y, part["_label"], fontsize=FONT)
        ax.set_title(direction_title(dim, lower), fontsize=FONT)
        ax.set_xlabel("comp. − indep. (95% CI)")
        ax.margins(x=0.12)  # room for a star beside its whisker
    _legend_above(fig, axes[0], 2)
    return fig


def agreement_heatmap(table: pd.DataFrame, value: str = "kappa_w", title: str = "") -> Figure | None:
    """Rater × rater matrix of one pairwise statistic, each cell with its CI; None with fewer than two raters."""
    pairs = table.loc[table["rater_a"] != "(all)"]
    if pairs.empty:
        return None
    raters = sorted(set(pairs["rater_a"]) | set(pairs["rater_b"]), key=str)
    index = {r: i for i, r in enumerate(raters)}
    matrix = np.full((len(raters), len(raters)), np.nan)
    text: dict[tuple[int, int], str] = {}
    for a, b, v, lo, hi in pairs[["rater_a", "rater_b", value, f"{value}_lo", f"{value}_hi"]].itertuples(
        index=False
    ):
        matrix[index[a], index[b]] = matrix[index[b], index[a]] = v
        text[index[a], index[b]] = text[index[b], index[a]] = f"{v:.2f}\n[{lo:.2f}, {hi:.2f}]"
    side = 1.6 + 1.0 * len(raters)  # a cell holds its value and CI at FONT pt
    names = max(text_width(str(r)) for r in raters)  # the row labels, and the column labels at 45°
    fig = Figure(
        figsize=(max(side + 1.8 + names, text_width(title or value) + 0.5), side + 0.75 * names),
        layout="constrained",
    )
    ax = fig.subplots()
    _matrix(fig, ax, matrix, raters, raters, text, value)
    ax.set_title(title or value, fontsize=FONT)
    return fig


def _matrix(
    fig: Figure,
    ax: Axes,
    matrix: np.ndarray,
    rows: Sequence[str],
    cols: Sequence[str],
    text: dict[tuple[int, int], str],
    label: str,
) -> None:
    finite = matrix[np.isfinite(matrix)]
    image = ax.imshow(
        matrix, vmin=-1 if finite.size and finite.min() < 0 else 0, vmax=1, cmap="viridis", aspect="auto"
    )  # cells as wide as their value and CI at FONT pt, not square
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right", fontsize=FONT)
    ax.set_yticks(range(len(rows)), rows, fontsize=FONT)
    if len(rows) * len(cols) <= 144:
        for (i, j), v in np.ndenumerate(matrix):
            if np.isfinite(v):
                ax.text(
                    j,
                    i,
                    text.get((i, j), f"{v:.2f}"),
                    ha="center",
                    va="center",
                    fontsize=FONT,
                    color="white" if v < 0.5 else "black",
                )
    fig.colorbar(image, ax=ax, shrink=0.8, label=label)


def human_agreement_matrix(agree: pd.DataFrame) -> Figure | None:
    """Judge [mode] × dimension matrix of κ_w with the experts, each cell with its 95% CI (one row per mode:
    a judge's modes are measured apart)."""
    if agree.empty:
        return None
    rater = agree["judge"].astype(str) + (" [" + agree["mode"].astype(str) + "]" if "mode" in agree else "")
    agree = agree.assign(_rater=rater)
    judges, dims = sorted(agree["_rater"].unique()), _panels(agree)
    matrix = np.full((len(judges), len(dims)), np.nan)
    text = {}
    for j, d, v, lo, hi in agree[["_rater", "dimension", "kappa_w", "kappa_w_lo", "kappa_w_hi"]].itertuples(
        index=False
    ):
        key = (judges.index(str(j)), dims.index(str(d)))
        matrix[key] = v
        text[key] = f"{v:.2f}\n[{lo:.2f}, {hi:.2f}]"
    rows, cols = max(map(text_width, judges)), max(map(text_width, dims))
    title = "quadratic-weighted κ, judge vs experts' mean (95% CI)"
    fig = Figure(
        figsize=(
            max(2.4 + rows + 1.2 * len(dims), text_width(title) + 0.5),
            1.8 + 0.6 * len(judges) + 0.75 * cols,
        ),
        layout="constrained",
    )
    ax = fig.subplots()
    _matrix(fig, ax, matrix, judges, dims, text, "κ_w with the experts")
    ax.set_title(title, fontsize=FONT)
    return fig


def score_distributions(cands: pd.DataFrame) -> Figure | None:
    """Box plots of candidate scores per rater and generator (the reference and each generator apart),
    one panel per dimension."""
    if cands.empty:
        return None
    frame = cands.assign(_rater=cands["rater"].astype(str), _source=cands["source"].astype(str))
    dims = _panels(frame)
    groups = frame[["_rater", "_source"]].drop_duplicates().sort_values(["_rater", "_source"])
    names = [f"{r} · {s}" for r, s in groups.itertuples(index=False)]
    fig, axes = _grid(len(dims), len(groups), width=_content_width(names, dims))
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim]
        data, labels = [], []
        for rater, source in groups.itertuples(index=False):
            values = part.loc[(part["_rater"] == rater) & (part["_source"] == source), "score"].dropna()
            if len(values):
                data.append(values.to_numpy())
                labels.append(f"{rater} · {source}")
        if data:
            ax.boxplot(data, orientation="horizontal", tick_labels=labels, showfliers=False)
        ax.tick_params(axis="y", labelsize=FONT)
        ax.set_title(dim, fontsize=FONT)
        ax.set_xlabel("candidate score")
    return fig


def _forest(
    table: pd.DataFrame, value: str, label_cols: Sequence[str], xlabel: str, reference: float | None = None
) -> Figure | None:
    """One point with its CI per row, one panel per dimension."""
    if table.empty or table[value].isna().all():
        return None
    frame = table.assign(_label=table[list(label_cols)].astype(str).agg(" · ".join, axis=1))
    dims = _panels(frame)
    rows = int(frame.groupby(frame["dimension"].astype(str))["_label"].nunique().max())
    fig, axes = _grid(len(dims), rows, width=_content_width(list(frame["_label"].unique()), dims, [xlabel]))
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim].sort_values("_label", ascending=False)
        y = np.arange(len(part))
        ax.errorbar(
            part[value],
            y,
            xerr=_err(part[value], part[f"{value}_lo"], part[f"{value}_hi"]),
            fmt="o",
            ms=4,
            capsize=2,
            lw=0.8,
            color=OKABE_ITO[0],
        )
        if reference is not None:
            ax.axvline(reference, color="black", lw=0.6)
        ax.set_yticks(y, part["_label"], fontsize=FONT)
        ax.set_title(dim, fontsize=FONT)
        ax.set_xlabel(xlabel)
    return fig


def self_consistency_plot(table: pd.DataFrame) -> Figure | None:
    """Krippendorff's α across a prompt's samples per judge × mode, with its bootstrap CI."""
    return _forest(table, "alpha", ["judge", "mode"], "α across samples (95% CI; 1 = identical samples)", 0.0)


def position_bias_plot(table: pd.DataFrame) -> Figure | None:
    """Win rate by shown position (t CI) per judge, against the rate expected without position bias."""
    if table.empty:
        return None
    dims = _panels(table)
    fig, axes = _grid(len(dims), 8, width=_content_width(["0.00"], dims, ["shown position (0 = first)"]))
    for ax, dim in zip(axes, dims, strict=True):
        part = table.loc[table["dimension"].astype(str) == dim]
        for i, (judge, rows) in enumerate(part.groupby(part["judge"].astype(str), sort=True)):
            rows = rows.sort_values("position")
            x = rows["position"].to_numpy(dtype=float) + (i - 0.5) * 0.12
            ax.errorbar(
                x,
                rows["win_rate"],
                yerr=_err(rows["win_rate"], rows["win_lo"], rows["win_hi"]),
                fmt="o-",
                ms=3,
                capsize=2,
                lw=0.8,
                label=judge,
            )
        expected = part.groupby("position")["expected"].mean()
        ax.plot(expected.index.to_numpy(dtype=float), expected, "k--", lw=0.8, label="expected without bias")
        ax.set_title(dim, fontsize=FONT)
        ax.set_xlabel("shown position (0 = first)")
        ax.set_ylabel("share scored best", fontsize=FONT)
    _legend_above(fig, axes[0], 2)
    return fig


def reliability_diagram(bins: pd.DataFrame) -> Figure | None:
    """Observed expert-win frequency vs predicted probability per bin, before (the judge's 0/1 verdict) and
    after calibration, one panel per judge · mode · dimension (analysis.stats.calibration); each point is
    labelled with its bin's n, so a bin of two verdicts does not read like one of two hundred."""
    if bins.empty:
        return None
    frame = bins.assign(_panel=bins[["judge", "mode", "dimension"]].astype(str).agg(" · ".join, axis=1))
    panels = sorted(frame["_panel"].unique())
    xlabel = "predicted probability of an expert win"
    fig, axes = _grid(len(panels), 6, width=_content_width(["0.0"], panels, [xlabel]))
    for ax, name in zip(axes, panels, strict=True):
        part = frame.loc[frame["_panel"] == name]
        for fit, marker in (("before", "s"), ("after", "o")):
            rows = part.loc[part["fit"] == fit].sort_values("mean_predicted")
            ax.plot(rows["mean_predicted"], rows["observed_rate"], marker=marker, ms=4, lw=0.8, label=fit)
            for x, y, n in rows[["mean_predicted", "observed_rate", "n"]].itertuples(index=False):
                ax.annotate(f"n={n}", (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
        ax.plot([0, 1], [0, 1], "k--", lw=0.6)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel("observed frequency", fontsize=9)
    _legend_above(fig, axes[0], 2)
    return fig


def preference_gap_plot(gap: pd.DataFrame) -> Figure | None:
    """The second half of the novelty illusion: per judge × mode × generator, the judge's win rate for the
    generated question minus the experts' (majority) on the same pairs, with its paired bootstrap CI; the
    experts' own rate is the 0 line. A filled marker and a star where the test is significant (BH q, or p
    when the report has no q); one panel per dimension."""
    if gap is None or gap.empty:
        return None
    dims = _panels(gap)
    label = gap["judge"].astype(str) + (" [" + gap["mode"].astype(str) + "]" if "mode" in gap else "")
    frame = gap.assign(_label=label + " · " + gap["source"].astype(str))
    rows = int(frame.groupby(frame["dimension"].astype(str))["_label"].nunique().max())
    fig, axes = _grid(len(dims), rows, sharex=True)
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim].sort_values("_label", ascending=False)
        y = np.arange(len(part))
        sig = (
            part["significant"].fillna(False).astype(bool).to_numpy()
            if "significant" in part
            else np.zeros(len(part), bool)
        )
        mid = part["gap_win"]
        colour = COLOURS["win"]
        ax.errorbar(
            mid,
            y,
            xerr=_err(mid, part["gap_win_lo"], part["gap_win_hi"]),
            fmt="none",
            ecolor=colour,
            capsize=2,
            lw=0.8,
        )
        ax.scatter(
            mid[~sig], y[~sig], s=22, facecolors="white", edgecolors=colour, zorder=3, label="judge − experts"
        )
        ax.scatter(mid[sig], y[sig], s=26, color=colour, zorder=3, label="significant (*)")
        for yi, x in zip(y[sig], part["gap_win_hi"].to_numpy()[sig], strict=True):
            ax.annotate("*", (x, yi), xytext=(3, -4), textcoords="offset points", fontsize=11)
        ax.axvline(0, color="black", lw=0.6)
        ax.set_yticks(y, part["_label"], fontsize=FONT)
        ax.set_title(dim, fontsize=FONT)
        ax.set_xlabel("generated wins: judge − experts (95% CI)")
    _legend_above(fig, axes[0], 2)
    return fig
