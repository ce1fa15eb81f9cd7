"""The schemas of a run folder: the contracts between the study (which writes them) and the analysis.

- The results table: `experiments.rows` writes exactly `COLUMNS`, in this order; `analysis.load.collect` reads
  `ANALYSIS_COLUMNS` and types them from here, and the viewer (analysis.view.sql) takes its DuckDB column
  types from `view_types()`. Add a column here (and fill it in `experiments.rows`); nothing else keeps a list.
- `manifest.json`: the typed, versioned `Manifest` of a study run, written by `write_manifest`
  (experiments.study) and read only through `read_manifest` / `run_manifest`, which turn a damaged file into
  one `ManifestError` line naming it. A manifest written before the version field (`schema_version` 0) still
  loads. The generation and extraction stages write theirs (`GenerationManifest`, `ExtractionManifest`)
  through the same writer, at the same version.

Only the standard library: every layer (the judge package included, once this module moves below it) may
import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from core.received import ReceivedFileError, read_capped


@dataclass(frozen=True)
class Column:
    """One column of results.parquet / results.csv: its name, its type, whether the analysis reads it
    (`analysis`), whether it is a repeated string key it groups by (`key`: loaded as a categorical) and
    whether the viewer's table has it (`view`: typed there as `DUCKDB_TYPES[dtype]`)."""

    name: str
    dtype: str
    doc: str
    analysis: bool = False
    key: bool = False
    view: bool = False


SCHEMA: tuple[Column, ...] = (
    Column("run_id", "string", "the run's folder name", analysis=True, key=True, view=True),
    Column("judge", "string", "judge config name", analysis=True, key=True, view=True),
    Column("model", "string", "the provider's model name", analysis=True, key=True),
    Column(
        "mode",
        "string",
        "study mode name (independent, comparative, pairwise, ...)",
        analysis=True,
        key=True,
        view=True,
    ),
    Column(
        "mode_kind",
        "string",
        "what the mode shows (core.modes.ModeKind): single, multi (positions shown) or pair (both orders)",
        analysis=True,
        key=True,
        view=True,
    ),
    Column("rubric", "string", "rubric name", analysis=True, key=True, view=True),
    Column("rubric_version", "string", "hash of the rubric's template and spec", analysis=True, key=True),
    Column(
        "prompt_id",
        "string",
        "the prompt the row was judged in (prompts.parquet)",
        analysis=True,
        key=True,
        view=True,
    ),
    Column("instance_id", "string", "dataset instance", analysis=True, key=True, view=True),
    Column("candidate_id", "string", "the judged text", analysis=True, key=True, view=True),
    Column("source", "string", "'reference' or the generator's name", analysis=True, key=True, view=True),
    Column(
        "other_id", "string", "pairwise: the text it was compared with", analysis=True, key=True, view=True
    ),
    Column(
        "order",
        "string",
        "pairwise: 'ab' when the judged text was shown first, else 'ba'",
        analysis=True,
        key=True,
        view=True,
    ),
    Column("dimension", "string", "rubric dimension", analysis=True, key=True, view=True),
    Column("higher_is_better", "boolean", "the dimension's direction, from the rubric spec", analysis=True),
    # the dimension's range: the analysis checks a score against the rubric the run used, never a config file
    Column(
        "score_min",
        "float64",
        "the dimension's lowest score, from the rubric spec (NaN: a preference)",
        analysis=True,
    ),
    Column(
        "score_max",
        "float64",
        "the dimension's highest score, from the rubric spec (NaN: a preference)",
        analysis=True,
    ),
    Column("sample_idx", "int64", "sample index (seed = seed + sample_idx)", analysis=True, view=True),
    Column("temperature", "float64", "sampling temperature", analysis=True),
    Column("position", "Int64", "0-based place of the text in a multi-item prompt", analysis=True, view=True),
    Column(
        "label",
        "string",
        "neutral label the text was shown under (Q1.., A/B)",
        analysis=True,
        key=True,
        view=True,
    ),
    Column(
        "score", "float64", "the parsed score (NaN when unscored or a preference)", analysis=True, view=True
    ),
    Column(
        "score_expected",
        "float64",
        "G-Eval expected score from the answer's log-probabilities (NaN without)",
        analysis=True,
    ),
    Column(
        "preference",
        "string",
        "pairwise: 'a' (judged text), 'b' (the other) or 'tie'",
        analysis=True,
        key=True,
        view=True,
    ),
    Column("inconsistent", "boolean", "pairwise: the preference flipped with the order", analysis=True),
    Column("parse_ok", "bool", "the answer gave a valid value for this text", analysis=True, view=True),
    Column(
        "salvaged",
        "bool",
        "the value came from a cut-off answer, repaired (complete entries only)",
        analysis=True,
    ),
    Column("error", "string", "why the row is unscored", analysis=True, key=True, view=True),
    Column(
        "rationale",
        "string",
        "the judge's rationale where the rubric asks for one (never parsed)",
        analysis=True,
        key=True,
    ),
    Column("raw", "string", "the judge's answer as received", analysis=True, key=True, view=True),
    # the analysis reads these three to tell a call with no completion (None, 0, 0) from one of unknown price
    Column(
        "finish_reason",
        "string",
        "provider finish reason ('length' = cut at max_tokens)",
        analysis=True,
        key=True,
        view=True,
    ),
    Column("prompt_tokens", "int64", "prompt tokens of the call", analysis=True),
    Column("completion_tokens", "int64", "completion tokens of the call", analysis=True),
    Column(
        "cost_usd",
        "float64",
        "the call's cost (0 without a completion or for a shared answer; NaN when unknown; "
        "a cached replay: the price of the answer it replays)",
        analysis=True,
        view=True,
    ),
    Column(
        "latency_s",
        "float64",
        "the call's latency (a cached replay: its original call's)",
        analysis=True,
        view=True,
    ),
    Column("cached", "bool", "replayed from the call cache", analysis=True),
    Column("retries", "int64", "transient provider errors retried", analysis=True),
    Column("candidate_text", "string", "the judged text", analysis=True, key=True, view=True),
    Column(
        "perturbation",
        "string",
        "robustness: the perturbation applied to the prompt (empty: none)",
        analysis=True,
        key=True,
        view=True,
    ),
)

COLUMNS: list[str] = [c.name for c in SCHEMA]
ANALYSIS_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.analysis)
KEY_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.key)
# a CSV writer may print a whole-number float as "3" (Arrow does): read these as floats whatever the text
FLOAT_COLUMNS: dict[str, str] = {c.name: "float64" for c in SCHEMA if c.dtype == "float64" and c.analysis}
# ids and names are text whatever they look like: a CSV cell 007 is the id "007", not the number 7
TEXT_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.dtype == "string" and c.analysis)
# true/false columns: a CSV holds their text ("False"), which must be parsed, never read by truthiness
FLAG_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.dtype in ("bool", "boolean") and c.analysis)
# whole-number columns the analysis reads as numbers (the token counts behind analysis.stats.costs, retries)
COUNT_COLUMNS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "retries")
# what the analysis cannot do without
REQUIRED: tuple[str, ...] = ("judge", "mode", "instance_id", "candidate_id", "source", "dimension", "score")

# a results dtype -> the DuckDB type the viewer reads it as (a 64-bit integer: pandas' int64 and Int64)
DUCKDB_TYPES: dict[str, str] = {
    "string": "VARCHAR",
    "float64": "DOUBLE",
    "int64": "BIGINT",
    "Int64": "BIGINT",
    "bool": "BOOLEAN",
    "boolean": "BOOLEAN",
}


def view_types() -> dict[str, str]:
    """The viewer's columns (`view`) -> their DuckDB types, in schema order; read when a study opens, so a
    column marked here is in the viewer's table with no change to analysis.view.sql."""
    return {c.name: DUCKDB_TYPES[c.dtype] for c in SCHEMA if c.view}


# ---- manifest.json ---------------------------------------------------------------------------------------

MANIFEST_NAME = "manifest.json"
# 1: the first versioned manifest (the fields below); a file without `schema_version` is version 0, the same
# fields, any of them possibly absent. Raise it when a field changes meaning, and read the older form here.
MANIFEST_VERSION = 1


class ManifestError(ValueError):
    """A manifest.json that cannot be read as one; the message is one line naming the file, and `field` the
    entry that is wrong (None: the file as a whole), so a reader that needs one entry can tell."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ShardSpec:
    """Which shard of its study a run is (`shard=i/n`): `{"index": i, "count": n}`."""

    index: int
    count: int


@dataclass(frozen=True)
class RequestChange:
    """One request parameter a provider did not receive as asked (judge.quirks)."""

    param: str
    asked: Any
    sent: Any
    note: str = ""


@dataclass(frozen=True)
class RequestRecord:
    """What the judge's requests carried after litellm's mapping (`sent`) and what that changed."""

    sent: dict[str, Any]
    changes: tuple[RequestChange, ...] = ()


@dataclass(frozen=True)
class BudgetRecord:
    """A run under `budget_usd`: the cap, what was spent, whether it stopped the run and the calls it kept
    from starting; in a -m sweep the cap is the sweep's (`budget_scope` "sweep", its spend and ledger)."""

    budget_usd: float
    spend_usd: float
    stopped: str | None
    calls_not_started: int
    budget_scope: str | None = None
    sweep_spend_usd: float | None = None
    sweep_ledger: str | None = None


def _text(value: object) -> str:
    """A name or id: text, or a number written bare (a judge named 7 in its YAML is written 7)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ManifestError(f"expected text, got {value!r:.60}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ManifestError(f"expected text, got {value!r:.60}")
    return str(value)


def _whole(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManifestError(f"expected a whole number, got {value!r:.60}")
    return value


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ManifestError(f"expected a number, got {value!r:.60}")
    if not math.isfinite(value):
        raise ManifestError(f"expected a finite number, got {value!r:.60}")
    return float(value)


def _object(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"expected an object, got {value!r:.60}")
    return value


def _texts(value: object) -> list[str]:
    if not isinstance(value, list):
        raise ManifestError(f"expected a list, got {value!r:.60}")
    return [_text(v) for v in value]


def _text_map(value: object) -> dict[str, str]:
    return {str(k): _text(v) for k, v in _object(value).items()}


def _whole_map(value: object) -> dict[str, int]:
    return {str(k): _whole(v) for k, v in _object(value).items()}


def _shard(value: object) -> ShardSpec:
    data = _object(value)
    if "index" not in data or "count" not in data:
        raise ManifestError(f'expected {{"index": i, "count": n}}, got {value!r:.60}')
    shard = ShardSpec(_whole(data["index"]), _whole(data["count"]))
    if not 0 <= shard.index < shard.count:
        raise ManifestError(f"index {shard.index} outside 0..{shard.count - 1}")
    return shard


def _request(value: object) -> RequestRecord:
    data = _object(value)
    changes = data.get("changes") or []
    if not isinstance(changes, list):
        raise ManifestError(f"changes: expected a list, got {changes!r:.60}")
    return RequestRecord(
        _object(data.get("sent") or {}),
        tuple(
            RequestChange(str(c.get("param")), c.get("asked"), c.get("sent"), str(c.get("note") or ""))
            for c in map(_object, changes)
        ),
    )


def _spec(read: Callable[[object], Any], always: bool = False) -> dict[str, Any]:
    """Field metadata: how a value is read from the JSON (`read`), and whether the writer writes the field
    when it is None (`always`: the core fields are always there, the optional blocks only when set)."""
    return {"read": read, "always": always}


def _core(read: Callable[[object], Any]) -> Any:
    return field(default=None, metadata=_spec(read, always=True))


def _optional(read: Callable[[object], Any]) -> Any:
    return field(default=None, metadata=_spec(read))


@dataclass(frozen=True)
class Manifest:
    """A study run's manifest.json: what a reader needs to trust and reproduce its results table (counts,
    cost, versions, the dataset hash, the study id). Every field may be None: absent from an older file, or
    unknown (`cost_usd` None = a call could not be priced). Keys this version does not know are kept in
    `extra` and written back, so a reader never drops what a newer writer added."""

    schema_version: int = MANIFEST_VERSION
    judge: str | None = _core(_text)
    model: str | None = _core(_text)
    mode: str | None = _core(_text)
    rubric: str | None = _core(_text)
    rubric_versions: dict[str, str] | None = _core(_text_map)
    dataset: str | None = _core(_text)
    dataset_path: str | None = _core(_text)
    dataset_hash: str | None = _core(_text)
    study_id: str | None = _core(_text)
    cache_refresh: str | None = _core(_text)
    shard: ShardSpec | None = _core(_shard)
    instances: int | None = _core(_whole)
    prompts: int | None = _core(_whole)
    n_samples: int | None = _core(_whole)
    temperature: float | None = _core(_number)  # what the provider used (None: not known)
    calls_total: int | None = _core(_whole)
    calls_made: int | None = _core(_whole)
    calls_cached: int | None = _core(_whole)
    calls_shared: int | None = _core(_whole)
    retries: int | None = _core(_whole)
    provider_errors: int | None = _core(_whole)
    unscored_calls: int | None = _core(_whole)
    parse_rate: float | None = _core(_number)
    rows: int | None = _core(_whole)
    prompt_tokens: int | None = _core(_whole)
    completion_tokens: int | None = _core(_whole)
    cost_usd: float | None = _core(_number)
    wall_time_s: float | None = _core(_number)
    cache_damaged_entries: int | None = _core(_whole)
    first_provider_errors: list[str] | None = _core(_texts)
    budget: BudgetRecord | None = None  # written flat: budget_usd, spend_usd, stopped, ...
    batch: dict[str, Any] | None = _optional(_object)  # judge.batch.provider.BatchStats of a batch=true run
    temperature_asked: float | None = _optional(_number)
    request: RequestRecord | None = _optional(_request)
    price_map: dict[str, Any] | None = _optional(_object)  # judge.spend.pricing.price_record
    rate_limit: dict[str, Any] | None = _optional(_object)  # rpm, tpm, responses_429
    perturbations_left_out: int | None = _optional(_whole)
    perturbation_attempts_rejected: dict[str, int] | None = _optional(_whole_map)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def calls_not_started(self) -> int:
        """Calls a budget stop kept from starting (0 without a budget)."""
        return self.budget.calls_not_started if self.budget is not None else 0

    def to_json(self) -> dict[str, Any]:
        """The manifest as written: `schema_version` first, the core fields (null when unknown), the optional
        blocks that are set, then the keys this version does not know."""
        out: dict[str, Any] = {"schema_version": self.schema_version}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "budget" and value is not None:
                out |= _budget_json(value)
            elif "read" in f.metadata and (value is not None or f.metadata["always"]):
                out[f.name] = _plain(value)
        return out | {k: v for k, v in self.extra.items() if k not in out}

    @classmethod
    def from_json(cls, data: object) -> Manifest:
        """The manifest of a parsed manifest.json; a ManifestError (without the file's name) names the field
        that cannot be read and why."""
        if not isinstance(data, dict):
            raise ManifestError(f"a JSON {type(data).__name__}, not an object")
        version = data.get("schema_version", 0)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            why = f"schema_version: expected a whole number, got {version!r:.60}"
            raise ManifestError(why, "schema_version")
        if version > MANIFEST_VERSION:
            raise ManifestError(
                f"schema_version {version} is newer than this judgescope reads ({MANIFEST_VERSION}); "
                "upgrade judgescope to read it",
                "schema_version",
            )
        if version >= 1:  # the writer writes every core field (null when unknown): one absent is damage
            absent = [f.name for f in fields(cls) if f.metadata.get("always") and f.name not in data]
            if absent:
                why = f"missing {', '.join(absent[:6])}{' ...' if len(absent) > 6 else ''}"
                raise ManifestError(why, absent[0])
        values: dict[str, Any] = {"schema_version": version}
        known = {"schema_version", *_BUDGET_KEYS}
        for f in fields(cls):
            if "read" not in f.metadata:
                continue
            known.add(f.name)
            raw = data.get(f.name)
            if raw is not None:
                try:
                    values[f.name] = f.metadata["read"](raw)
                except ManifestError as exc:
                    raise ManifestError(f"{f.name}: {exc}", f.name) from None
        values["budget"] = _budget(data)
        values["extra"] = {k: v for k, v in data.items() if k not in known}
        return cls(**values)


_BUDGET_KEYS = tuple(f.name for f in fields(BudgetRecord))
_BUDGET_READ: dict[str, Callable[[object], Any]] = {
    "budget_usd": _number,
    "spend_usd": _number,
    "stopped": _text,
    "calls_not_started": _whole,
    "budget_scope": _text,
    "sweep_spend_usd": _number,
    "sweep_ledger": _text,
}


def _budget(data: Mapping[str, Any]) -> BudgetRecord | None:
    """The budget block of a flat manifest (None when the run had no `budget_usd`)."""
    if data.get("budget_usd") is None:
        return None
    values: dict[str, Any] = {}
    for key in _BUDGET_KEYS:
        raw = data.get(key)
        try:
            values[key] = None if raw is None else _BUDGET_READ[key](raw)
        except ManifestError as exc:
            raise ManifestError(f"{key}: {exc}", key) from None
    values["spend_usd"] = values["spend_usd"] or 0.0
    values["calls_not_started"] = values["calls_not_started"] or 0
    return BudgetRecord(**values)


def _budget_json(budget: BudgetRecord) -> dict[str, Any]:
    out = {k: getattr(budget, k) for k in ("budget_usd", "spend_usd", "stopped", "calls_not_started")}
    if budget.budget_scope is not None:  # a -m sweep: its spend (None = unknown) and ledger
        out |= {k: getattr(budget, k) for k in ("budget_scope", "sweep_spend_usd", "sweep_ledger")}
    return out


def _plain(value: object) -> Any:
    """A field's JSON form: a record as its fields (a request's changes as a list), anything else as is."""
    if isinstance(value, ShardSpec):
        return {"index": value.index, "count": value.count}
    if isinstance(value, RequestRecord):
        return {"sent": value.sent, "changes": [_change_json(c) for c in value.changes]}
    return value


def _change_json(change: RequestChange) -> dict[str, Any]:
    return {"param": change.param, "asked": change.asked, "sent": change.sent, "note": change.note}


@dataclass(frozen=True)
class GenerationManifest:
    """manifest.json of a generation run (experiments.stages.generate): the task, the generator, how many items it
    made and the calls that took."""

    task: str
    generator: str
    model: str
    strategy: str | None
    dataset_path: str
    items: int
    calls_made: int
    calls_cached: int
    retries: int
    provider_errors: int
    schema_version: int = MANIFEST_VERSION

    def to_json(self) -> dict[str, Any]:
        """As written: `schema_version` first, then the fields in order."""
        return _flat(self)


@dataclass(frozen=True)
class ExtractionManifest:
    """manifest.json of an extraction run (experiments.stages.extract): the judge, the rubric version, the sentences
    and papers classified and the calls that took (`unscored`: answers with no label)."""

    judge: str
    model: str
    rubric_version: str
    sentences: int
    papers: int
    calls_made: int
    calls_cached: int
    retries: int
    provider_errors: int
    unscored: int
    schema_version: int = MANIFEST_VERSION

    def to_json(self) -> dict[str, Any]:
        """As written: `schema_version` first, then the fields in order."""
        return _flat(self)


def _flat(record: GenerationManifest | ExtractionManifest) -> dict[str, Any]:
    return {"schema_version": record.schema_version} | {
        f.name: getattr(record, f.name) for f in fields(record) if f.name != "schema_version"
    }


MANIFEST_MAX_BYTES = 16 * 2**20  # a manifest is a few kB; a larger file is not one (and is not read whole)


def read_manifest(path: Path) -> Manifest:
    """The manifest in `path`; a missing, unreadable, oversized, damaged or too new file, one with a core field
    missing or of the wrong type, is one ManifestError line that names it (never read silently)."""
    try:
        data = json.loads(read_capped(path, MANIFEST_MAX_BYTES, "a run's manifest").decode("utf-8"))
    except ReceivedFileError as exc:
        raise ManifestError(str(exc)) from None
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read the manifest ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, nesting too deep
        raise ManifestError(
            f"{path}: not a readable manifest ({str(exc)[:120] or 'nested too deep'})"
        ) from None
    try:
        return Manifest.from_json(data)
    except ManifestError as exc:
        raise ManifestError(f"{path}: not a readable manifest ({exc})", exc.field) from None


def run_manifest(folder: Path) -> Manifest | None:
    """The manifest of the run in `folder`, or None when the run has none (a damaged one: ManifestError)."""
    path = folder / MANIFEST_NAME
    return read_manifest(path) if path.exists() else None


def write_manifest(
    path: Path,
    manifest: Manifest | GenerationManifest | ExtractionManifest,
    scrub_tree: Callable[[Any], Any] | None = None,
    scrub_text: Callable[[str], str] | None = None,
) -> None:
    """Write `manifest` to `path` as JSON, at this schema version; `scrub_tree` / `scrub_text` take secrets
    out of the tree and the text (judge.secrets), so this module needs nothing but the standard library."""
    tree = manifest.to_json() | {"schema_version": MANIFEST_VERSION}
    text = json.dumps(scrub_tree(tree) if scrub_tree else tree, indent=2)
    path.write_text(scrub_text(text) if scrub_text else text, encoding="utf-8")
