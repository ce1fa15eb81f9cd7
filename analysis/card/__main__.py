"""`python -m analysis.card` keeps working: the code lives in `analysis.card.build`, imported once the
arguments are parsed (`analysis.card.cli`), so `--help` answers without loading the statistics."""

import sys

from analysis.card.cli import parser


def main() -> int:
    """Parse, then import the cards (pandas and the statistics) and run them."""
    args = parser().parse_args(sys.argv[1:])
    from analysis.card.build import run  # noqa: PLC0415 (after parsing: `--help` stays light)

    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
