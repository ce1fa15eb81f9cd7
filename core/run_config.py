"""A run folder's config.json, typed: the one reader of the resolved config experiments.run writes beside its
results (experiments.config.as_dict, secrets redacted).

The analysis reads a run's rubric (core.rubric.RubricSpec: ranges, choices, directions, wording), its judge's
identity and its `min_parse_rate` here, never by string key; the study's own config is typed in
experiments.config (above this layer). Read with a size cap (core.received); a damaged file is one
RunConfigError line naming it. Only the standard library: every layer may import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.received import ReceivedFileError, read_capped
from core.rubric import Dimension, RubricSpec, spec_from_mapping

RUN_CONFIG = "config.json"  # what experiments.run writes beside each run's results (the resolved config)
CONFIG_MAX_BYTES = 16 * 2**20  # a config is a few kB; a larger file is not one (and is not read whole)

_SPEC_FIELDS = frozenset(f.name for f in fields(RubricSpec))
_DIMENSION_FIELDS = frozenset(f.name for f in fields(Dimension))


class RunConfigError(ValueError):
    """A config.json that cannot be read as a run's config; the message is one line naming the file."""


@dataclass(frozen=True)
class JudgeRef:
    """Which model a run asked, and where (the endpoint as recorded: redacted of credentials)."""

    name: str
    model: str
    api_base: str | None = None


@dataclass(frozen=True)
class RunConfig:
    """What the analysis needs of a run's config.json; None where the file does not say."""

    rubric: RubricSpec | None = None
    judge: JudgeRef | None = None
    min_parse_rate: float | None = None


def read_run_config(folder: Path) -> RunConfig | None:
    """The config.json of the run in `folder` (None when the folder has none); RunConfigError, one line
    naming the file, when it is unreadable or an entry is not what a run writes. Read once per version of the
    file: a multirun's folders are read by every loader."""
    path = Path(folder) / RUN_CONFIG
    try:
        stat = path.stat()
    except OSError:
        return None
    return _read(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=256)
def _read(path: str, _mtime_ns: int, _size: int) -> RunConfig:
    try:
        data = json.loads(read_capped(Path(path), CONFIG_MAX_BYTES, "a run's config").decode("utf-8"))
    except ReceivedFileError as exc:
        raise RunConfigError(str(exc)) from None
    except OSError as exc:
        raise RunConfigError(f"{path}: cannot read the config ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
        why = str(exc).splitlines()[0][:120] if str(exc) else "nested too deep"
        raise RunConfigError(f"{path}: not readable JSON ({why})") from None
    if not isinstance(data, dict):
        raise RunConfigError(f"{path}: a JSON {type(data).__name__}, not a run's config")
    return RunConfig(
        rubric=_entry(path, data, "rubric", _rubric),
        judge=_entry(path, data, "judge", _judge),
        min_parse_rate=_entry(path, data, "min_parse_rate", _rate),
    )


def _entry(path: str, data: dict[str, Any], key: str, read: Any) -> Any:
    """`read(data[key])`, None when absent; one line naming the file and the entry when it is not one."""
    if data.get(key) is None:
        return None
    try:
        return read(data[key])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunConfigError(
            f"{path}: its {key!r} entry is not what a run writes ({type(exc).__name__}: {exc})"
        ) from None


def _rubric(entry: object) -> RubricSpec:
    """The rubric a run used. A config written by hand or by an older judgescope may leave out the template
    and the system prompt (unknown: ""); keys this version does not know are left aside."""
    if not isinstance(entry, dict):
        raise TypeError(f"a {type(entry).__name__}, not a mapping")
    dims = entry.get("dimensions") or []
    if not isinstance(dims, list) or not all(isinstance(d, dict) for d in dims):
        raise TypeError("'dimensions' is not a list of mappings")
    kept = {k: v for k, v in entry.items() if k in _SPEC_FIELDS}
    kept["dimensions"] = [{k: v for k, v in d.items() if k in _DIMENSION_FIELDS} for d in dims]
    return spec_from_mapping({"template": "", "system": "", **kept})


def _judge(entry: object) -> JudgeRef:
    if not isinstance(entry, dict):
        raise TypeError(f"a {type(entry).__name__}, not a mapping")
    api_base = entry.get("api_base")
    return JudgeRef(str(entry["name"]), str(entry["model"]), None if api_base is None else str(api_base))


def _rate(entry: object) -> float:
    if isinstance(entry, bool) or not isinstance(entry, int | float):
        raise TypeError(f"{entry!r:.40} is not a number")
    return float(entry)
