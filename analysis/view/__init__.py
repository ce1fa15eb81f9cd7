"""The study viewer: `python -m analysis.view <run-or-multirun-dir>` (DuckDB, FastAPI)."""
