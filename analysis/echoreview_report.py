"""`python -m analysis.echoreview_report` keeps working: the code lives in `analysis.echoreview.report`."""

from analysis.echoreview.report import main

if __name__ == "__main__":
    raise SystemExit(main())
