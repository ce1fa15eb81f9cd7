"""The closest valid name to a typo (`mode=comparitive`: did you mean comparative?), for the one-line messages
that list a setting's choices: a list of 20 judges is read faster with the likely one named; and the commands'
argument types, light enough for `--help` to answer before numpy or pandas load."""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Iterable


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """ "; did you mean X?" (or "X or Y") for the choices closest to `value` (difflib's ratio 0.6 and up,
    case ignored), "" when none is close."""
    names = [str(c) for c in choices]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(str(value).lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]}?" if close else ""


def positive_int(text: str) -> int:
    """argparse `type` for --n-boot: 0 replicates would leave every CI empty without a word, and a negative
    count surfaced as numpy's "negative dimensions are not allowed" without naming the option."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {text!r}")
    return value
