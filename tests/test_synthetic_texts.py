"""analysis.load.synthetic at benchmark scale: the candidate texts stay distinct categories (issue 26, item 3)."""

from __future__ import annotations

import numpy as np

from analysis.load.synthetic import _texts


def test_candidate_texts_are_distinct_at_thousands_of_instances() -> None:
    """3,667 instances (the five-judge scale) drew repeated texts, and `pd.Categorical` refused them."""
    texts = _texts(4000, 10, np.random.default_rng(0))
    assert len(texts) == 40_000 and len(set(texts)) == 40_000
    few = _texts(20, 10, np.random.default_rng(1))
    assert not any(ch.isdigit() for text in few for ch in text)  # a small table's texts are as drawn
