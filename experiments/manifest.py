"""A study's manifest: the counts of what the provider saw (`Tally`), cost, versions and the dataset hash,
and the parse-rate check that fails a run after everything is written. The manifest's type, its version and
its one reader and writer are in core.schema."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from core.schema import Manifest, RequestChange, RequestRecord, ShardSpec
from experiments.batching import batch_manifest
from experiments.config import StudyConfig
from experiments.datasets.loader import dataset_hash
from experiments.inputs import ParseRateError
from experiments.rows import call_cost
from experiments.shard import parse_shard, refresh_date, study_id
from experiments.spend import budget_manifest, judge_prices
from judge.client import CallResult, Judge
from judge.quirks import RequestShape
from judge.rubric import Rubric
from judge.spend.pricing import price_record


@dataclass
class Tally:
    """Counts for the manifest and the progress bar."""

    calls: int = 0
    cached: int = 0
    shared: int = 0
    retries: int = 0
    provider_errors: int = 0
    unscored: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    not_started: int = 0
    batch: Any = None  # judge.batch.provider.BatchStats of a batch=true run
    cache_damaged: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, result: CallResult, scored: bool) -> None:
        """Count one call: made, cached, shared or failed (`calls + retries + provider_errors` is what the
        provider saw; `calls_total = calls + cached + shared + provider_errors + not_started`)."""
        if result.not_started:  # a budget stop: no row, nothing paid
            self.not_started += 1
            return
        self.unscored += 0 if scored else 1
        if result.shared:
            self.shared += 1
            return
        self.retries += result.retries
        if result.cached:
            self.cached += 1
        elif result.completion is None:
            self.provider_errors += 1
            self.errors.append(result.error or "")
        if result.completion is not None and not result.cached:
            self.calls += 1
        comp = result.completion
        if comp is not None:
            self.prompt_tokens += comp.prompt_tokens
            self.completion_tokens += comp.completion_tokens
        cost = call_cost(result)  # the rule the results rows' cost_usd follows (0 without a completion)
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost


def manifest_extras(cfg: StudyConfig, judge: Judge, shape: RequestShape, tally: Tally) -> dict[str, Any]:
    """The manifest's budget, batch, request-shape, price-map and rate-limit fields, by `Manifest` field."""
    changes = tuple(
        RequestChange(str(c.get("param")), c.get("asked"), c.get("sent"), str(c.get("note") or ""))
        for c in shape.changes
    )
    extras: dict[str, Any] = {
        "budget": budget_manifest(judge.budget, tally.not_started),
        "batch": batch_manifest(tally.batch),
        "temperature": shape.temperature,
        "temperature_asked": cfg.temperature,
        "request": RequestRecord(shape.sent, changes),
    }
    extras["price_map"] = price_record(cfg.judge.model, judge_prices(cfg.judge))
    if judge.limiter is not None:
        extras["rate_limit"] = {
            "rpm": cfg.judge.rpm,
            "tpm": cfg.judge.tpm,
            "responses_429": judge.limiter.rate_limited,
        }
    return extras


def check_parse_rate(manifest: Manifest, frame: pd.DataFrame, minimum: float) -> None:
    """A run that scored too few answers fails (after writing everything), saying why in one line."""
    rate = manifest.parse_rate
    if rate is None or rate >= minimum:
        return
    reasons = ", ".join(f"{reason} ({n})" for reason, n in error_reasons(frame)[:3])
    attempted = (manifest.calls_total or 0) - manifest.calls_not_started
    raise ParseRateError(
        f"parse rate {rate:.3f} is below min_parse_rate={minimum:g} "
        f"({manifest.unscored_calls} of {attempted} calls unscored; outputs written); "
        f"top reasons: {reasons}"
    )


def error_reasons(frame: pd.DataFrame) -> list[tuple[str, int]]:
    """Why calls went unscored, most frequent first, counted in calls (a call's rows share its error; counting
    rows made 7 calls read as 21). Errors that differ only in quoted values and numbers form one reason,
    written with its real values: a value all of them share as is (the allowed values of a choice), a number
    that varies as its range ("3–401-digit"), a quoted value that varies as its commonest few; never a bare
    placeholder."""
    failed = frame.loc[~frame["parse_ok"].astype(bool)]
    failed = failed[failed["error"].notna()].assign(error=lambda f: f["error"].astype(str))
    call = [c for c in ("prompt_id", "sample_idx") if c in failed.columns]
    if len(call) == 2:  # one entry per (call, error): the call's rows (candidates x dimensions) count once
        failed = failed.drop_duplicates([*call, "error"])
    reason = failed["error"].map(lambda e: _SLOT.sub(_slot_kind, e))
    # a call counts once per reason, whichever entries of it the reason names (7 missing entries of 2 calls: 2)
    calls = (
        pd.Series(list(zip(failed[call[0]], failed[call[1]], strict=True)), index=failed.index)
        if len(call) == 2
        else pd.Series(range(len(failed)), index=failed.index)
    )
    groups = [
        (_with_values(list(failed.loc[rows, "error"])), calls[rows].nunique())
        for rows in reason.groupby(reason, sort=False).groups.values()
    ]
    return sorted(groups, key=lambda group: group[1], reverse=True)


# a quoted value or a number: the parts of an error that vary between calls with the same reason
_SLOT = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")
_SHOWN_VALUES = 3  # a quoted slot that varies shows its commonest values, then how many more


def _slot_kind(match: re.Match[str]) -> str:
    return "N" if match.group(0)[0].isdigit() else "Q"


def _with_values(members: list[str]) -> str:
    """One reason's text: its shared wording with each slot filled by its value, its range (numbers) or its
    commonest values (quoted)."""
    slots = [_SLOT.findall(m) for m in members]
    parts = _SLOT.split(members[0])
    filled = [parts[0]]
    for i, part in enumerate(parts[1:]):
        values = [s[i] for s in slots]
        distinct = sorted(set(values), key=lambda v: (-values.count(v), v))
        if len(distinct) == 1:
            filled.append(distinct[0])
        elif distinct[0][0].isdigit():
            numbers = sorted(int(v) for v in distinct)
            filled.append(f"{numbers[0]}–{numbers[-1]}")
        else:
            more = len(distinct) - _SHOWN_VALUES
            shown = " / ".join(distinct[:_SHOWN_VALUES])
            filled.append(f"{shown} / {more} more" if more > 0 else shown)
        filled.append(part)
    return "".join(filled)


def build_manifest(
    cfg: StudyConfig,
    frame: pd.DataFrame,
    tally: Tally,
    rubric: Rubric,
    data_path: Path,
    n_instances: int,
    n_prompts: int,
    started: float,
) -> Manifest:
    """What a reader needs to trust and reproduce the table: counts, cost, versions, dataset hash."""
    n_calls = n_prompts * cfg.n_samples
    attempted = n_calls - tally.not_started  # a budget stop's calls never started are neither parsed nor not
    shard = parse_shard(cfg.shard)
    return Manifest(
        judge=cfg.judge.name,
        model=cfg.judge.model,
        mode=cfg.mode.name,
        rubric=rubric.name,
        rubric_versions={rubric.name: rubric.version},
        dataset=cfg.dataset.name,
        dataset_path=str(data_path),
        dataset_hash=dataset_hash(data_path),
        study_id=study_id(cfg),
        cache_refresh=refresh_date(cfg.cache),
        shard=ShardSpec(shard.index, shard.count) if shard else None,
        instances=n_instances,
        prompts=n_prompts,
        n_samples=cfg.n_samples,
        temperature=cfg.temperature,
        calls_total=n_calls,
        calls_made=tally.calls,
        calls_cached=tally.cached,
        calls_shared=tally.shared,
        retries=tally.retries,
        provider_errors=tally.provider_errors,
        unscored_calls=tally.unscored,
        parse_rate=round(1 - tally.unscored / attempted, 4) if attempted else None,
        rows=len(frame),
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        cost_usd=round(tally.cost_usd, 6) if tally.cost_known else None,
        wall_time_s=round(time.perf_counter() - started, 3),
        cache_damaged_entries=tally.cache_damaged,
        first_provider_errors=tally.errors[:5],
    )
