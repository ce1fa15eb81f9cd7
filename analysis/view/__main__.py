"""`python -m analysis.view RUN` serves the viewer (analysis.view.server); `python -m analysis.view bundle
RUN OUT/` writes it as static files (analysis.view.bundle)."""

import sys

from analysis.view.bundle import main as bundle_main
from analysis.view.server import main

if __name__ == "__main__":
    raise SystemExit(bundle_main(sys.argv[2:]) if sys.argv[1:2] == ["bundle"] else main())
