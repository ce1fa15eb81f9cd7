"""`python -m analysis.annotate` keeps working: the code lives in `analysis.annotate.select`."""

from analysis.annotate.select import main

if __name__ == "__main__":
    raise SystemExit(main())
