"""Checked reading of JSONL dataset files: every problem reported as ``file:line: field: message``.

Shared by every dataset loader (instances, RQ-Bench, NovBench): a loader records *all* problems of a file
in a :class:`ProblemLog` and then raises one :class:`DatasetError`, so a user fixes a file in one pass.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """A dataset file is invalid; ``problems`` lists every ``file:line: field: message`` found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems: list[str] = list(problems) or ["<dataset>: <file>: invalid dataset"]
        more = len(self.problems) - 1
        suffix = f" (and {more} more problem{'' if more == 1 else 's'})" if more else ""
        super().__init__(self.problems[0] + suffix)


class ProblemLog:
    """Collects the problems of one file so a loader can report them all at once."""

    def __init__(self, file: str | Path) -> None:
        self.file = str(file)
        self.items: list[str] = []

    def add(self, line: int | None, field: str, message: str) -> None:
        """Record ``file:line: field: message`` (no line for whole-file problems)."""
        where = self.file if line is None else f"{self.file}:{line}"
        self.items.append(f"{where}: {field}: {message}")

    def raise_if_any(self) -> None:
        """Raise one DatasetError carrying every problem recorded so far."""
        if self.items:
            raise DatasetError(self.items)


def read_jsonl(path: Path, log: ProblemLog) -> list[tuple[int, Any]]:
    """(line number, parsed JSON value) for each non-blank line; undecodable lines become problems.

    Lines are split on b"\\n" before decoding so numbering matches editors and one bad byte only
    costs its own line.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        log.add(None, "<file>", "does not exist")
        return []
    except IsADirectoryError:
        log.add(None, "<file>", "is a directory, not a JSONL file")
        return []
    except OSError as exc:
        log.add(None, "<file>", f"cannot be read ({exc.strerror or exc})")
        return []
    rows: list[tuple[int, Any]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            log.add(
                number, "<utf-8>", f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at col {exc.start + 1})"
            )
            continue
        if not text.strip():
            continue
        try:
            value = json.loads(text)
            where = _lone_surrogate(value) if b"\\u" in raw else None
            if where is not None:
                log.add(
                    number, where or "<json>", "holds a lone surrogate escape (e.g. \\ud800), not valid text"
                )
                continue
            rows.append((number, value))
        except json.JSONDecodeError as exc:
            log.add(number, "<json>", f"invalid JSON ({exc.msg} at col {exc.colno})")
        except (ValueError, RecursionError) as exc:  # over-long integers, absurd nesting
            log.add(number, "<json>", f"invalid JSON ({type(exc).__name__}: {str(exc)[:80]})")
    return rows


def _lone_surrogate(value: Any, path: str = "") -> str | None:
    """The field path of the first string (key or value) holding a lone surrogate, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        label = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and _lone_surrogate(key) is not None:
            return f"{path}.<key>" if path else "<key>"  # (the key itself cannot be printed)
        found = _lone_surrogate(item, label)
        if found is not None:
            return found
    return None


def key_label(key: str) -> str:
    """A key as it appears in a problem's field path (quoted when it is not a plain name)."""
    return key if key.replace("_", "a").isalnum() and key.isascii() else json.dumps(key)


def get_str(
    obj: dict[str, Any],
    key: str,
    path: str,
    line: int,
    log: ProblemLog,
    *,
    required: bool = True,
    empty_ok: bool = False,
) -> str | None:
    """obj[key] if it is a (non-empty unless empty_ok) string, else record why and return None."""
    if key not in obj:
        if required:
            log.add(line, path, "is required")
        return None
    value = obj[key]
    if not isinstance(value, str):
        log.add(line, path, "must be a string" if empty_ok else "must be a non-empty string")
        return None
    if not empty_ok and not value.strip():
        log.add(line, path, "must be a non-empty string")
        return None
    return value


def get_list(
    obj: dict[str, Any],
    key: str,
    line: int,
    log: ProblemLog,
    *,
    required: bool = True,
    non_empty: bool = False,
) -> list[Any] | None:
    """obj[key] if it is a list (non-empty when asked), else record why and return None."""
    if key not in obj:
        if required:
            log.add(line, key, "is required")
        return None
    value = obj[key]
    if not isinstance(value, list) or (non_empty and not value):
        log.add(line, key, "must be a non-empty list" if non_empty else "must be a list")
        return None
    return value
