"""Disagreement-driven human annotation: `python -m analysis.annotate`."""
