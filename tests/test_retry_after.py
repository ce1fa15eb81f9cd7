"""Retry-After (hostile review 2, findings 4 and 5), against the local ScriptedServer, no timing:

- a rate-limited judge caps a 429's Retry-After (and an x-ratelimit-reset) at retry.max_wait_s;
- a Retry-After that is neither seconds nor an HTTP date falls back to the backoff.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from judge.cache.store import CallCache
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.ratelimit import RateLimiter
from judge.retry import RetryPolicy
from tests.support.configs import compose
from tests.support.openai_server import ScriptedServer, Step, scripted
from tests.support.studies import typed


def _ask(server: ScriptedServer, tmp: Path, policy: RetryPolicy, limiter: RateLimiter | None = None) -> Any:
    """One call through the real litellm path; its CallResult."""
    completer = LiteLLMCompleter("openai/judge", api_base=server.api_base)
    completer.read_headers = limiter is not None
    judge = Judge(completer, CallCache(tmp / "cache"), policy=policy, concurrency=1)
    judge.limiter = limiter
    try:
        return asyncio.run(judge.call_provider([{"role": "user", "content": "q"}], {"seed": 0}, "k"))
    finally:
        judge.cache.close()


# --- finding 4: the rate-limited path caps Retry-After ----------------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        Step(429, headers={"Retry-After": "3600"}),
        Step(429, headers={"Retry-After": "inf"}),
        Step(
            200,
            '{"score": 3}',
            headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2h"},
        ),
    ],
)
def test_a_rate_limited_pause_is_capped_at_max_wait_s(step: Step, tmp_path: Path) -> None:
    server = ScriptedServer(scripted([step], then=step))
    limiter = RateLimiter(rpm=6000, tpm=None, concurrency=1, tokens=lambda m, p: 1, max_wait_s=5.0)
    start = time.monotonic()
    with server.running():
        _ask(server, tmp_path, RetryPolicy(max_attempts=1, max_wait_s=5.0), limiter)  # no retry: no wait here
    assert len(server.requests) == 1 and limiter.cooldown_until > start  # a pause was scheduled
    # every later request of the run waits until cooldown_until: at most max_wait_s from now, never an hour
    assert limiter.cooldown_until <= time.monotonic() + 5.0


def test_limiter_for_takes_the_retry_cap(tmp_path: Path) -> None:
    from experiments.judges import make_judge

    cfg = compose(
        "judge=qwen",
        "judge.api_key_env=null",
        "+judge.rpm=600",
        "retry.max_wait_s=7",
        f"cache_dir={tmp_path / 'cache'}",
    )
    judge = make_judge(typed(cfg))
    judge.cache.close()
    assert judge.limiter is not None and judge.limiter.max_wait_s == 7.0


# --- finding 5: an unparseable Retry-After falls back to the backoff --------------------------------------------


def test_an_unparseable_retry_after_falls_back_to_the_backoff(tmp_path: Path) -> None:
    odd = [Step(429, headers={"Retry-After": value}) for value in ("soon", "1.5s", "2026-12-01T10:00:00Z")]
    server = ScriptedServer(scripted(odd, then=Step(200, '{"score": 3}')))
    with server.running():
        result = _ask(server, tmp_path, RetryPolicy(max_attempts=6, initial_wait_s=0.01, max_wait_s=0.05))
    assert result.completion is not None and result.retries == 3 and len(server.requests) == 4
