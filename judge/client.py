"""The judge call path: cache -> retry -> completer, with a concurrency limit and per-call accounting.

`Judge` is a plain async callable; everything provider-specific lives in the `Completer`.

What happens to each kind of provider failure (see `judge.retry` for the classification):
- transient (rate limit, timeout, 5xx, dropped connection, a 200 whose body is not a completion): retried
  with backoff; when the attempts run out the call comes back unscored with the error and is NOT cached,
  so a rerun tries it again;
- permanent for this prompt only (context window exceeded, content policy): unscored with the error, not
  retried, not cached;
- fatal for the whole study (authentication, permission, unknown model, bad request, any other provider
  error): `FatalProviderError` with one redacted line, raised at once.
An answer that arrives is cached even when it will not parse (non-rubric text, truncated output): it is an
answer, and re-asking would pay twice for the same sample.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.cache.store import CallCache, cache_keys, canonical_params
from judge.completer import Completer, valid_text
from judge.ratelimit import RATE_HINT, RateLimiter
from judge.retry import (
    PER_CALL_ERRORS,
    TIMEOUT_ERRORS,
    FatalProviderError,
    RetryPolicy,
    brief,
    describe_fatal,
    is_provider_error,
    is_transient,
    status_code,
)
from judge.secrets import redact
from judge.spend.budget import Budget
from judge.types import Completion, Message


@dataclass(frozen=True, eq=False)
class Sample:
    """The decoding parameters of one sample of a prompt, with their canonical JSON for the cache key.

    One Sample serves many calls, so `params` must not change after it is built (the completer copies
    what it sends)."""

    index: int
    params: dict[str, Any]
    params_json: str


@dataclass(frozen=True)
class CallResult:
    """A completion (or why there is none) and how it was obtained."""

    completion: Completion | None
    cached: bool
    retries: int
    error: str | None = None
    not_started: bool = False  # the run's budget stopped it before it reached the provider
    # a copy of another call's answer or error: the same request came twice in one run and was sent once
    # (no provider request, retry or cost of its own; not "cached", since it was not read from the cache)
    shared: bool = False
    # the parsed scores the cache keeps beside a cached answer (as stored: experiments.rows reads them only
    # when they are of the current parser version and this prompt's labels), None when there are none
    stored_parse: Any = None


SPENT_ON_TIMEOUT = (
    "budget_usd reached after a timed-out attempt (counted as spent at its worst case: the provider may have "
    "completed it)"
)


class Judge:
    """Calls one model with caching, bounded retries and at most `concurrency` requests in flight."""

    def __init__(
        self,
        completer: Completer,
        cache: CallCache,
        *,
        policy: RetryPolicy | None = None,
        concurrency: int = 8,
        api_base: str | None = None,
        refresh_tag: str | None = None,
        budget: Budget | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.completer = completer
        # cache.refresh: every key of this judge carries the refresh date, so the provider is asked again and
        # the answers are cached beside (not over) the old ones; a rerun of the same refresh is cached
        self.refresh_tag = refresh_tag
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.concurrency = concurrency
        self.api_base = api_base
        self._semaphores: dict[str, asyncio.Semaphore] = {}
        self._loop_id: int | None = None  # the event loop `_semaphores` belong to
        # set by the first fatal provider error: queued calls are not sent, in-flight ones finish (and are
        # cached) instead of being cancelled half-way through litellm's set-up
        self.stopped = False
        self.budget = budget  # a run with budget_usd (judge.spend.budget)
        self.limiter = limiter  # a judge with rpm / tpm (judge.ratelimit)

    def _semaphore(self, purpose: str = "request") -> asyncio.Semaphore:
        """This event loop's gate of `concurrency` slots for `purpose` (a request in flight; a budget
        reservation held)."""
        loop_id = id(asyncio.get_running_loop())
        if loop_id != self._loop_id:
            self._semaphores, self._loop_id = {}, loop_id
        gate = self._semaphores.get(purpose)
        if gate is None:
            gate = self._semaphores[purpose] = asyncio.Semaphore(self.concurrency)
        return gate

    def sample(self, params: Mapping[str, Any], sample_idx: int) -> Sample:
        """The parameters of one sample: the sample index picks the seed, so samples differ on every provider.

        Its key JSON is that of the request the completer sends (config extras, response format, ...), not
        of `params` alone. A study builds one per (parameters, sample index) and reuses it for every prompt."""
        sample = {**params, "seed": int(params.get("seed", 0)) + sample_idx}
        return Sample(sample_idx, sample, canonical_params(self.completer.request_params(sample)))

    def lookup(
        self, messages: Sequence[Message], sample: Sample, rubric_version: str
    ) -> tuple[str, CallResult | None]:
        """(cache key, the cached result or None) - no provider call."""
        return self.lookup_many([(messages, sample)], rubric_version)[0]

    def lookup_many(
        self, calls: Sequence[tuple[Sequence[Message], Sample]], rubric_version: str
    ) -> list[tuple[str, CallResult | None]]:
        """`lookup` of many (messages, sample) calls, the cache read in bulk (`CallCache.read_many`)."""
        if self.refresh_tag is not None:
            rubric_version = f"{rubric_version}+refresh:{self.refresh_tag}"
        keys = cache_keys(
            self.completer.model,
            [(messages, sample.params, sample.index, sample.params_json) for messages, sample in calls],
            rubric_version,
            self.api_base,
        )
        return [
            (
                key,
                None
                if entry is None
                else CallResult(entry[0], cached=True, retries=0, stored_parse=entry[1]),
            )
            for key, entry in zip(keys, self.cache.read_many(keys), strict=True)
        ]

    async def call_provider(
        self, messages: Sequence[Message], sample_params: Mapping[str, Any], key: str
    ) -> CallResult:
        """Ask the provider (with retries) and cache the answer under `key`; see the module doc for failures.
        Under a budget, a call that would not fit is not started."""
        if self.budget is None:
            return await self._ask(messages, sample_params, key)
        # a call reserves its worst case only once it may be sent: at most `concurrency` reservations are
        # held, so the calls queued behind them do not count against the budget before their turn
        budget = self.budget
        async with self._semaphore("budget"):
            reserved = await budget.wait_start(messages)
            if reserved is None:
                return CallResult(
                    None, cached=False, retries=0, error="not started: budget_usd reached", not_started=True
                )
            held = [reserved]  # this call's reservation, renewed after each timed-out attempt
            timed_out = [False]  # whether the last attempt timed out

            async def after_timeout() -> bool:
                """A timed-out attempt may still be completed and billed by the provider: its reservation
                is spent at its worst case, and the next attempt reserves anew (False: the budget is spent)."""
                await budget.afinish(held[0], None, interrupted=True)
                again = await budget.wait_start(messages)
                held[0] = 0.0 if again is None else again
                return again is not None

            result: CallResult | None = None
            try:
                result = await self._ask(messages, sample_params, key, after_timeout, timed_out)
            finally:  # no result, or a last attempt that timed out: maybe billed, see Budget.finish
                answer = result.completion if result else None
                await budget.afinish(held[0], answer, interrupted=result is None or timed_out[0])
            return result

    async def _ask(
        self,
        messages: Sequence[Message],
        sample_params: Mapping[str, Any],
        key: str,
        after_timeout: Callable[[], Awaitable[bool]] | None = None,
        timed_out: list[bool] | None = None,
    ) -> CallResult:
        """The provider's answer (with retries). Under a budget, `after_timeout` is awaited before the attempt
        that follows a timed-out one (False: stop, the budget cannot hold another), and `timed_out[0]` says
        whether the last attempt timed out."""
        attempts = 0
        last_timed_out = [False] if timed_out is None else timed_out
        try:
            async for attempt in self.policy.retrying():
                with attempt:
                    attempts += 1
                    if last_timed_out[0] and after_timeout is not None:
                        last_timed_out[0] = False
                        if not await after_timeout():
                            sent = attempts - 1  # one counts as the call's error, the others as retries
                            return CallResult(None, cached=False, retries=sent - 1, error=SPENT_ON_TIMEOUT)
                    slot = (
                        self._semaphore()
                        if self.limiter is None
                        else self.limiter.slot(messages, sample_params)
                    )
                    async with slot:
                        if self.stopped:  # a fatal error elsewhere: the study ends, so send nothing more
                            return CallResult(
                                None,
                                cached=False,
                                retries=attempts - 1,
                                error="not started: the study stopped at a fatal provider error",
                                not_started=True,
                            )
                        try:
                            completion = await self.completer.acomplete(messages, sample_params)
                        except TIMEOUT_ERRORS:
                            last_timed_out[0] = True
                            raise
        except PER_CALL_ERRORS as exc:
            error = f"provider: {type(exc).__name__} (not retried): {brief(exc, 300)}"
            return CallResult(None, cached=False, retries=attempts - 1, error=redact(valid_text(error)))
        except (
            Exception
        ) as exc:  # fatal classes (auth, bad request, ...) are provider errors, never transient
            if is_transient(exc):
                hint = f" ({self._rate_hint()})" if status_code(exc) == 429 else ""
                error = f"provider: {type(exc).__name__} after {attempts} attempts{hint}: {brief(exc, 200)}"
                return CallResult(None, cached=False, retries=attempts - 1, error=redact(valid_text(error)))
            if is_provider_error(exc):
                self.stopped = True
                raise FatalProviderError(
                    redact(valid_text(describe_fatal(exc, self.completer.model)))
                ) from None
            raise
        self.cache.set(key, completion)
        return CallResult(completion, cached=False, retries=attempts - 1)

    def _rate_hint(self) -> str:
        """What to change when 429s outlast the retries: the limits to pace at, or the ones set, to lower."""
        if self.limiter is None:
            return RATE_HINT
        rpm, tpm = self.limiter.rpm, self.limiter.tpm
        set_to = ", ".join(f"judge.{k}={v:g}" for k, v in (("rpm", rpm), ("tpm", tpm)) if v)
        return f"{RATE_HINT} (now {set_to}: lower them)"

    async def __call__(
        self,
        messages: Sequence[Message],
        params: Mapping[str, Any],
        *,
        sample_idx: int,
        rubric_version: str,
    ) -> CallResult:
        """One sample of one prompt: from the cache, else from the provider (then cached)."""
        sample = self.sample(params, sample_idx)
        key, hit = self.lookup(messages, sample, rubric_version)
        if hit is not None:
            return hit
        return await self.call_provider(messages, sample.params, key)
