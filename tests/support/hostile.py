"""Hypothesis strategies and checks shared by the hostile-input property tests (ledgers, Label Studio exports,
viewer query strings, settings)."""

from __future__ import annotations

from hypothesis import strategies as st

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def one_line(text: str) -> bool:
    """A message of one non-empty line with no traceback."""
    return bool(text.strip()) and "\n" not in text and "Traceback" not in text
