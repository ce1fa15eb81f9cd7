"""The report's figures: legends outside every panel, a CI on every win / tie / loss bar, significance
marked on the shift figure, each generator's own score distribution."""

from __future__ import annotations

import functools

import matplotlib.colors
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.load.synthetic import synthetic_results
from analysis.report import plots
from analysis.report.build import compute_tables, score_raters


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


def test_winrate_bars_stack_win_tie_loss_with_the_modes_side_by_side() -> None:
    """One bar per judge × generator × mode whose win, tie and loss segments stack to 1, independent and
    comparative next to each other under their judge · generator, a CI whisker for win and for loss on every
    bar (were: three unstacked bars per judge · mode · generator label)."""
    _, tables = _tables()
    wtl = tables["winrate"]
    fig = plots.winrate_bars(wtl)
    assert fig is not None and legend_clear_of_axes(fig)
    ax = fig.axes[0]
    bars = len(wtl.loc[wtl["dimension"].astype(str) == ax.get_title()])
    assert [t.get_text() for t in ax.get_yticklabels()].count("independent") == bars // 2
    widths = {}
    for patch in ax.patches:  # segments of one bar share its y
        widths[round(patch.get_y(), 6)] = widths.get(round(patch.get_y(), 6), 0) + patch.get_width()
    assert len(widths) == bars and all(abs(w - 1) < 1e-9 for w in widths.values())
    groups = {t.get_text() for t in ax.texts}
    assert groups == {f"{j} · {g}" for j in ("judge_a", "judge_b") for g in ("broad_gen", "narrow_gen")}
    whiskers = [c for c in ax.collections if c.__class__.__name__ == "LineCollection"]
    assert len(whiskers) == 2 and all(len(w.get_segments()) == bars for w in whiskers)


def every_text(fig: Figure) -> list:
    """Every piece of text drawn: titles, axis and tick labels, annotations, legends, colour bars."""
    FigureCanvasAgg(fig).draw()
    texts = [t for t in fig.findobj(lambda a: a.__class__.__name__ in ("Text", "Annotation"))]
    return [t for t in texts if t.get_text().strip() and t.get_visible()]


def test_every_figure_reads_at_a_column_width_with_labels_of_9pt_or_more() -> None:
    """Panels 3.4 in wide (a two-column paper's column), one per row; every label 9 pt or more (were 6-8 pt on
    16 in wide figures); the mode-shift panels share one x axis, so shifts compare across dimensions."""
    study, tables = _tables()
    figures = {
        "winrate": plots.winrate_bars(tables["winrate"]),
        "mode_shift": plots.mode_shift_plot(tables["mode_shift"]),
        "self_consistency": plots.self_consistency_plot(tables["self_consistency"]),
        "position_bias": plots.position_bias_plot(tables["position_bias"]),
        "scores": plots.score_distributions(score_raters(study, None)),
        "agreement": plots.agreement_heatmap(tables["winner_agreement"], "kappa", "κ"),
    }
    for name, fig in figures.items():
        small = {(t.get_text(), t.get_fontsize()) for t in every_text(fig) if t.get_fontsize() < 9}
        assert not small, name
        if name != "agreement":  # at least a column wide; wider where a label needs it
            assert fig.get_size_inches()[0] >= plots.PANEL_WIDTH, name
    heat = figures["agreement"].axes[
        0
    ]  # every cell's value and CI inside its cell (CIs overflowed the cells)
    renderer = figures["agreement"].canvas.get_renderer()  # type: ignore[attr-defined]
    cell = heat.get_window_extent(renderer).width / len(heat.get_xticks())
    assert heat.texts and all(t.get_window_extent(renderer).width < cell for t in heat.texts)
    shift = figures["mode_shift"].axes
    assert len(shift) == 2 and shift[0].get_shared_x_axes().joined(shift[0], shift[1])
    assert shift[0].get_xlim() == shift[1].get_xlim()


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
    assert {
        "judge_a [independent] · narrow_gen",
        "judge_a [independent] · broad_gen",
        "judge_a [independent] · reference",
    } <= labels
    assert not any(label.endswith("· gen") for label in labels)


def test_bias_and_consistency_figures_draw_cis() -> None:
    _, tables = _tables()
    consistency = plots.self_consistency_plot(tables["self_consistency"])
    position = plots.position_bias_plot(tables["position_bias"])
    assert consistency is not None and position is not None and legend_clear_of_axes(position)
    assert any(c.__class__.__name__ == "LineCollection" for c in consistency.axes[0].collections)


LONG = {
    "judges": ("a_rather_long_judge_name", "judge_b"),
    "generators": ("narrow_generator_with_a_long_name", "broad_gen"),
    "dimensions": ("diagnostic_framing", "originality"),
}


def _clipped(fig: Figure) -> list[str]:
    """The texts whose drawn extent leaves the canvas (matplotlib's renderer, after a real draw); a tick
    label counts only where its tick is inside the axis' view (matplotlib draws no other)."""
    texts = every_text(fig)
    ticks, drawn = set(), set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels = {id(tick.label1), id(tick.label2)}
                ticks |= labels
                if low - 1e-9 <= tick.get_loc() <= high + 1e-9:
                    drawn |= labels
    texts = [t for t in texts if id(t) not in ticks or id(t) in drawn]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    width, height = fig.canvas.get_width_height()
    out = []
    for t in texts:
        box = t.get_window_extent(renderer)
        if box.x0 < -0.5 or box.y0 < -0.5 or box.x1 > width + 0.5 or box.y1 > height + 0.5:
            out.append(t.get_text())
    return out


def test_figures_are_as_wide_as_their_labels_and_clip_no_text() -> None:
    """Issue 37 item 2: mode_shift, winrate and score_distributions were 3.4 in (374 px) whatever their
    labels, so "diagnostic_framing" read "diagnostic_frami" and row labels lost their start. Every text of
    every figure now lies inside its canvas, the width follows the longest label, the stars are by q as in
    the tables, a lower-is-better panel says what a win means, and the colours are Okabe-Ito's."""
    study = synthetic_results(n_instances=12, shift=3.0, seed=4, n_samples=2, **LONG)  # type: ignore[arg-type]
    tables = compute_tables(study, n_boot=50)
    lower = ["diagnostic_framing"]  # synthetic_results: lower is better there
    figures = {
        "winrate": plots.winrate_bars(tables["winrate"], lower),
        "mode_shift": plots.mode_shift_plot(tables["mode_shift"], lower),
        "scores": plots.score_distributions(score_raters(study, None)),
        "self_consistency": plots.self_consistency_plot(tables["self_consistency"]),
        "position_bias": plots.position_bias_plot(tables["position_bias"]),
        "agreement": plots.agreement_heatmap(tables["winner_agreement"], "kappa", "κ"),
    }
    for name, fig in figures.items():
        assert fig is not None and fig.get_layout_engine() is not None, name
        assert not _clipped(fig), (name, _clipped(fig))
    for name in ("winrate", "mode_shift", "scores"):
        assert figures[name].get_size_inches()[0] > plots.PANEL_WIDTH, name  # wider than the fixed 3.4 in
    titles = [ax.get_title() for ax in figures["winrate"].axes]
    assert (
        "diagnostic_framing\n(lower is better: a win is a lower score)" in titles and "originality" in titles
    )
    legend = [t.get_text() for t in figures["mode_shift"].legends[0].get_texts()]
    assert "Δwin significant (BH q < 0.05) *" in legend and not any("p < 0.05" in t for t in legend)
    colours = {matplotlib.colors.to_hex(p.get_facecolor()) for p in figures["winrate"].axes[0].patches}
    assert colours == {plots.COLOURS[o].lower() for o in ("win", "tie", "loss")}
    assert {plots.COLOURS["win"], plots.COLOURS["loss"]} <= set(plots.OKABE_ITO)
