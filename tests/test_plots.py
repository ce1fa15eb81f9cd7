"""The report's figures: legends outside every panel, a CI on every win / tie / loss bar, significance
marked on the shift figure, each generator's own score distribution."""

from __future__ import annotations

import functools

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis import plots
from analysis.report import compute_tables, score_raters
from analysis.synthetic import synthetic_results


@functools.cache
def _tables() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """One planted study and its tables for every test here (computed once)."""
    study = synthetic_results(n_instances=30, shift=3.0, seed=4)
    return study, compute_tables(study, n_boot=100)


def legend_clear_of_axes(fig: Figure) -> bool:
    """True when no figure legend's box overlaps any visible panel's box (after a real draw)."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [
        ax.get_window_extent(renderer)
        for ax in fig.axes
        if ax.get_visible() and ax.get_label() != "<colorbar>"
    ]
    return bool(fig.legends) and all(
        not legend.get_window_extent(renderer).overlaps(box) for legend in fig.legends for box in boxes
    )


def test_winrate_bars_have_three_cis_per_label_and_a_clear_legend() -> None:
    _, tables = _tables()
    fig = plots.winrate_bars(tables["winrate"])
    assert fig is not None and legend_clear_of_axes(fig)
    ax = fig.axes[0]
    n_labels = len(ax.get_yticks())
    whiskers = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    assert len(whiskers) == 3 and all(len(w.get_segments()) == n_labels for w in whiskers)


def test_shift_figure_marks_the_planted_significant_shift() -> None:
    _, tables = _tables()
    shift = tables["mode_shift"]
    assert shift["significant"].any()  # planted: comparative mode lifts every generated candidate by 3
    fig = plots.mode_shift_plot(shift)
    assert fig is not None and legend_clear_of_axes(fig)
    stars = [t for ax in fig.axes for t in ax.texts if t.get_text() == "*"]
    assert len(stars) == int(shift["significant"].sum())


def test_score_distributions_keep_each_generator_apart() -> None:
    study, _ = _tables()
    fig = plots.score_distributions(score_raters(study, None))
    labels = {t.get_text() for t in fig.axes[0].get_yticklabels()}
    assert {"judge_a [independent] · narrow_gen", "judge_a [independent] · broad_gen",
            "judge_a [independent] · reference"} <= labels  # fmt: skip
    assert not any(label.endswith("· gen") for label in labels)


def test_bias_and_consistency_figures_draw_cis() -> None:
    _, tables = _tables()
    consistency = plots.self_consistency_plot(tables["self_consistency"])
    position = plots.position_bias_plot(tables["position_bias"])
    assert consistency is not None and position is not None and legend_clear_of_axes(position)
    assert any(c.__class__.__name__ == "LineCollection" for c in consistency.axes[0].collections)
