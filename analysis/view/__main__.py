"""`python -m analysis.view RUN` serves the viewer (analysis.view.server); `python -m analysis.view bundle
RUN OUT/` writes it as static files (analysis.view.bundle)."""

import sys

from analysis.view.server import main

if __name__ == "__main__":
    if sys.argv[1:2] == ["bundle"]:  # the static writer (and the human labels loader) only for `bundle`
        from analysis.view.bundle import main as bundle_main

        raise SystemExit(bundle_main(sys.argv[2:]))
    raise SystemExit(main())
