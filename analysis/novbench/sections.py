"""Parse Positive / Neutral / Negative novelty-evaluation text into labelled items.

NovBench's reference evaluations (``output_format``) and the generations scored against them are
markdown-ish lists under three headers. Both sides must be parsed the same way, otherwise DistAcc and
Coverage would measure the parser rather than the text. Accepted headers (case-insensitive, optionally
wrapped in ``**``/``__``, prefixed with ``#`` or a bullet, ending with ``:``)::

    Positive Novelty Evaluations      **Neutral**      ### Negative:      Positive: inline item

Items are bullet lines (``- ``, ``* ``, ``• ``, ``+ ``, ``1. ``, ``1) ``) or plain lines inside a section; an
indented non-bullet line directly after an item continues it. Text before the first header is ignored.

Filtering follows ``transfer()`` in the NovBench code (github njust-winchy/llm4novelty,
``code/comment_evaluate.py``): an item equal to "none" or shorter than 10 characters is dropped. We also drop
items that are a single parenthesised or bracketed meta note, e.g. ``*(No positive comments were provided.)*``
or ``[No neutral novelty identified at this stage.]``, which occur in the released data and the human-study
generations and are not evaluations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LABELS: tuple[str, ...] = ("positive", "neutral", "negative")
MIN_ITEM_CHARS = 10  # released NovBench code: len(c) < 10 is dropped

_EMPHASIS = re.compile(r"\*\*|__")
_BULLET = re.compile(r"^(?:[-*•+]|\d+[.)])\s+")
_HEADER = re.compile(
    r"^(?P<label>positive|neutral|negative)"
    r"(?:\s+novelty)?(?:\s+(?:evaluations?|comments?|assessments?|aspects?|points?))?"
    r"\s*(?::\s*(?P<rest>.*))?$",
    re.IGNORECASE,
)
_META_NOTE = re.compile(r"^\*?(?:\([^()]*\)|\[[^\[\]]*\])\*?\.?$")  # one note, not "(1) ... (see §3)"


@dataclass
class Sections:
    """Items per label, in text order; ``found_header`` tells a parse failure from an empty answer."""

    positive: list[str] = field(default_factory=list)
    neutral: list[str] = field(default_factory=list)
    negative: list[str] = field(default_factory=list)
    found_header: bool = False

    @property
    def items(self) -> list[tuple[str, str]]:
        """(label, text) pairs in label order — the unit every NovBench metric is computed on."""
        return [(lab, t) for lab in LABELS for t in getattr(self, lab)]

    @property
    def texts(self) -> list[str]:
        return [t for _, t in self.items]

    def counts(self) -> dict[str, int]:
        return {lab: len(getattr(self, lab)) for lab in LABELS}


def _clean(text: str) -> str:
    text = _EMPHASIS.sub("", text).strip()
    return text.strip("*_ ").strip()


def _keep(item: str) -> bool:
    return item.lower() != "none" and len(item) >= MIN_ITEM_CHARS and not _META_NOTE.match(item)


def parse_sections(text: str | None) -> Sections:
    """Split ``text`` into labelled items (see the module docstring for the accepted format)."""
    out = Sections()
    if not text:
        return out
    label: str | None = None
    raw: dict[str, list[str]] = {lab: [] for lab in LABELS}
    prev_was_item = False
    for line in str(text).splitlines():
        if not line.strip():
            prev_was_item = False
            continue
        indented = line[:1].isspace()
        body = line.strip().lstrip("#").strip()
        bullet = _BULLET.match(body)
        content = body[bullet.end() :] if bullet else body
        header = _HEADER.match(_clean(content))
        if header:
            label = header.group("label").lower()
            out.found_header = True
            rest = (header.group("rest") or "").strip()
            if rest:
                raw[label].append(rest)
            prev_was_item = bool(rest)
            continue
        if label is None:
            continue  # preamble before the first header
        if indented and not bullet and prev_was_item and raw[label]:
            raw[label][-1] = f"{raw[label][-1]} {content.strip()}"
        else:
            raw[label].append(content)
        prev_was_item = True
    for lab in LABELS:
        setattr(out, lab, [c for c in (_clean(x) for x in raw[lab]) if _keep(c)])
    return out
