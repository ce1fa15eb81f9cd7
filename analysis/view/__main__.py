"""`python -m analysis.view` keeps working: the code lives in `analysis.view.server`."""

from analysis.view.server import main

if __name__ == "__main__":
    raise SystemExit(main())
