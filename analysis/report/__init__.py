"""The study report: `python -m analysis.report <run-or-multirun-dir>`."""
