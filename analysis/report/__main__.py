"""`python -m analysis.report` keeps working: the code lives in `analysis.report.build`."""

from analysis.report.build import main

if __name__ == "__main__":
    raise SystemExit(main())
