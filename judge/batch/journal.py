"""Where a run's provider batches are recorded, so a killed run resumes them instead of submitting again.

One JSON file per batch under `<cache folder>/batches/`, rewritten atomically at every step: first the
request keys (before any upload), then the uploaded input file id, then the batch id the moment the provider
returns it, then the outcome. A rerun reads the unfinished ones and polls them; an entry with an input file
but no batch id (killed between the two calls) is matched against the provider's batch list before anything
is created. The endpoint is recorded as `judge.secrets.endpoint` gives it (no credentials, no trailing
slash), so no key is written and a rotated key or an added `/` still finds its batches. A record that cannot
be read (truncated, a field of the wrong type) stops the run with one line naming it: it may hold a batch
still running, and submitting its requests again would pay for them twice.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from judge.batch.provider import BatchError
from judge.secrets import endpoint

# each recorded field and the types it may hold (a JSON number may be an int where a float is recorded)
TEXT_OR_NONE: tuple[type, ...] = (str, type(None))
_FIELDS: dict[str, tuple[type, ...]] = {
    "local_id": (str,),
    "model": (str,),
    "api_base": TEXT_OR_NONE,
    "keys": (list,),
    "round": (int,),
    "input_file_id": TEXT_OR_NONE,
    "batch_id": TEXT_OR_NONE,
    "status": (str,),
    "finished": (bool,),
    "created_at": (int, float),
    "counts": (dict,),
}


@dataclass
class BatchEntry:
    """One submitted (or being submitted) batch."""

    local_id: str
    model: str
    api_base: str | None
    keys: list[str]
    round: int = 1  # 1 = first submission of these requests, 2 = their first retry, ...
    input_file_id: str | None = None
    batch_id: str | None = None
    status: str = "preparing"
    finished: bool = False
    created_at: float = field(default_factory=time.time)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def path_name(self) -> str:
        return f"{self.local_id}.json"


class BatchJournal:
    """The batch records in one cache folder."""

    def __init__(self, cache_dir: Path) -> None:
        self.directory = Path(cache_dir) / "batches"
        self.directory.mkdir(parents=True, exist_ok=True)

    def new(self, model: str, api_base: str | None, keys: list[str], round_: int) -> BatchEntry:
        local_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
        entry = BatchEntry(local_id, model, endpoint(api_base), keys, round_)
        self.save(entry)
        return entry

    def save(self, entry: BatchEntry) -> None:
        """Atomic rewrite (temporary file, fsync, rename): a kill leaves the old or the new record."""
        path = self.directory / entry.path_name
        tmp = path.with_name(f".{path.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(asdict(entry), handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def unfinished(self, model: str, api_base: str | None) -> list[BatchEntry]:
        """This judge's batches that have not reached an outcome yet (oldest first); a record that cannot be
        read is a BatchError naming it (never skipped: its requests would be submitted again)."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            entry = read_entry(path)
            if not entry.finished and entry.model == model and endpoint(entry.api_base) == endpoint(api_base):
                entry.api_base = endpoint(entry.api_base)  # rewritten without credentials at its next save
                found.append(entry)
        return found


def read_entry(path: Path) -> BatchEntry:
    """One journal record, every field checked; fields this version does not record are ignored."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem: str | None = f"cannot be read ({type(exc).__name__}: {str(exc)[:80]})"
    else:
        problem = _problem(data)
        if problem is None:
            return BatchEntry(**{k: data[k] for k in _FIELDS})
    raise BatchError(
        f"{path}: batch journal record {problem}; it may stand for a batch still running at the provider, so "
        "nothing is submitted: check that batch, then move the file aside"
    )


def _problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "is not a JSON object"
    for name, types in _FIELDS.items():
        if name not in data:
            return f"has no {name}"
        value = data[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"has {name} of type {type(value).__name__}"
    if not all(isinstance(k, str) for k in data["keys"]) or data["round"] < 1:
        return "has keys that are not text or a round below 1"
    return None
