"""One judge, many endpoints: litellm's Router over three local replicas - one slow, one failing, one healthy.

The replicas are `tests.support.fault_server` servers (real HTTP through litellm); each counts the requests it saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from judge.routing import PoolSettings
from tests.support.configs import config
from tests.support.fault_server import FaultServer
from tests.support.runners import run_in_process

CONCURRENCY = 8
FAST = ["retry.initial_wait_s=0.01", "retry.max_wait_s=0.05"]


def pooled(api_bases: list[str], cache: Path, **pool: Any) -> dict[str, Any]:
    return config(
        [
            "judge=qwen",
            "limit=2",
            "n_samples=2",
            f"cache_dir={cache}",
            "workers=1",
            f"judge.concurrency={CONCURRENCY}",
            *FAST,
            f"judge.api_bases=[{','.join(api_bases)}]",
            *(f"judge.pool.{k}={v}" for k, v in pool.items()),
        ]
    )


def test_calls_spread_over_replicas_avoid_the_failing_one(tmp_path: Path) -> None:
    healthy = FaultServer(faults={}, answers={})
    slow = FaultServer(faults={}, answers={}, latency_s=1.0)
    failing = FaultServer(faults={}, answers={}, dead_rate=1.0)  # a 503 for every request
    with healthy.running(), slow.running(), failing.running():
        cfg = pooled([healthy.api_base, slow.api_base, failing.api_base], tmp_path / "cache", cooldown_s=60)
        table, manifest = run_in_process(cfg, tmp_path / "pool")
        # every call completed; each failed request was one retry, routed to another replica
        assert manifest["calls_made"] == manifest["calls_total"] == 2 * 11 * 2
        assert manifest["provider_errors"] == 0 and table["parse_ok"].all()
        assert healthy.requests + slow.requests == manifest["calls_made"]
        assert failing.requests == manifest["retries"] > 0
        # the failing replica rests after its first failures: at most the requests already in flight reach it
        assert failing.requests <= CONCURRENCY
        assert slow.requests > 0 and slow.requests < healthy.requests  # least-busy: the slow one gets fewer

        # the key does not depend on the replica: a one-endpoint judge on the first replica replays it all
        seen = healthy.requests + slow.requests + failing.requests
        single = config(
            [
                "judge=qwen",
                f"judge.api_base={healthy.api_base}",
                "limit=2",
                "n_samples=2",
                f"cache_dir={tmp_path / 'cache'}",
                "workers=1",
            ]
        )
        _, replay = run_in_process(single, tmp_path / "single")
        assert replay["calls_made"] == 0 and replay["calls_cached"] == manifest["calls_total"]
        assert healthy.requests + slow.requests + failing.requests == seen


def test_pool_settings_are_checked() -> None:
    assert PoolSettings.from_config(None) == PoolSettings()
    with pytest.raises(ValueError, match=r"^judge\.pool\.retries: unknown setting"):
        PoolSettings.from_config({"retries": 3})
    with pytest.raises(ValueError, match=r"^judge\.pool\.routing=round-robin: choose one of least-busy"):
        PoolSettings.from_config({"routing": "round-robin"})


def test_bad_pool_setting_is_one_line(tmp_path: Path) -> None:
    cfg = pooled(["http://127.0.0.1:9/v1"], tmp_path / "cache", routing="fastest")
    from experiments.config import ConfigError  # the typed config refuses it, before any folder or call

    with pytest.raises(ConfigError, match=r"^judge\.pool\.routing=fastest: choose one of"):
        run_in_process(cfg, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("max_parallel_requests", -1, r"^judge\.pool\.max_parallel_requests=-1: must be at least 1$"),
        ("rpm", -5, r"^judge\.pool\.rpm=-5: must be at least 1$"),
        ("rpm", 0, r"^judge\.pool\.rpm=0: must be at least 1$"),
        ("allowed_fails", -2, r"^judge\.pool\.allowed_fails=-2: must be at least 0$"),
        ("cooldown_s", -1.0, r"^judge\.pool\.cooldown_s=-1\.0: must be at least 0$"),
        ("routing", "fastest", r"^judge\.pool\.routing=fastest: choose one of least-busy"),
    ],
)
def test_every_pool_setting_is_checked_by_the_typed_config(
    tmp_path: Path, key: str, value: Any, line: str
) -> None:
    """Issue 25 #14: max_parallel_requests=-1 was litellm's 84-line traceback and rpm=-5 was accepted (then
    every call failed): each is one line from the typed config, before any folder or call."""
    from experiments.config import ConfigError, load

    cfg = pooled(["http://127.0.0.1:9/v1"], tmp_path / "cache", **{key: value})
    with pytest.raises(ConfigError, match=line):
        load(cfg)
    with pytest.raises(ValueError, match=line):
        PoolSettings.from_config({key: value})


def test_a_request_no_replica_can_take_waits_and_is_not_counted(tmp_path: Path) -> None:
    """Issue 25 #8: with every replica resting, the Router's rejections counted as retries and errors (made +
    retries + errors = 92 while the replicas saw 15 requests; 14 of 22 calls unscored, never sent). A request
    no replica can take now waits for one: the manifest's counts are the requests the replicas saw."""
    flaky = [FaultServer(seed=s, faults={"503": 0.4}, answers={}, max_faults=1) for s in (1, 2)]
    with flaky[0].running(), flaky[1].running():
        cfg = pooled([f.api_base for f in flaky], tmp_path / "cache", cooldown_s=0.5, allowed_fails=0)
        table, manifest = run_in_process(cfg, tmp_path / "pool")
        seen = flaky[0].requests + flaky[1].requests
    assert manifest["calls_made"] == manifest["calls_total"] == 2 * 11 * 2 and table["parse_ok"].all()
    assert manifest["provider_errors"] == 0 and manifest["retries"] > 0  # each 503 was one retry
    assert manifest["calls_made"] + manifest["retries"] + manifest["provider_errors"] == seen
