"""Where a run's provider batches are recorded, so a killed run resumes them instead of submitting again.

One JSON file per batch under `<cache folder>/batches/`, rewritten atomically at every step: first the
request keys (before any upload), then the uploaded input file id, then the batch id the moment the provider
returns it, then the outcome. A rerun reads the unfinished ones and polls them; an entry with an input file
but no batch id (killed between the two calls) is matched against the provider's batch list before anything
is created.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
        entry = BatchEntry(
            f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}", model, api_base, keys, round_
        )
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
        """This judge's batches that have not reached an outcome yet (oldest first)."""
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
                entry = BatchEntry(**data)
            except (ValueError, TypeError):
                continue  # a foreign or damaged file: not ours to resume
            if not entry.finished and entry.model == model and entry.api_base == api_base:
                found.append(entry)
        return found
