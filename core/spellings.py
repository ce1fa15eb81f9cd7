"""How the results table spells a true/false cell and an unperturbed row: read by the analysis (which parses a
CSV's text) and by the viewer's SQL alike, from this one light module (the viewer starts without the analysis's
statistics libraries)."""

from __future__ import annotations

# a true/false cell's text, in any case once trimmed ("False" must not read as true by truthiness)
TRUE_TEXT, FALSE_TEXT = frozenset({"true", "1", "1.0", "yes"}), frozenset({"false", "0", "0.0", "no"})
ORIGINAL = "none"  # the perturbation of an unperturbed row (experiment=robustness)
