"""Planted token log-probabilities, as an OpenAI-compatible server returns them, for the expected-score
(G-Eval) tests of the live and batch paths."""

from __future__ import annotations

import math
import re
from typing import Any

# planted distribution of the score token: " 2" and "2" both mean 2; "x" is not a score and is dropped
PLANTED = [(" 2", 0.5), ("2", 0.1), (" 1", 0.2), (" 3", 0.1), (" 0", 0.1), ("x", 0.05)]
PLANTED_EXPECTED = (2 * 0.6 + 1 * 0.2 + 3 * 0.1 + 0 * 0.1) / 1.0  # = 1.7


def planted_logprobs(text: str, planted: list[tuple[str, float]] = PLANTED) -> list[dict[str, Any]]:
    """OpenAI logprobs.content for `text`: every value digit (with its leading space) is one token with the
    planted alternatives; every other piece is certain."""
    out = []
    for piece in re.findall(r" \d+|\s+|[A-Za-z_]+|.", text):
        if piece.strip().isdigit():
            top = [{"token": t, "logprob": math.log(p)} for t, p in planted]
            out.append({"token": piece, "logprob": math.log(0.5), "top_logprobs": top})
        else:
            out.append({"token": piece, "logprob": 0.0, "top_logprobs": [{"token": piece, "logprob": 0.0}]})
    return out
