"""judge.ratelimit: the token-bucket schedule (known values), the reset-duration parser, and the adaptive
behaviour through the real litellm path against a local server that answers 429 with Retry-After."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from judge.cache.store import CallCache
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.ratelimit import Pacer, RateLimiter, limiter_for, parse_duration
from judge.retry import FatalProviderError, RetryPolicy
from tests.support.openai_server import ScriptedServer, Step, scripted


def test_parse_duration_known_values() -> None:
    assert parse_duration("1s") == 1.0 and parse_duration("6m0s") == 360.0 and parse_duration("250ms") == 0.25
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5) and parse_duration("0.4") == 0.4
    assert parse_duration(None) is None and parse_duration("soon") is None


def test_pacer_schedule_known_values() -> None:
    pacer = Pacer(per_minute=600, burst_s=0.5)  # 10 per second, 0.5 s (5 requests) may go at once
    delays = [pacer.reserve(1, now=100.0) for _ in range(8)]
    assert delays == pytest.approx([0, 0, 0, 0, 0, 0.1, 0.2, 0.3])
    assert pacer.reserve(1, now=101.0) == pytest.approx(
        0.0
    )  # the bucket refilled meanwhile (tat 100.8 < 101)
    tokens = Pacer(per_minute=60_000, burst_s=0.5)  # 1,000 tokens per second
    assert tokens.reserve(400, now=0.0) == 0.0 and tokens.reserve(400, now=0.0) == pytest.approx(0.3)


def test_no_limit_keeps_the_plain_path() -> None:
    assert limiter_for("gpt-4o", None, None, 8) is None
    assert isinstance(limiter_for("gpt-4o", 600, None, 8), RateLimiter)


def test_429_backs_off_and_headers_are_read(tmp_path: Path) -> None:
    ok = Step(
        200,
        '{"score": 3}',
        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "50ms"},
    )
    server = ScriptedServer(scripted([Step(429, headers={"retry-after": "0.2"}), ok], then=ok))
    with server.running():
        completer = LiteLLMCompleter("openai/judge", api_base=server.api_base)
        completer.read_headers = True
        judge = Judge(
            completer, CallCache(tmp_path / "cache"), policy=RetryPolicy(initial_wait_s=0.01), concurrency=4
        )
        judge.limiter = limiter = RateLimiter(rpm=6000, tpm=None, concurrency=4, tokens=lambda m, p: 1)
        seen: list[float] = []
        real_leave = limiter.leave

        def leave(exc: BaseException | None, headers: object) -> None:
            real_leave(exc, headers)  # type: ignore[arg-type]
            if exc is not None or seen:  # from the 429 on (a success may leave before it)
                seen.append(limiter.limit)

        limiter.leave = leave  # type: ignore[method-assign]

        async def run() -> list[object]:
            calls = [
                judge.call_provider([{"role": "user", "content": f"q{i}"}], {"seed": 0}, f"k{i}")
                for i in range(3)
            ]
            return await asyncio.gather(*calls)

        results = asyncio.run(run())
        judge.cache.close()
    assert all(r.completion is not None for r in results)  # type: ignore[attr-defined]
    assert len(server.requests) == 4 and limiter.rate_limited == 1
    assert seen[0] == 2.0  # the 429 halved the 4 allowed in flight; successes then add 1/limit each
    assert seen[1] == pytest.approx(2.5) and limiter.in_flight == 0
    assert limiter.requests is not None and limiter.requests.factor < 1.0  # pacing slowed by the 429
    assert limiter.cooldown_until > 0  # remaining-requests 0 + reset 50 ms: a pause was scheduled


def test_a_token_limit_below_one_request_is_refused_naming_its_size() -> None:
    """Issue 25 #13: judge.tpm=10 sent nothing and printed nothing (the first call would have waited ~90
    minutes): a request larger than the whole per-minute limit is refused at once, naming its size."""
    limiter = RateLimiter(rpm=None, tpm=10, concurrency=2, tokens=lambda m, p: 1_234)
    message = [{"role": "user", "content": "q"}]
    with pytest.raises(FatalProviderError, match=r"^judge\.tpm=10 cannot admit one request .* 1,234 tokens"):
        asyncio.run(asyncio.wait_for(limiter.enter(message, {}), timeout=2))
    assert limiter.in_flight == 0
    fits = RateLimiter(rpm=None, tpm=100_000, concurrency=2, tokens=lambda m, p: 1_234)
    asyncio.run(asyncio.wait_for(fits.enter(message, {}), timeout=2))
    assert fits.in_flight == 1


@pytest.mark.timeout(120)
def test_a_study_under_a_too_small_token_limit_stops_in_one_line(tmp_path: Path) -> None:
    from experiments.inputs import StudyError
    from tests.support.configs import config
    from tests.support.fault_server import FaultServer
    from tests.support.runners import run_in_process

    server = FaultServer(faults={}, answers={})
    with server.running():
        args = ["judge=qwen", f"judge.api_base={server.api_base}", "limit=1", "n_samples=1", "judge.tpm=10"]
        cfg = config([*args, f"cache_dir={tmp_path / 'cache'}", "workers=1"])
        with pytest.raises(StudyError, match=r"^judge\.tpm=10 cannot admit one request of this run"):
            run_in_process(cfg, tmp_path / "run")
    assert server.requests == 0 and not (tmp_path / "run").exists()
