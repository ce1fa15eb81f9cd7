"""`python -m analysis.report` keeps working: the code lives in `analysis.report.build`, imported once the
arguments are parsed (`analysis.report.cli`), so `--help` answers without loading the statistics."""

import sys

from analysis.report.cli import parser


def main() -> int:
    """Parse, then import the report (pandas, the statistics, matplotlib) and run it."""
    args = parser().parse_args(sys.argv[1:])
    from analysis.report.build import run  # noqa: PLC0415 (after parsing: `--help` stays light)

    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
