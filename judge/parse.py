"""Turn a judge's raw text into validated values, or an explicit "unscored" with the reason.

A failure never becomes a default score: callers get `ok=False`, the raw text and a one-line error, so the
row can be re-parsed offline later (e.g. with a more tolerant parser) without paying for the call again.
Numbers are read as a JSON parser reads them (no "1_0", no non-ASCII digits); a label or field given twice
with different values is ambiguous, hence unscored; no answer text, however odd, raises.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import json_repair

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_DIGITS = 64  # a longer integer is no score; reading it would cost (or, past 4,300 digits, raise)
RATIONALE = "rationale"
# The parser's version: a study keeps each answer's parsed scores in the call cache under it, and a replay
# reuses them only when they carry this version (experiments.rows). Bump it with ANY change to what
# parse_object / parse_labelled (or experiments.rows.parse_answer around them) return for some answer, so that
# every cached answer is parsed again by the new code.
PARSER_VERSION = 1


@functools.cache
def parser_dependencies() -> str:
    """What the parser's answers also depend on without a code change here: json-repair repairs cut-off answers,
    and a new json-repair may repair one differently. Kept beside PARSER_VERSION, so an upgrade parses again
    (read from the installed package's metadata when first asked, not at import)."""
    return f"json-repair {metadata.version('json-repair')}"


class LongNumber(str):
    """An integer literal too long to be a score, kept as its text (never converted)."""


class JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers the keys given twice with different values."""

    ambiguous: frozenset[str] = frozenset()


def _object(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj, ambiguous = JsonObject(), set()
    for key, value in pairs:
        if key in obj and obj[key] != value:
            ambiguous.add(key)
        obj[key] = value
    obj.ambiguous = frozenset(ambiguous)
    return obj


def _int(text: str) -> int | LongNumber:
    return LongNumber(text) if len(text.lstrip("-")) > _MAX_DIGITS else int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_int=_int)


@dataclass(frozen=True)
class Field:
    """One value the rubric asks for: an integer score in [low, high], or one of `choices`."""

    name: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parsed:
    """The values of one judged item, or why there are none; `salvaged` = read from a repaired, cut-off
    answer (only entries that arrived complete are kept); `rationale` = the judge's own words, never scored."""

    ok: bool
    values: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    salvaged: bool = False
    rationale: str | None = None


def _decode(text: str, start: int) -> Any:
    """One JSON value at `start`; ValueError (incl. JSONDecodeError) or RecursionError when there is none."""
    return _DECODER.raw_decode(text, start)[0]


def extract_json_object(raw: str) -> dict[str, Any] | None:
    """The first JSON object in `raw`, tolerating code fences and prose around it; None if there is none."""
    for block in [*_FENCE.findall(raw), raw]:
        start = block.find("{")
        while start != -1:
            try:
                obj = _decode(block, start)
            except ValueError:
                start = block.find("{", start + 1)
                continue
            if isinstance(obj, dict):
                return obj
            start = block.find("{", start + 1)
    return None


_SEPARATORS = re.compile(r"[\s\-_]")


@functools.lru_cache(maxsize=4096)
def _norm_text(name: str) -> str:
    return _SEPARATORS.sub("", name).lower()


def _norm(name: object) -> str:
    """`name` without case or separators; memoised (short names only, so a long key in an odd answer is not
    kept): a replay looks up the same few field names in every answer."""
    text = str(name)
    return _norm_text(text) if len(text) <= 64 else _SEPARATORS.sub("", text).lower()


def _lookup(obj: Mapping[str, Any], name: str) -> tuple[str, Any]:
    """Find `name` case- and separator-insensitively ("Non-Obviousness" matches non_obviousness).

    Returns ("found", value), ("missing", None) or ("ambiguous", None) when it was given twice with
    different values (under the same or an equivalent spelling)."""
    wanted = _norm(name)
    matches = [key for key in obj if key == name or _norm(key) == wanted]
    if not matches:
        return "missing", None
    values = [obj[k] for k in matches]
    if any(k in getattr(obj, "ambiguous", ()) for k in matches) or any(v != values[0] for v in values[1:]):
        return "ambiguous", None
    return "found", values[0]


def _number(spec: Field, value: Any) -> tuple[Any, str | None]:
    """A score as a JSON parser reads it: a JSON number, or a string holding exactly one."""
    if isinstance(value, LongNumber):
        return None, f"{spec.name}: a {len(value.lstrip('-'))}-digit number is not a score"
    if isinstance(value, str):
        text = value.strip()
        if not _JSON_NUMBER.fullmatch(text):
            return None, f"{spec.name}: {value[:40]!r} is not a number"
        value = _decode(text, 0) if len(text) <= _MAX_DIGITS else LongNumber(text)
        return _number(spec, value) if isinstance(value, LongNumber) else _range(spec, value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{spec.name}: {str(value)[:40]!r} is not a number"
    return _range(spec, value)


def _range(spec: Field, number: int | float) -> tuple[Any, str | None]:
    if isinstance(number, float) and (not math.isfinite(number) or number != int(number)):
        return None, f"{spec.name}: {number!r} is not an integer score"
    if (spec.low is not None and number < spec.low) or (spec.high is not None and number > spec.high):
        return None, f"{spec.name}: {number!r} is outside [{spec.low:g}, {spec.high:g}]"
    return float(number), None


def _coerce(spec: Field, value: Any) -> tuple[Any, str | None]:
    if not spec.choices:
        return _number(spec, value)
    text = str(value).strip().lower() if isinstance(value, str | bool | int) else None
    if isinstance(value, bool):
        text = "yes" if value else "no"
    if text is None or text not in spec.choices:
        return None, f"{spec.name}: {str(value)[:40]!r} is not one of {list(spec.choices)}"
    return text, None


def _rationale(obj: Mapping[str, Any]) -> str | None:
    status, value = _lookup(obj, RATIONALE)
    return str(value) if status == "found" and value is not None else None


def validate(obj: Mapping[str, Any], fields: Sequence[Field], salvaged: bool = False) -> Parsed:
    """Check every declared field is present and in range; all-or-nothing, so no half-scored answer."""
    values: dict[str, Any] = {}
    for spec in fields:
        status, value = _lookup(obj, spec.name)
        if status == "missing":
            return Parsed(False, error=f"missing field {spec.name!r}", salvaged=salvaged)
        if status == "ambiguous":
            return Parsed(
                False, error=f"field {spec.name!r} given twice with different values", salvaged=salvaged
            )
        coerced, error = _coerce(spec, value)
        if error:
            return Parsed(False, error=error, salvaged=salvaged)
        values[spec.name] = coerced
    return Parsed(True, values, salvaged=salvaged, rationale=_rationale(obj))


def parse_object(raw: str, fields: Sequence[Field]) -> Parsed:
    """Parse one JSON object holding all of `fields`."""
    try:
        obj = extract_json_object(raw or "")
    except RecursionError:
        return Parsed(False, error="JSON nested too deeply")
    if obj is None:
        return Parsed(False, error="no JSON object in the answer")
    return validate(obj, fields)


def salvage_object(raw: str) -> dict[str, Any] | None:
    """The complete entries of a cut-off (or slightly malformed) top-level object, repaired by json-repair.

    Every entry before the last one was closed before the next began; the last is kept only when its value
    parses on its own in the original text (a cut-off "Q3": {"originality": 2, ... is dropped)."""
    start = raw.find("{")
    if start == -1:
        return None
    text = raw[start:]
    try:
        obj = _decode(json_repair.repair_json(text), 0)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not obj:
        return None
    last = list(obj)[-1]
    at = [m.end() for m in re.finditer(re.escape(json.dumps(last)) + r"\s*:\s*", text)]
    try:
        complete = bool(at) and _decode(text, at[-1]) == obj[last]
    except (ValueError, RecursionError):
        complete = False
    if not complete:
        del obj[last]
    return obj


def _repeated(raw: str, label: str) -> bool:
    """A label key that occurs twice in a repaired answer (json-repair keeps only the last of the two)."""
    return len(re.findall(re.escape(json.dumps(label)) + r"\s*:", raw)) > 1


def parse_labelled(raw: str, labels: Sequence[str], fields: Sequence[Field]) -> dict[str, Parsed]:
    """Parse {"Q1": {...}, "Q2": {...}}: one result per label, so one bad entry does not void the rest.

    An answer without a complete object (cut at max_tokens) is salvaged: the entries that arrived complete
    are scored (marked `salvaged`), the missing ones are unscored."""
    raw = raw or ""
    try:
        obj, salvaged = extract_json_object(raw), False
    except RecursionError:
        obj, salvaged = None, False
    if obj is None or not any(_lookup(obj, label)[0] != "missing" for label in labels):
        # no complete object, or only an inner one (a cut-off answer still holds complete entries)
        repaired = salvage_object(raw)
        if repaired is not None and (
            obj is None or any(_lookup(repaired, lb)[0] != "missing" for lb in labels)
        ):
            obj, salvaged = repaired, True
    if obj is None:
        return {label: Parsed(False, error="no JSON object in the answer") for label in labels}
    out: dict[str, Parsed] = {}
    for label in labels:
        status, inner = _lookup(obj, label)
        if status == "ambiguous" or (status == "found" and salvaged and _repeated(raw, label)):
            out[label] = Parsed(False, error=f"entry {label!r} given twice with different values")
        elif status == "missing":
            cut = " (cut off)" if salvaged else ""
            out[label] = Parsed(False, error=f"missing entry {label!r}{cut}", salvaged=salvaged)
        elif not isinstance(inner, Mapping):
            out[label] = Parsed(False, error=f"{label}: expected an object, got {type(inner).__name__}")
        else:
            out[label] = validate(inner, fields, salvaged)
    return out
