"""One judge, many endpoints: calls spread over replicas of one model (vLLM / SGLang) by litellm's Router.

A judge YAML lists the replicas under `api_bases`; litellm's Router picks one per request (`pool.routing`:
`least-busy` by default - a slow replica holds more requests in flight and gets fewer new ones), keeps each
under its own limits (`pool.max_parallel_requests`, `pool.rpm`) and rests a replica that fails
(`pool.allowed_fails` failures in a minute, then `pool.cooldown_s` seconds out). The Router makes no retries
of its own: a failed request comes back to the framework's retry policy, which counts it, and the retry is
routed to a replica that is not resting. A request the Router turns away because every replica rests (or is
at its own limits) never reached one: it waits for a replica instead of counting as an attempt - so the
manifest's calls and retries are exactly the requests the replicas saw. The cache key is that of a
one-endpoint judge on the first replica: it never depends on which replica answered.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import litellm
from litellm.types.router import RouterRateLimitError

from judge.completer import LiteLLMCompleter
from judge.routing import PoolSettings
from judge.spend.pricing import Prices
from judge.types import Completion, Message

GROUP = "judge"  # the Router's name for the pool's one model group


class RouterCompleter(LiteLLMCompleter):
    """A `LiteLLMCompleter` whose requests go through a litellm Router over `api_bases` (see module doc)."""

    def __init__(
        self,
        model: str,
        *,
        api_bases: Sequence[str],
        api_key_env: str | None = None,
        timeout_s: float = 120.0,
        extra: Mapping[str, Any] | None = None,
        pool: PoolSettings | None = None,
        prices: Prices | None = None,
    ) -> None:
        if not api_bases:
            raise ValueError("judge.api_bases: list at least one endpoint")
        # the first replica stands for the pool in the cache key (request_params drops it as "own endpoint")
        super().__init__(
            model,
            api_base=api_bases[0],
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            extra=extra,
            prices=prices,
        )
        self.api_bases = list(api_bases)
        self.pool = pool or PoolSettings()
        self.lean = False  # the Router's routing reads litellm's success/failure callbacks
        self.inline_setup = False
        self._router: litellm.Router | None = None
        self._pid = 0

    def _deployment(self, api_base: str) -> dict[str, Any]:
        params: dict[str, Any] = {"model": self.model, "api_base": api_base, "timeout": self.timeout_s}
        if self.api_key_env:
            params["api_key"] = os.environ.get(self.api_key_env)
        elif self.model.startswith("openai/"):
            params["api_key"] = "no-key"  # a keyless OpenAI-compatible server: the SDK needs a value
        for name in ("max_parallel_requests", "rpm"):
            if getattr(self.pool, name) is not None:
                params[name] = getattr(self.pool, name)
        return {"model_name": GROUP, "litellm_params": params}

    def router(self) -> litellm.Router:
        """This process's Router (a forked worker builds its own: its clients must not cross the fork)."""
        if self._router is None or self._pid != os.getpid():
            self._router = litellm.Router(
                model_list=[self._deployment(b) for b in self.api_bases],
                routing_strategy=self.pool.routing,
                num_retries=0,
                allowed_fails=self.pool.allowed_fails,
                cooldown_time=self.pool.cooldown_s,
            )
            self._pid = os.getpid()
        return self._router

    def _routed(self, messages: Sequence[Message], params: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = self._kwargs(messages, params)
        for name in ("model", "api_base", "api_key"):  # the deployment's, not the call's
            kwargs.pop(name, None)
        return kwargs

    def _resting(self, waited_s: float) -> litellm.RateLimitError:
        """Every replica still resting (or at its own limits) after waiting `waited_s`: the request was never
        sent. Said so; it is retried (a transient error) like any rate limit."""
        return litellm.RateLimitError(
            message=f"not sent: every endpoint of the pool rested for {waited_s:.0f} s (judge.pool)",
            llm_provider="router",
            model=self.model,
        )

    def max_wait_s(self) -> float:
        """How long a request waits for a replica to come back before it is given up: a resting replica is
        back after `cooldown_s`, one at its own rpm within a minute."""
        return self.pool.cooldown_s + 60.0

    def complete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        began = time.perf_counter()
        for pause in _pauses(self.max_wait_s()):
            started = time.perf_counter()  # the call's latency: from the request a replica took
            try:
                response = self.router().completion(model=GROUP, **self._routed(messages, params))
                return self._completion(response, started)
            except RouterRateLimitError:  # rejected before any replica saw it: not an attempt
                time.sleep(pause)
        raise self._resting(time.perf_counter() - began)

    async def acomplete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        began = time.perf_counter()
        for pause in _pauses(self.max_wait_s()):
            started = time.perf_counter()  # the call's latency: from the request a replica took
            try:
                response = await self.router().acompletion(model=GROUP, **self._routed(messages, params))
                return self._completion(response, started)
            except RouterRateLimitError:  # rejected before any replica saw it: not an attempt
                await asyncio.sleep(pause)
        raise self._resting(time.perf_counter() - began)


def _pauses(total_s: float) -> Iterator[float]:
    """The waits between tries while every replica rests: 50 ms doubling to 1 s, `total_s` in all."""
    pause, waited = 0.05, 0.0
    while waited < total_s:
        yield pause
        waited += pause
        pause = min(1.0, pause * 2)
