"""`python -m analysis.card` keeps working: the code lives in `analysis.card.build`."""

from analysis.card.build import main

if __name__ == "__main__":
    raise SystemExit(main())
