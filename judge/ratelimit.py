"""Hold a provider's rate limits instead of hitting them: per-judge `rpm` / `tpm` pacing and a concurrency
limit that adapts to what the provider says.

- **Pacing.** Two token buckets (GCRA: a reservation per request, FIFO, no polling), one for requests and one
  for tokens. A request's tokens are estimated as the plan does: its prompt (litellm's tokenizer for the
  model) plus its whole output budget (`max_tokens`) - which is also how OpenAI counts a request against its
  TPM limit. Each bucket holds `burst_s` (0.25 s) of its rate - less than a provider's own bucket - and the
  client paces at `headroom` (97%) of the configured limit, so jitter between sending and arrival (client
  CPU, the network) does not turn into 429s.
- **Adapting.** A 429 halves the requests allowed in flight (at most once per second), slows the pacing by
  5% (recovering 1% per success) and stops every new request until the provider's `Retry-After` (1 s
  without one; capped at retry.max_wait_s as without a limit, so a huge or infinite Retry-After cannot
  stall the run); each success adds 1/limit to the limit, up to the configured concurrency. A success whose
  `x-ratelimit-remaining-requests` / `-tokens` header is 0 waits for the matching `x-ratelimit-reset-*`.

The limiter lives on one event loop (one process: a rate-limited run does not fork workers). Without `rpm`
and `tpm` the judge keeps its plain semaphore: nothing here runs on the hot path.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from judge.completer import RESPONSE_HEADERS
from judge.retry import FatalProviderError, retry_after_seconds, status_code
from judge.spend.pricing import prompt_tokens
from judge.types import Message

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | None) -> float | None:
    """OpenAI's reset durations ("1s", "6m0s", "250ms", "1h2m3.5s") or plain seconds, in seconds."""
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        parts = _DURATION.findall(text.strip())
        return sum(float(n) * _UNITS[u] for n, u in parts) if parts else None


class Pacer:
    """A token bucket as a schedule (GCRA): `per_minute` units refill continuously, `burst_s` seconds of
    them may be spent at once; `reserve` books units and says how long to wait before using them."""

    def __init__(self, per_minute: float, burst_s: float) -> None:
        self.rate = per_minute / 60.0
        self.burst_s = burst_s
        self.factor = 1.0  # < 1 after 429s (adaptive slow-down)
        self._tat = 0.0  # theoretical arrival time: when the bucket is empty of bookings

    def reserve(self, amount: float, now: float) -> float:
        start = max(self._tat, now)
        self._tat = start + amount / (self.rate * self.factor)
        return max(0.0, self._tat - self.burst_s - now)


class RateLimiter:
    """rpm / tpm pacing + adaptive concurrency for one judge (see the module doc)."""

    def __init__(
        self,
        *,
        rpm: float | None,
        tpm: float | None,
        concurrency: int,
        tokens: Callable[[Sequence[Message], Mapping[str, Any]], int],
        burst_s: float = 0.25,
        headroom: float = 0.97,
        max_wait_s: float = 60.0,
    ) -> None:
        self.max_wait_s = max_wait_s
        self.rpm, self.tpm = rpm, tpm
        self.requests = Pacer(rpm * headroom, burst_s) if rpm else None
        self.tokens = Pacer(tpm * headroom, burst_s) if tpm else None
        self.estimate = tokens
        self.max_concurrency = max(1, concurrency)
        self.limit = float(self.max_concurrency)
        self.in_flight = 0
        self.cooldown_until = 0.0
        self.rate_limited = 0  # 429s seen
        self._last_decrease = 0.0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def slot(self, messages: Sequence[Message], params: Mapping[str, Any]) -> _Slot:
        """`async with limiter.slot(...)`: one request (one attempt) under the limits."""
        return _Slot(self, messages, params)

    async def enter(self, messages: Sequence[Message], params: Mapping[str, Any]) -> None:
        amount = self.estimate(messages, params) if self.tokens is not None else 0
        # a request above the limit would wait amount/tpm minutes in silence, then be refused by the provider
        if self.tpm and amount > self.tpm:
            raise FatalProviderError(
                f"judge.tpm={self.tpm:g} cannot admit one request of this run: it carries about {amount:,} tokens "
                "(its prompt plus its max_tokens); set judge.tpm to the provider's limit (at least that)"
            )
        while True:
            now = time.monotonic()
            if now < self.cooldown_until:
                await asyncio.sleep(self.cooldown_until - now)
            elif self.in_flight >= int(self.limit):
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                await waiter
            else:
                break
        self.in_flight += 1
        now = time.monotonic()
        delay = 0.0
        if self.requests is not None:
            delay = self.requests.reserve(1, now)
        if self.tokens is not None:
            delay = max(delay, self.tokens.reserve(amount, now))
        if delay > 0:
            await asyncio.sleep(delay)

    def leave(self, exc: BaseException | None, headers: Mapping[str, str] | None) -> None:
        self.in_flight -= 1
        now = time.monotonic()
        if exc is not None and status_code(exc) == 429:
            self._on_429(exc, now)
        elif exc is None:
            self.limit = min(float(self.max_concurrency), self.limit + 1.0 / self.limit)
            for pacer in (self.requests, self.tokens):
                if pacer is not None:
                    pacer.factor = min(1.0, pacer.factor * 1.01)
            if headers:
                self._read_headers(headers, now)
        self._wake()

    def _on_429(self, exc: BaseException, now: float) -> None:
        self.rate_limited += 1
        wait = retry_after_seconds(exc)
        self._cool_down(now, 1.0 if wait is None else wait)
        if now - self._last_decrease >= 1.0:
            self._last_decrease = now
            self.limit = max(1.0, self.limit / 2)
            for pacer in (self.requests, self.tokens):
                if pacer is not None:
                    pacer.factor = max(0.5, pacer.factor * 0.95)

    def _read_headers(self, headers: Mapping[str, str], now: float) -> None:
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            try:
                exhausted = remaining is not None and float(remaining) <= 0
            except ValueError:
                continue
            reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
            if exhausted and reset:
                self._cool_down(now, reset)

    def _cool_down(self, now: float, wait: float) -> None:
        """Stop new requests for `wait` seconds, never more than `max_wait_s` (NaN counts as the cap)."""
        capped = min(max(wait, 0.0), self.max_wait_s) if wait == wait else self.max_wait_s
        self.cooldown_until = max(self.cooldown_until, now + capped)

    def _wake(self) -> None:
        free = int(self.limit) - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1


class _Slot:
    def __init__(self, limiter: RateLimiter, messages: Sequence[Message], params: Mapping[str, Any]) -> None:
        self.limiter, self.messages, self.params = limiter, messages, params

    async def __aenter__(self) -> None:
        await self.limiter.enter(self.messages, self.params)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.limiter.leave(exc, RESPONSE_HEADERS.get() if exc is None else None)


# the longest a request-rate limit may make one request wait (the first one included): a rate below
# 60 / MAX_INTERVAL_S per minute is a unit slip (per second, per hour), refused before the first call
MAX_INTERVAL_S = 600.0
RATE_HINT = "rate limited: pace the calls below the provider's limits with judge.rpm / judge.tpm"


class RateSettingError(ValueError):
    """A limit no run can keep to (`judge.rpm` booking its first request hours ahead), as one line."""


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86_400.0), ("hours", 3_600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def limiter_for(
    model: str, rpm: float | None, tpm: float | None, concurrency: int, max_wait_s: float = 60.0
) -> RateLimiter | None:
    """The judge's limiter, or None when it sets no limit (the plain semaphore then). An `rpm` that spaces
    requests more than `MAX_INTERVAL_S` apart is a RateSettingError (as a request larger than `tpm` is at its
    first call): the run would wait in silence before its first request."""
    if not rpm and not tpm:
        return None
    if rpm and 60.0 / rpm > MAX_INTERVAL_S:
        raise RateSettingError(
            f"judge.rpm={rpm:g} allows one request every {_duration(60.0 / rpm)} (the first one included): "
            f"it counts requests per minute; set it to the provider's limit (at least {60.0 / MAX_INTERVAL_S:g})"
        )

    def tokens(messages: Sequence[Message], params: Mapping[str, Any]) -> int:
        return prompt_tokens(model, messages) + int(params.get("max_tokens") or 0)

    return RateLimiter(rpm=rpm, tpm=tpm, concurrency=concurrency, tokens=tokens, max_wait_s=max_wait_s)
