"""Figures of the report, drawn on matplotlib `Figure` objects (no pyplot state, no display needed).

Each function takes the table the report computed and returns a Figure, or None when there is nothing
worth drawing (the report then says so in a sentence).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

COLOURS = {"win": "#4c9f70", "tie": "#b8b8b8", "loss": "#d1605e"}


def _grid(n: int, rows_per_panel: int, ncols: int = 3) -> tuple[Figure, list]:
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(5.2 * ncols, max(2.0, 0.32 * rows_per_panel + 1.2) * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def winrate_bars(wtl: pd.DataFrame) -> Figure | None:
    """Stacked win/tie/loss bars per judge × mode × generator, one panel per dimension, win CI whiskers."""
    if wtl.empty:
        return None
    dims = sorted(wtl["dimension"].astype(str).unique())
    labels_of = wtl.assign(
        _label=wtl["judge"].astype(str) + " · " + wtl["mode"].astype(str) + " · " + wtl["source"].astype(str)
    )
    n_rows = labels_of.groupby(labels_of["dimension"].astype(str))["_label"].nunique().max()
    fig, axes = _grid(len(dims), int(n_rows))
    for ax, dim in zip(axes, dims, strict=True):
        part = labels_of.loc[labels_of["dimension"].astype(str) == dim].sort_values("_label", ascending=False)
        y = np.arange(len(part))
        left = np.zeros(len(part))
        for name in ("win", "tie", "loss"):
            ax.barh(y, part[name], left=left, color=COLOURS[name], label=name)
            left = left + part[name].to_numpy()
        err = np.vstack([part["win"] - part["win_lo"], part["win_hi"] - part["win"]]).clip(min=0)
        ax.errorbar(part["win"], y, xerr=err, fmt="none", ecolor="black", capsize=2, lw=0.8)
        ax.set_yticks(y, part["_label"], fontsize=7)
        ax.set_xlim(0, 1)
        ax.set_title(dim, fontsize=9)
        ax.set_xlabel("share of instances")
    axes[0].legend(fontsize=7, loc="lower right")
    return fig


def mode_shift_plot(shift: pd.DataFrame) -> Figure | None:
    """Δwin and Δtie (comparative − independent) with paired bootstrap CIs, per judge × generator."""
    if shift.empty:
        return None
    dims = sorted(shift["dimension"].astype(str).unique())
    frame = shift.assign(_label=shift["judge"].astype(str) + " · " + shift["source"].astype(str))
    fig, axes = _grid(len(dims), int(frame.groupby(frame["dimension"].astype(str))["_label"].nunique().max()))
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim].sort_values("_label", ascending=False)
        y = np.arange(len(part))
        for name, offset, colour in (("win", 0.12, COLOURS["win"]), ("tie", -0.12, "#6b6b6b")):
            mid = part[f"delta_{name}"].to_numpy()
            err = np.vstack([mid - part[f"delta_{name}_lo"], part[f"delta_{name}_hi"] - mid]).clip(min=0)
            ax.errorbar(mid, y + offset, xerr=err, fmt="o", color=colour, ms=4, capsize=2, label=f"Δ{name}")
        ax.axvline(0, color="black", lw=0.6)
        ax.set_yticks(y, part["_label"], fontsize=7)
        ax.set_title(dim, fontsize=9)
        ax.set_xlabel("comparative − independent")
    axes[0].legend(fontsize=7)
    return fig


def agreement_heatmap(table: pd.DataFrame, value: str = "kappa_w", title: str = "") -> Figure | None:
    """Rater × rater matrix of one pairwise statistic; None with fewer than two raters."""
    pairs = table.loc[table["rater_a"] != "(all)"]
    if pairs.empty:
        return None
    raters = sorted(set(pairs["rater_a"]) | set(pairs["rater_b"]), key=str)
    index = {r: i for i, r in enumerate(raters)}
    matrix = np.full((len(raters), len(raters)), np.nan)
    for a, b, v in pairs[["rater_a", "rater_b", value]].itertuples(index=False):
        matrix[index[a], index[b]] = matrix[index[b], index[a]] = v
    side = 1.2 + 0.55 * len(raters)
    fig = Figure(figsize=(side + 1.5, side), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(matrix, vmin=-1 if np.nanmin(matrix) < 0 else 0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(raters)), raters, rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(raters)), raters, fontsize=7)
    for (i, j), v in np.ndenumerate(matrix):
        if np.isfinite(v) and len(raters) <= 16:
            ax.text(
                j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="white" if v < 0.5 else "black"
            )
    fig.colorbar(image, ax=ax, shrink=0.8, label=value)
    ax.set_title(title or value, fontsize=9)
    return fig


def score_distributions(cands: pd.DataFrame, reference: str = "reference") -> Figure | None:
    """Box plots of candidate scores per rater, reference vs generated, one panel per dimension."""
    if cands.empty:
        return None
    frame = cands.assign(
        _rater=cands["rater"].astype(str),
        _kind=np.where(cands["source"].astype(str) == reference, "ref", "gen"),
    )
    dims = sorted(frame["dimension"].astype(str).unique())
    raters = sorted(frame["_rater"].unique())
    fig, axes = _grid(len(dims), 2 * len(raters))
    for ax, dim in zip(axes, dims, strict=True):
        part = frame.loc[frame["dimension"].astype(str) == dim]
        data, labels = [], []
        for rater in raters:
            for kind in ("ref", "gen"):
                values = part.loc[(part["_rater"] == rater) & (part["_kind"] == kind), "score"].dropna()
                if len(values):
                    data.append(values.to_numpy())
                    labels.append(f"{rater} · {kind}")
        if data:
            ax.boxplot(data, orientation="horizontal", tick_labels=labels, showfliers=False)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(dim, fontsize=9)
        ax.set_xlabel("candidate score")
    return fig
