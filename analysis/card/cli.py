"""The arguments of `python -m analysis.card`, on their own: `--help` and a bad option are answered before
pandas or any statistics library is imported (issue 35, item 4)."""

from __future__ import annotations

import argparse

from core.choices import positive_int

DESCRIPTION = "`python -m analysis.card <run-or-multirun-dir> [--humans FILE] [--out DIR]`: one reliability card per judge"


def parser() -> argparse.ArgumentParser:
    """The command's argument parser; --n-null left unset means `analysis.stats.null_ranges.N_REPS`."""
    parser = argparse.ArgumentParser(prog="python -m analysis.card", description=DESCRIPTION)
    parser.add_argument("root", help="a run or multirun folder (searched recursively)")
    parser.add_argument("--humans", help="human labels CSV")
    parser.add_argument("--out", help="output folder (default: <root>/cards)")
    parser.add_argument("--n-boot", type=positive_int, default=1000)
    parser.add_argument(
        "--n-null",
        type=positive_int,
        default=None,
        help="replicates of the unbiased judge behind each flag's range (default 200)",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser
