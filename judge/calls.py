"""The judge's call path for a batch of uncached calls: what one call sends, and all of them on one loop.

Worker processes (experiments.workers) and the study both make calls through `call_all`, so the retry policy,
the cache write and the concurrency limit are the same everywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judge.client import CallResult, Judge
from judge.retry import FatalProviderError
from judge.speedups import use_inline_setup


@dataclass(frozen=True)
class Call:
    """One uncached call: its place in the run (`index`), the messages and parameters sent, its cache key."""

    index: int
    messages: list[dict[str, str]]
    params: dict[str, Any]
    key: str


async def call_all(judge: Judge, calls: Sequence[Call], settle: Callable[[Call, CallResult], None]) -> None:
    """Every call on this event loop (at most the judge's concurrency in flight); `settle` gets each result."""
    use_inline_setup()

    async def one(call: Call) -> None:
        try:
            result = await judge.call_provider(call.messages, call.params, call.key)
        except BaseException:
            judge.stopped = (
                True  # any error ends the study (a fatal provider error, a cache that cannot write)
            )
            raise
        if not (result.not_started and judge.stopped):
            settle(call, result)

    # every call runs to its end (a fatal error stops the ones not yet sent, see Judge.stopped): cancelling
    # calls half-way would lose answers already paid for and leave litellm's coroutines never awaited
    outcomes = await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:
        raise next((f for f in failures if isinstance(f, FatalProviderError)), failures[0])


async def call_taken(
    judge: Judge, take: Callable[[], Call | None], runners: int, settle: Callable[[Call, CallResult], None]
) -> None:
    """Calls taken one at a time from `take` (a queue other processes share) by `runners` coroutines until it
    is empty, each through the same path as `call_all`; the judge's concurrency still bounds requests in
    flight. Taking a call only when a runner is free keeps the processes busy to the end of the run."""
    use_inline_setup()
    failures: list[BaseException] = []

    async def runner() -> None:
        while not judge.stopped and (call := take()) is not None:
            try:
                result = await judge.call_provider(call.messages, call.params, call.key)
            except BaseException as exc:  # noqa: BLE001  (raised below, after the other runners finish)
                judge.stopped = True  # as in call_all: the study ends, calls in flight finish
                failures.append(exc)
                return
            if not (result.not_started and judge.stopped):
                settle(call, result)

    await asyncio.gather(*(runner() for _ in range(max(1, runners))))
    if failures:
        raise next((f for f in failures if isinstance(f, FatalProviderError)), failures[0])
