"""`python -m analysis.novbench_report` keeps working: the code lives in `analysis.novbench.report`."""

from analysis.novbench.report import main

if __name__ == "__main__":
    raise SystemExit(main())
