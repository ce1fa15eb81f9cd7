"""Turn a judge's raw text into validated values, or an explicit "unscored" with the reason.

A failure never becomes a default score: callers get `ok=False`, the raw text and a one-line error, so the
row can be re-parsed offline later (e.g. with a more tolerant parser) without paying for the call again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Field:
    """One value the rubric asks for: an integer score in [low, high], or one of `choices`."""

    name: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parsed:
    ok: bool
    values: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


def extract_json_object(raw: str) -> dict[str, Any] | None:
    """The first JSON object in `raw`, tolerating code fences and prose around it; None if there is none."""
    for block in [*_FENCE.findall(raw), raw]:
        start = block.find("{")
        while start != -1:
            try:
                obj, _ = _DECODER.raw_decode(block, start)
            except json.JSONDecodeError:
                start = block.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                return obj
            start = block.find("{", start + 1)
    return None


def _lookup(obj: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """Find `name` case- and separator-insensitively ("Non-Obviousness" matches non_obviousness)."""
    if name in obj:
        return True, obj[name]
    norm = re.sub(r"[\s\-_]", "", name).lower()
    for key, value in obj.items():
        if re.sub(r"[\s\-_]", "", str(key)).lower() == norm:
            return True, value
    return False, None


def _coerce(spec: Field, value: Any) -> tuple[Any, str | None]:
    if spec.choices:
        text = str(value).strip().lower() if isinstance(value, str | bool | int) else None
        if isinstance(value, bool):
            text = "yes" if value else "no"
        if text is None or text not in spec.choices:
            return None, f"{spec.name}: {value!r} is not one of {list(spec.choices)}"
        return text, None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None, f"{spec.name}: {value!r} is not a number"
    try:
        number = float(value)
    except ValueError:
        return None, f"{spec.name}: {value!r} is not a number"
    if not math.isfinite(number) or number != int(number):
        return None, f"{spec.name}: {value!r} is not an integer score"
    if (spec.low is not None and number < spec.low) or (spec.high is not None and number > spec.high):
        return None, f"{spec.name}: {value!r} is outside [{spec.low:g}, {spec.high:g}]"
    return number, None


def validate(obj: Mapping[str, Any], fields: Sequence[Field]) -> Parsed:
    """Check every declared field is present and in range; all-or-nothing, so no half-scored answer."""
    values: dict[str, Any] = {}
    for spec in fields:
        found, value = _lookup(obj, spec.name)
        if not found:
            return Parsed(False, error=f"missing field {spec.name!r}")
        coerced, error = _coerce(spec, value)
        if error:
            return Parsed(False, error=error)
        values[spec.name] = coerced
    return Parsed(True, values)


def parse_object(raw: str, fields: Sequence[Field]) -> Parsed:
    """Parse one JSON object holding all of `fields`."""
    try:
        obj = extract_json_object(raw or "")
        if obj is None:
            return Parsed(False, error="no JSON object in the answer")
        return validate(obj, fields)
    except RecursionError:
        return Parsed(False, error="JSON nested too deeply")


def parse_labelled(raw: str, labels: Sequence[str], fields: Sequence[Field]) -> dict[str, Parsed]:
    """Parse {"Q1": {...}, "Q2": {...}}: one result per label, so one bad entry does not void the rest."""
    try:
        obj = extract_json_object(raw or "")
    except RecursionError:
        obj = None
    if obj is None:
        return {label: Parsed(False, error="no JSON object in the answer") for label in labels}
    out: dict[str, Parsed] = {}
    for label in labels:
        found, inner = _lookup(obj, label)
        if not found:
            out[label] = Parsed(False, error=f"missing entry {label!r}")
        elif not isinstance(inner, Mapping):
            out[label] = Parsed(False, error=f"{label}: expected an object, got {type(inner).__name__}")
        else:
            out[label] = validate(inner, fields)
    return out
