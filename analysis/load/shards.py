"""Merge the shards of one study (`shard=i/n` runs) into one run, refusing shards of different studies.

Each run folder's manifest.json names its `study_id` (a hash of every setting that can change a row) and its
`shard`. The shards of one study must all be there, once each, with one `n`; their rows then form the study
exactly as one unsharded run would, under the first shard's run_id. Runs without a shard are left alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.schema import ManifestError, run_manifest
from experiments.shard import Shard


class ShardMergeError(ValueError):
    """Shards that cannot form one study; the message names the study, the folders and what is wrong."""


@dataclass(frozen=True)
class ShardRun:
    """One sharded run: its results file, its run id (folder name), its study and shard."""

    path: Path
    run_id: str
    study_id: str
    shard: Shard


def shard_run(results: Path) -> ShardRun | None:
    """The shard of the run whose results file is `results`, or None for an unsharded run (or no manifest)."""
    try:
        manifest = run_manifest(results.parent)
    except ManifestError as exc:  # too new, damaged, a field missing or mistyped: refused, never half-read
        raise ShardMergeError(str(exc)) from None
    if manifest is None or manifest.shard is None:
        return None
    shard = Shard(manifest.shard.index, manifest.shard.count)
    return ShardRun(results, results.parent.name, str(manifest.study_id), shard)


def _problem(runs: Sequence[ShardRun]) -> str | None:
    """What keeps these shards (of one study) from being merged, or None."""
    counts = sorted({r.shard.count for r in runs})
    if len(counts) > 1:
        return f"shards of n={', n='.join(map(str, counts))} mixed"
    seen: dict[int, ShardRun] = {}
    for run in runs:
        if run.shard.index in seen:
            return f"shard {run.shard} twice ({seen[run.shard.index].path.parent} and {run.path.parent})"
        seen[run.shard.index] = run
    missing = [f"{i}/{counts[0]}" for i in range(counts[0]) if i not in seen]
    return f"missing shard(s) {', '.join(missing)}" if missing else None


def merged_run_ids(paths: Sequence[Path]) -> dict[Path, str]:
    """For every sharded results file among `paths`, the run id of the study it merges into.

    Raises ShardMergeError when a study's shards are incomplete, repeated or of different n - for example
    when shards of two different configs (different study_id) were put side by side."""
    studies: dict[str, list[ShardRun]] = defaultdict(list)
    for path in paths:
        run = shard_run(path)
        if run is not None:
            studies[run.study_id].append(run)
    merged: dict[Path, str] = {}
    for study, runs in studies.items():
        problem = _problem(runs)
        if problem:
            others = [
                f"{r.path.parent.name} ({r.shard})" for s, rs in studies.items() if s != study for r in rs
            ]
            hint = f"; shards of other configs here: {', '.join(others)}" if others else ""
            raise ShardMergeError(
                f"{runs[0].path.parent}: cannot merge the shards of study {study}: {problem}{hint}"
            )
        first = min(runs, key=lambda r: r.shard.index)
        merged.update({r.path: first.run_id for r in runs})
    return merged
