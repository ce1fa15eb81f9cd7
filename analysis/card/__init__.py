"""One reliability card per judge: `python -m analysis.card <run-or-multirun-dir>`."""
