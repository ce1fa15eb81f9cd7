"""`python -m analysis.echoreview_report RUN_DIR [--out DIR]`: EchoReview's Overall Quality and pairwise win rate.

* Overall Quality (rows of the ``review_quality`` rubric, e.g. ``experiment=review_quality``: 3 runs at
  T = 0.1): per review, the mean of the four dimensions per run, averaged over the runs, with the review's
  spread across runs (min, max, sd) — ``echoreview_quality_per_review.csv``; per generator, the mean with a
  95% bootstrap CI over reviews — ``echoreview_quality.csv``. Each rater's recorded temperature is checked
  against T = 0.1 (columns ``temperature``, ``temperature_ok``): one that ran otherwise (gpt-5 runs at 1.0)
  is marked ⚠ and named under the table.
* Randomized pairwise win rate (pairwise-mode rows, e.g. ``rubric=review_pairwise mode=pairwise``): win /
  tie / loss per generator pair with bootstrap CIs and position-flip counts — ``echoreview_pairwise.csv``.

Both tables also go to ``echoreview.md``, and each to LaTeX for a two-column paper (``echoreview_quality.tex``,
``echoreview_pairwise.tex``: booktabs, numbered and labelled, never scaled; `analysis.report.paper_tables`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.echoreview.metrics import QUALITY_TEMPERATURE, overall_quality, quality_by_source
from analysis.echoreview.pairwise import comparisons, win_rates
from analysis.echoreview.paper import echoreview_pairwise, echoreview_quality
from analysis.load.collect import load_results
from analysis.report.paper_tables import to_latex
from analysis.stats.modes import kinds_by_mode, modes_of
from core.cells import md_cell, write_csv
from core.intervals import positive_int
from core.modes import ModeKind


def _ci(value: float, lo: float, hi: float) -> str:
    return f"{value:.3f} [{lo:.3f}, {hi:.3f}]" if pd.notna(value) else "–"


def quality_markdown(per_review: pd.DataFrame, by_source: pd.DataFrame) -> list[str]:
    """Overall Quality per rater (judge, mode) and generator, and per review (mean over runs and the spread
    across runs)."""
    lines = [
        "## Overall Quality (mean of the 4 dimensions, averaged over runs)",
        "",
        "| judge | mode | generator | Overall [95% CI] | reviews | unscored | T |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in by_source.iterrows():
        overall = _ci(r["overall"], r["ci_lo"], r["ci_hi"])
        lines.append(
            f"| {md_cell(r['judge'])} | {md_cell(r.get('mode', '–'))} | {md_cell(r['source'])} | {overall} | {r['n']} | "
            f"{r['n_unscored']} | {_temperature_cell(r)} |"
        )
    off = temperature_note(by_source)
    if off:
        lines += ["", off]
    lines += [
        "",
        "| judge | mode | review | generator | Overall | runs | min | max | sd |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in per_review.iterrows():
        vals = [
            f"{r[c]:.2f}" if pd.notna(r[c]) else "–"
            for c in ("overall", "sample_min", "sample_max", "sample_sd")
        ]
        lines.append(
            f"| {md_cell(r['judge'])} | {md_cell(r.get('mode', '–'))} | {md_cell(r['candidate_id'])} | "
            f"{md_cell(r['source'])} | "
            f"{vals[0]} | {r['n_samples']} | " + " | ".join(vals[1:]) + " |"
        )
    return lines


def _temperature_cell(row: pd.Series) -> str:
    """The rater's recorded temperature, marked ⚠ where Overall Quality's T = 0.1 is not what it ran at."""
    temp = "unknown" if pd.isna(row.get("temperature")) else f"{row['temperature']:g}"
    return temp if row.get("temperature_ok") else f"{temp} ⚠"


def temperature_note(by_source: pd.DataFrame) -> str | None:
    """One line naming the raters not recorded at T = 0.1 (⚠ in the table), or None when all are."""
    if "temperature_ok" not in by_source:
        return None
    off = by_source.loc[~by_source["temperature_ok"].astype(bool)]
    if off.empty:
        return None
    raters = sorted(
        {
            f"{r['judge']} ({r.get('mode', '–')}) at T = {_temperature_cell(r).removesuffix(' ⚠')}"
            for _, r in off.iterrows()
        }
    )
    return (
        f"⚠ Overall Quality is defined at T = {QUALITY_TEMPERATURE:g} (EchoReview: three runs at that "
        f"temperature); not comparable with it: {'; '.join(raters)}"
    )


def pairwise_markdown(table: pd.DataFrame) -> list[str]:
    """Win / tie / loss per generator pair and protocol, with the position flips."""
    lines = [
        "## Randomized pairwise win rate",
        "",
        "| judge | dimension | generator | vs | protocol | n (pairs) | win | tie | loss | flips |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        cells = [_ci(r[k], r[f"{k}_lo"], r[f"{k}_hi"]) for k in ("win", "tie", "loss")]
        lines.append(
            f"| {md_cell(r['judge'])} | {md_cell(r['dimension'])} | {md_cell(r['generator'])} | "
            f"{md_cell(r['opponent'])} | {r['protocol']} | "
            f"{r['n']} ({r['n_pairs']}) | " + " | ".join(cells) + f" | {r['n_flip']}/{r['n_both_orders']} |"
        )
    lines += [
        "",
        "`random order`: one presentation order per comparison, drawn with a fixed seed; `both orders`: "
        "the verdict when both orders agree, a flip counted as a tie. `flips`: comparisons whose two orders "
        "disagree / comparisons with both orders scored. `n (pairs)`: comparisons (review pair × "
        "sample) and the review pairs behind them; the CIs resample review pairs.",
    ]
    return lines


def report(results: pd.DataFrame, out: Path, n_boot: int = 2000) -> str:
    """Write the tables that the results support; returns the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    if "rubric" in results.columns and (results["rubric"] == "review_quality").any():
        per_review = overall_quality(results)
        by_source = quality_by_source(per_review, n_boot=n_boot)  # per judge, mode and generator
        write_csv(per_review, out / "echoreview_quality_per_review.csv")
        write_csv(by_source, out / "echoreview_quality.csv")
        (out / "echoreview_quality.tex").write_text(
            to_latex([echoreview_quality(by_source)]), encoding="utf-8"
        )
        lines += quality_markdown(per_review, by_source) + [""]
    if modes_of(kinds_by_mode(results), ModeKind.pair):
        table = win_rates(comparisons(results), n_boot=n_boot)
        write_csv(table, out / "echoreview_pairwise.csv")
        (out / "echoreview_pairwise.tex").write_text(to_latex([echoreview_pairwise(table)]), encoding="utf-8")
        lines += pairwise_markdown(table)
    if not lines:
        raise ValueError("no review_quality rows and no pairwise rows in these results")
    markdown = "\n".join(lines) + "\n"
    (out / "echoreview.md").write_text(markdown, encoding="utf-8")
    return markdown


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--n-boot", type=positive_int, default=2000)
    args = parser.parse_args(argv)
    try:
        markdown = report(load_results(args.root), args.out or args.root, args.n_boot)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
