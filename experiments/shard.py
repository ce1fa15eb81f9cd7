"""`shard=i/n`: one job runs a deterministic 1/n of a study, so n jobs on any launcher make the whole study.

The split is by instance (instance k of the limited dataset goes to shard k mod n), so every prompt of an
instance - a comparative prompt shows all its candidates at once, a pairwise pair is asked in both orders -
stays whole in one shard. Prompts, cache keys and rows do not depend on the shard, so the n shards make
exactly the calls and rows of the unsharded study. `study_id` names the study the shards belong to: a hash
of every setting that can change a row (not the shard, nor how the calls are made), which the analysis loader
uses to merge the shards of one study and to refuse mixing shards of different studies.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from experiments.config import CacheConfig, StudyConfig, as_dict

T = TypeVar("T")

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
# settings that change how the calls are made, never what they return
EXECUTION_ONLY = frozenset(
    {
        "shard",
        "progress",
        "workers",
        "cache_dir",
        "cache",
        "retry",
        "plan",
        "budget_usd",
        "batch",
        "batch_settings",
        "min_parse_rate",
        "plan_effect",
        "plan_discordance",
        "prices",
    }
)
JUDGE_EXECUTION_ONLY = frozenset({"concurrency", "timeout_s", "api_bases", "pool"})


class ShardError(ValueError):
    """A `shard=` value that is not `i/n` with 0 <= i < n."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (`shard=i/n`; a manifest's `{"index": i, "count": n}`)."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value: Any) -> Shard | None:
    """`"i/n"` -> Shard(i, n); None (or "", "none") -> the whole study."""
    if value is None or str(value).strip().lower() in ("", "none", "null"):
        return None
    match = _SPEC.fullmatch(str(value))
    if not match:
        raise ShardError(f"shard={value}: expected i/n, e.g. shard=0/4 (the first of 4 shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"shard={value}: need 0 <= i < n (the shards of n=4 are 0/4, 1/4, 2/4, 3/4)")
    return Shard(index, count)


def select(instances: Sequence[T], shard: Shard | None) -> list[T]:
    """The instances of this shard: every n-th one from position i (all of them without a shard)."""
    if shard is None:
        return list(instances)
    return list(instances[shard.index :: shard.count])


def study_id(cfg: StudyConfig) -> str:
    """A hash of the settings that decide the study's rows: shards with equal ids merge into one study."""
    kept = {k: v for k, v in as_dict(cfg).items() if k not in EXECUTION_ONLY}
    kept["judge"] = {k: v for k, v in kept["judge"].items() if k not in JUDGE_EXECUTION_ONLY}
    kept["rubric"] = _without_template_prose(kept["rubric"], cfg.rubric.written_descriptions)
    if cfg.cache.refresh:  # re-asked answers: another measurement (drift)
        kept["cache_refresh"] = refresh_date(cfg.cache)
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _without_template_prose(rubric: dict[str, Any], written: frozenset[str]) -> dict[str, Any]:
    """The rubric entry without the prose its template writes in (anchors, written descriptions): template
    text was never part of the id, and the prose's move from the templates into the YAML kept every id."""
    dims = [
        {
            k: ("" if k == "description" and d.get("name") in written else v)
            for k, v in d.items()
            if k != "anchors"
        }
        for d in rubric.get("dimensions") or []
    ]
    return {**rubric, "dimensions": dims}


def refresh_date(cache: CacheConfig) -> str | None:
    """The refresh a `cache.refresh=true` run re-asks the provider under: `cache.refresh_date`, given once for
    the study (experiments.config.refresh_problem requires it), never the clock. The judge's cache keys, the
    study id and the manifest all read it here, so they cannot disagree. None when the cache answers as usual."""
    return cache.refresh_date if cache.refresh else None
