"""The arguments of `python -m analysis.report`, on their own: `--help` and a bad option are answered before
pandas, matplotlib or any statistics library is imported (issue 35, item 4)."""

from __future__ import annotations

import argparse

from core.choices import positive_int

#: the --humans-design choices: `analysis.stats.corrected.RANDOM` (a test checks they agree; importing the
#: statistics here would load ppi-py and scipy for `--help`)
DESIGNS: tuple[str, ...] = ("random",)


def parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.report",
        description="Collect every results table below a run or multirun folder and write report.md, report.html, "
        "figures and one CSV per table.",
    )
    parser.add_argument("root", help="a run folder or a multirun folder (searched recursively)")
    parser.add_argument(
        "--humans", help="human labels CSV: annotator, instance_id, candidate_id, source, dimension, score"
    )
    parser.add_argument(
        "--humans-design",
        choices=list(DESIGNS),
        help="how the --humans items were chosen, for a labels file that records no design (one collected "
        "elsewhere): random (a simple random sample of the judged units); without it, no corrected estimate",
    )
    parser.add_argument("--out", help="output folder (default: <root>/report)")
    parser.add_argument(
        "--reference",
        help="source name of the reference candidate (default: reference; a name given must occur)",
    )
    parser.add_argument(
        "--n-boot", type=positive_int, default=1000, help="bootstrap replicates (default 1000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--expected", action="store_true", help="analyse score_expected (G-Eval) for score")
    parser.add_argument(
        "--latest",
        action="store_true",
        help="of two results files holding the same run (a sweep and its continuation in one folder), keep the newer",
    )
    parser.add_argument(
        "--alignment",
        metavar="human:DIM,judge:DIM",
        help="the cross-dimension pair of the paper tables' alignment table (default "
        "human:non_obviousness,judge:source_boundedness, the RQ-Bench paper's)",
    )
    return parser
