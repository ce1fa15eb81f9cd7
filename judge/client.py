"""The judge call path: cache -> retry -> completer, with a concurrency limit and per-call accounting.

`Judge` is a plain async callable; everything provider-specific lives in the `Completer`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.cache import CallCache, cache_key
from judge.completer import Completer, Completion, Message
from judge.retry import FATAL_ERRORS, FatalProviderError, RetryPolicy, describe_fatal, is_transient
from judge.secrets import redact


@dataclass(frozen=True)
class CallResult:
    """A completion (or why there is none) and how it was obtained."""

    completion: Completion | None
    cached: bool
    retries: int
    error: str | None = None


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
    ) -> None:
        self.completer = completer
        self.cache = cache
        self.policy = policy or RetryPolicy()
        self.concurrency = concurrency
        self.api_base = api_base
        self._semaphores: dict[int, asyncio.Semaphore] = {}

    def _semaphore(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._semaphores:
            self._semaphores = {loop_id: asyncio.Semaphore(self.concurrency)}
        return self._semaphores[loop_id]

    def key(self, messages: Sequence[Message], params: Mapping[str, Any], sample_idx: int, version: str) -> str:
        return cache_key(self.completer.model, messages, params, sample_idx, version, self.api_base)

    async def __call__(
        self,
        messages: Sequence[Message],
        params: Mapping[str, Any],
        *,
        sample_idx: int,
        rubric_version: str,
    ) -> CallResult:
        """One sample of one prompt; the sample index picks the seed, so samples differ on every provider."""
        params = {**params, "seed": int(params.get("seed", 0)) + sample_idx}
        key = self.key(messages, params, sample_idx, rubric_version)
        hit = self.cache.get(key)
        if hit is not None:
            return CallResult(hit, cached=True, retries=0)
        attempts = 0
        try:
            async for attempt in self.policy.retrying():
                with attempt:
                    attempts += 1
                    async with self._semaphore():
                        completion = await self.completer.acomplete(messages, params)
        except FATAL_ERRORS as exc:
            raise FatalProviderError(redact(describe_fatal(exc, self.completer.model))) from None
        except Exception as exc:
            if not is_transient(exc):
                raise
            error = f"provider: {type(exc).__name__} after {attempts} attempts: {str(exc)[:200]}"
            return CallResult(None, cached=False, retries=attempts - 1, error=redact(error))
        self.cache.set(key, completion)
        return CallResult(completion, cached=False, retries=attempts - 1)
