"""`python -m analysis.report <run-or-multirun-dir> [--humans FILE] [--out DIR]`

Collects every results table below the folder, computes the study's tables (docs/statistics.md) and
writes report.md, report.html (tables and embedded figures) and one CSV per table. `compute_tables` is
the whole computation without plotting, which is what benchmarks/analysis_bench.py times.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from analysis import latent
from analysis.load.collect import expected_as_score, expected_missing_note, load_results
from analysis.load.completeness import checked_humans, run_status
from analysis.report import cli
from analysis.report.paper_tables import alignment_note, parse_alignment, write_paper_tables
from analysis.report.summary import banner_lines
from analysis.robustness import note_perturbed, unperturbed
from analysis.stats import corrected, winrate
from analysis.stats.spec import Section
from analysis.tables import registry
from analysis.tables.declarations import (
    UNKNOWN,
    combined_label,
    overview,
    score_raters,
    section_tables,
    winrate_tables,
)
from analysis.tables.registry import StudyInputs
from experiments.duplicates import duplicate_raters

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Tables = dict[str, pd.DataFrame]
__all__ = ["UNKNOWN", "build_figures", "combined_label", "compute_tables", "main", "overview", "score_raters"]
_winrate_tables = winrate_tables  # the win-rate and mode-shift tables of a candidate table, on their own
COMBINED = Section.combined  # the report section of the combined-judge tables


def compute_tables(
    results: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    n_boot: int = 1000,
    seed: int = 0,
    families: Mapping[str, str] | None = None,
    root: str | Path | None = None,
) -> Tables:
    """Every table of the report, keyed by name, in declaration order (`analysis.tables.declarations`); tables that do not
    apply (one judge, no humans, no comparative mode, …) are absent. `root`: the run folder, for the tables
    read from its files (`request_changes`).

    Candidate scores are computed once (`registry.StudyInputs`): the outcome and agreement functions accept a
    candidate-level table in place of the results, since the mean of one "sample" is the candidate score
    itself.
    """
    inputs = StudyInputs(results, humans, reference, n_boot, seed, families, root)
    return registry.compute_tables(inputs)


def build_figures(
    results: pd.DataFrame, tables: Tables, humans: pd.DataFrame | None = None, reference: str = "reference"
) -> dict[str, Figure | None]:
    """Figures keyed by name (None where there is nothing to draw): each declared table's figure."""
    from analysis.report import plots  # matplotlib: only when a figure is drawn

    return registry.draw_figures(tables, StudyInputs(results, humans, reference), plots)


def without_combined(tables: Tables, duplicates: pd.DataFrame) -> Tables:
    """The tables without the combined-judge ones when two judges are one rater (`experiments.duplicates`):
    a mean or a vote of one model with itself counts it twice."""
    if duplicates.empty:
        return tables
    combined = set(section_tables(COMBINED))
    return {name: table for name, table in tables.items() if name not in combined}


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: the arguments (`analysis.report.cli`), then `run`."""
    return run(cli.parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The command on parsed arguments: load, compute, draw and write; a bad input is one line and exit 2."""
    from analysis.report.render import write_report  # matplotlib output only when writing

    try:  # none, shards that cannot be merged, a damaged or hand-edited file: one line (analysis.load.checks)
        pair = parse_alignment(args.alignment) if args.alignment else None
        results = load_results(args.root, latest=args.latest)
        status = run_status(args.root)
        out = Path(args.out) if args.out else Path(args.root) / "report"
        if results.empty:  # e.g. a run stopped by its budget before the first answer: the banner only
            md, _ = write_report({}, {}, out, source=str(args.root), banner=banner_lines(status))
            print(
                f"nothing was answered below {args.root}: no table to compute; the banner says why -> {md}",
                file=sys.stderr,
            )
            return 0
        results = expected_as_score(results) if args.expected else results
        if args.reference is not None:  # the default may be absent (a review_quality study has no reference)
            winrate.check_reference(results, args.reference, args.root)
        reference = args.reference or "reference"
        humans, coverage = checked_humans(args.humans, results)
        if humans is not None:
            humans = corrected.declare_design(humans, args.humans_design, args.humans)
        elif args.humans_design:
            raise ValueError("--humans-design: no --humans file to declare it for")
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:  # a direction the tables cannot use (e.g. higher_is_better "maybe"): one line
        tables = compute_tables(results, humans, reference, args.n_boot, args.seed, root=args.root)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    duplicates = duplicate_raters(results, status)
    tables = without_combined(tables, duplicates)
    figures = build_figures(results, tables, humans, reference)
    banner = banner_lines(status, coverage, duplicates)
    md, html = write_report(tables, figures, out, source=str(args.root), banner=banner)
    pairs = list(zip(duplicates["judge_a"].astype(str), duplicates["judge_b"].astype(str), strict=True))
    paper_md, paper_tex = write_paper_tables(tables, out, pair, one_rater=pairs)
    print(
        f"{len(results)} rows, {len(tables)} tables -> {md} and {html} (paper tables: {paper_md}, {paper_tex})",
        file=sys.stderr,
    )
    if not banner[0].startswith("**Complete**"):  # the first screen's verdict, on the terminal too
        print(f"note: {banner[0].replace('**', '')} (the report's first screen says why)", file=sys.stderr)
    note = alignment_note(tables, pair)
    if note:
        print(note, file=sys.stderr)
    note_perturbed(results, unperturbed(results))
    latent.note_duplicates(tables)
    missing = expected_missing_note(results)
    if missing:
        print(missing, file=sys.stderr)
    if results.attrs.get("duplicate_judgments"):
        print(
            f"note: {results.attrs['duplicate_judgments']} judgments repeated by reruns of the same study were "
            "counted once",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
