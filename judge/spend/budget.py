"""A spend cap for one run (`budget_usd`): a call starts only while it cannot push the spend past the cap.

Before a call starts, its worst case is reserved: its prompt tokens (litellm's tokenizer for the model) plus
the whole output budget (`max_tokens`) at the judge's prices. The call starts only if the spend so far, the
reservations of the calls in flight and its own fit under the cap. A call that would fit but for the
reservations of calls in flight waits for them (they usually cost far less than their worst case); the first
call that cannot fit even then stops the run (no later call starts, even a cheaper one), and the calls in
flight finish and are cached. When a call
ends its reservation is replaced by its actual cost: the provider's usage counts at the judge's prices (the
ones the completion's `cost_usd`, the results rows and the manifest use: judge.spend.pricing), else the reservation
itself.

In a `-m` sweep the account is the sweep's (`shared`, judge.spend.ledger): every job reserves against, and adds its
spend to, one ledger in the sweep folder, so the jobs together stay under the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from judge.spend.ledger import Fit, SharedSpend, fit
from judge.spend.pricing import Prices, prompt_tokens
from judge.types import Completion, Message

WAIT_S = 0.05  # how often a call that fits only later checks again
SHARED_WAIT_S = 0.25  # the same in a sweep, where each check takes the ledger's file lock
# How long a call in a sweep waits while the other jobs' reservations do not change at all before it stops the
# run instead: a job on another machine that died with calls in flight leaves reservations nobody can release,
# and without this bound the sweep would hang. (In one run the reservations are the run's own calls, which
# always end: there is no bound.)
MAX_WAIT_S = 900.0
T = TypeVar("T")


async def _through_cancel(future: asyncio.Future[T]) -> T | None:
    """The result of a ledger update already running in a thread, waited for even through further
    cancellations (a Ctrl-C, a shutdown): the update completes either way, and a cancelled caller must see it
    to undo a reservation before it re-raises. None if the update failed (it changed nothing in the ledger; the
    cancellation, not the ledger's error, is what the caller reports)."""
    while not future.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(future)
    return None if future.cancelled() or future.exception() is not None else future.result()


class BudgetError(ValueError):
    """A budget that cannot be enforced (no known price for the judge)."""


@dataclass
class Budget:
    """Spend so far against `limit_usd`; single event loop (no locks needed: each check-and-reserve runs
    without an await)."""

    limit_usd: float
    model: str
    prices: Prices
    max_tokens: int
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    stopped: bool = False
    not_started: int = 0
    batch: bool = False  # priced at batch prices (a batch=true run)
    shared: SharedSpend | None = None  # the sweep's ledger (a -m sweep): the cap counts every job's spend
    max_wait_s: float = MAX_WAIT_S

    def __post_init__(self) -> None:
        if self.prices.per_token(batch=self.batch) is None:
            suffix = "_batches" if self.batch else ""
            raise BudgetError(
                f"needs a {'batch ' if self.batch else ''}price for {self.model}: set the judge's "
                f"input_cost_per_token{suffix} and output_cost_per_token{suffix} (USD per token) "
                "in its config"
            )
        if self.limit_usd < 0:
            raise BudgetError(f"must be >= 0, not {self.limit_usd}")

    def bound(self, messages: Sequence[Message]) -> float:
        """The most one call with these messages can cost: its prompt plus the whole output budget."""
        cost = self.prices.cost(prompt_tokens(self.model, messages), self.max_tokens, batch=self.batch)
        assert cost is not None  # checked in __post_init__
        return cost

    def _fit(self, bound: float) -> Fit:
        if self.shared is None:
            answer = fit(self.spent_usd, self.reserved_usd, bound, self.limit_usd)
        else:  # the sweep's spend and reservations, this run's included (and reserved there if NOW)
            answer = self.shared.reserve(bound, self.limit_usd)
        return self._reserved(answer, bound)

    async def _afit(self, bound: float) -> Fit:
        """`_fit` with the sweep ledger's file lock and I/O in a thread: another job holding the lock (or a slow
        shared disk) must not stall every call of this run's event loop. If this task is cancelled meanwhile,
        a reservation the thread still makes is settled at 0 (the call is never sent), not left in the ledger."""
        if self.shared is None:
            return self._fit(bound)
        # an executor future, not a task: a shutdown's cancel-all cannot cancel it, so its answer is always seen
        loop = asyncio.get_running_loop()
        thread = loop.run_in_executor(None, self.shared.reserve, bound, self.limit_usd)
        try:
            answer = await asyncio.shield(thread)
        except asyncio.CancelledError:  # the thread goes on: a reservation it makes is for a call never sent
            if await _through_cancel(thread) is Fit.NOW:
                await _through_cancel(loop.run_in_executor(None, self.shared.settle, bound, 0.0))
            raise
        return self._reserved(answer, bound)

    def _reserved(self, answer: Fit, bound: float) -> Fit:
        if answer is Fit.NOW:  # this run's own account, on the event loop's thread only
            self.reserved_usd += bound
        return answer

    def _stop(self) -> None:
        """Stop this run, and in a sweep the sweep (its other jobs start no call; the command exits 3)."""
        if not self.stopped and self.shared is not None:
            self.shared.mark_stopped(self.limit_usd)
        self.stopped = True

    def start(self, messages: Sequence[Message]) -> float | None:
        """Reserve a call's worst case and return it, or None (and stop the run) when it does not fit now
        (for reservations that will not end before this call would start: a batch's requests)."""
        if not self.stopped:
            bound = self.bound(messages)
            if self._fit(bound) is Fit.NOW:
                return bound
            self._stop()
        self.not_started += 1
        return None

    async def wait_start(self, messages: Sequence[Message]) -> float | None:
        """Reserve a call's worst case and return it, waiting while only calls in flight are in the way; None
        (and stop the run) once it cannot fit, or (in a sweep) once the others' reservations have not moved
        for `max_wait_s`."""
        bound = self.bound(messages)
        blocking, since = None, time.monotonic()
        while not self.stopped:
            answer = await self._afit(bound)
            if answer is Fit.NOW:
                return bound
            if answer is Fit.NEVER:
                self._stop()
                break
            if self.shared is not None:  # a sweep: give up on reservations that never move (see MAX_WAIT_S)
                if self.shared.blocking_usd != blocking:
                    blocking, since = self.shared.blocking_usd, time.monotonic()
                elif time.monotonic() - since > self.max_wait_s:
                    self._stop()  # stopping never overspends
                    break
            await asyncio.sleep(WAIT_S if self.shared is None else SHARED_WAIT_S)
        self.not_started += 1
        return None

    def finish(self, reserved: float, completion: Completion | None, interrupted: bool = False) -> None:
        """Release a reservation; what the call cost (if it was answered) joins the spend. A call interrupted
        in flight (cancelled, Ctrl-C) may have been billed without an answer: its reservation counts as spent."""
        paid = self._settle_own(reserved, completion, interrupted)
        if self.shared is not None:
            self.shared.settle(reserved, paid)

    async def afinish(
        self, reserved: float, completion: Completion | None, interrupted: bool = False
    ) -> None:
        """`finish`, with the sweep ledger's update in a thread (see `_afit`). If the awaiting task is cancelled
        the thread still completes the update: the ledger never keeps a finished call's reservation."""
        paid = self._settle_own(reserved, completion, interrupted)
        if self.shared is not None:
            await asyncio.to_thread(self.shared.settle, reserved, paid)

    def _settle_own(self, reserved: float, completion: Completion | None, interrupted: bool) -> float:
        self.reserved_usd = max(0.0, self.reserved_usd - reserved)
        if interrupted:
            paid = reserved
        else:
            paid = (
                0.0 if completion is None else self.cost(completion, reserved)
            )  # a failed call is not billed
        self.spent_usd += paid
        return paid

    def cost(self, completion: Completion, reserved: float) -> float:
        """What an answered call cost (see the module doc)."""
        cost = self.prices.cost(completion.prompt_tokens, completion.completion_tokens, batch=self.batch)
        return reserved if cost is None else cost
