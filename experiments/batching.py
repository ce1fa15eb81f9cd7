"""`batch=true` for a study: its uncached calls through the provider's batch API (`judge.batch.provider`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from experiments.config import JudgeConfig, StudyConfig
from experiments.inputs import StudyError
from experiments.spend import judge_prices
from judge.batch.journal import BatchJournal
from judge.batch.provider import BatchClient, BatchError, BatchRequest, BatchStats, batch_limits
from judge.batch.run import BatchRunner
from judge.cache.store import CacheError
from judge.client import CallResult, Judge
from judge.quirks import mapped_params
from judge.spend.budget import Budget
from judge.spend.pricing import prompt_tokens


def _api_key(jcfg: JudgeConfig) -> str | None:
    """The key as the live path sends it: the judge's environment variable, or a placeholder for a keyless
    OpenAI-compatible server."""
    if jcfg.api_key_env:
        return os.environ.get(jcfg.api_key_env)
    return "no-key" if jcfg.api_base and jcfg.model.startswith("openai/") else None


def batch_client(judge: Judge, jcfg: JudgeConfig) -> BatchClient:
    """The judge's batch client; the request bodies carry what a live call sends (litellm's mapping)."""
    completer: Any = judge.completer
    model, api_base = jcfg.model, jcfg.api_base

    def body_params(params: Mapping[str, Any], provider_format: bool) -> dict[str, Any]:
        sent = (
            dict(completer.request_params(params)) if hasattr(completer, "request_params") else dict(params)
        )
        return mapped_params(model, api_base, sent) if provider_format else sent

    return BatchClient(model, api_base, _api_key(jcfg), body_params)


def run_batches(
    judge: Judge, requests: Sequence[BatchRequest], cfg: StudyConfig
) -> tuple[dict[str, CallResult], BatchStats]:
    """Every request answered through batches (resuming the ones a killed run left), or a StudyError."""
    jcfg, settings = cfg.judge, cfg.batch_settings
    try:
        client = batch_client(judge, jcfg)
        limits = batch_limits(
            client.provider, settings.max_per_batch, settings.max_file_mb, settings.max_enqueued_tokens
        )
        runner = BatchRunner(
            client,
            judge.cache,
            BatchJournal(judge.cache.directory),
            judge_prices(jcfg),
            model=jcfg.model,
            api_base=jcfg.api_base,
            poll_s=settings.poll_s,
            rounds=settings.rounds,
            max_per_batch=settings.max_per_batch,
            limits=limits,
            count_tokens=enqueued_tokens(jcfg.model) if limits.max_enqueued_tokens else None,
            progress=(lambda line: print(line, file=sys.stderr, flush=True)) if cfg.progress else None,
        )
        paid, not_started = within_budget(judge.budget, requests)
        results = runner.run([r for r, _ in paid])
    except (BatchError, CacheError) as exc:
        raise StudyError(f"batch=true: {exc}") from None
    if judge.budget is not None:
        for request, reserved in paid:
            result = results.get(request.key)
            judge.budget.finish(reserved, result.completion if result else None)
    skipped = CallResult(
        None, cached=False, retries=0, error="not started: budget_usd reached", not_started=True
    )
    return {**results, **{r.key: skipped for r in not_started}}, runner.stats


def enqueued_tokens(model: str) -> Callable[[BatchRequest], int]:
    """A request's enqueued tokens as OpenAI counts them: its prompt (litellm's tokenizer for the model,
    counted once per distinct prompt: a prompt's samples share it) + its output budget."""
    seen: dict[str, int] = {}

    def count(request: BatchRequest) -> int:
        text = json.dumps([dict(m) for m in request.messages], sort_keys=True)
        if text not in seen:
            seen[text] = prompt_tokens(model, request.messages)
        budget = request.params.get("max_tokens") or request.params.get("max_completion_tokens") or 0
        return seen[text] + int(budget)

    return count


def within_budget(
    budget: Budget | None, requests: Sequence[BatchRequest]
) -> tuple[list[tuple[BatchRequest, float]], list[BatchRequest]]:
    """(the requests whose worst case at batch prices fits the budget, with their reservations; the others):
    in order, and the first misfit stops the rest, as live."""
    if budget is None:
        return [(r, 0.0) for r in requests], []
    paid, rest = [], []
    for request in requests:
        reserved = budget.start(request.messages)
        if reserved is None:
            rest.append(request)
        else:
            paid.append((request, reserved))
    return paid, rest


def batch_manifest(stats: BatchStats | None) -> dict[str, Any] | None:
    """The manifest's `batch` block (absent for a live run)."""
    if stats is None:
        return None
    data = asdict(stats)
    data["cost_usd"] = round(stats.cost_usd, 6) if stats.cost_known else None
    del data["cost_known"]
    return data
