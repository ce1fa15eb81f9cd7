"""Answers are kept before a run stops for any cause (issue 34, break 2): when Redis dies or the disk cache is
full mid-run, the answers received or in flight go to a local journal (judge.cache.store) and the next run
imports it, so none is asked for (and paid) again. Before: 25 requests for 21 calls cached.

The Redis test runs the real CLI against a real redis-server (persisting to disk, as a production server does)
that the local chat server kills while answering; requests are counted at that server."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from judge.cache.backends import open_cache
from judge.cache.store import CacheError, CallCache
from judge.types import Completion
from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.redis_server import REDIS_SERVER, RedisServer
from tests.support.runners import run_env

CALLS = 2 * 11 * 2  # limit=2 instances x 11 candidates x n_samples=2, independent mode


def test_answers_in_flight_when_redis_dies_are_not_paid_again(tmp_path: Path) -> None:
    """Redis is killed while the server answers its 5th request (4 calls in flight): the run stops in one line;
    restarted, the same command imports the journal and asks only for what was never answered - every call is
    paid once (before: the answers received after the kill were asked for again)."""
    if not Path(REDIS_SERVER).exists():
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
    redis = RedisServer(tmp_path / "redis-data", persist=True)
    port = redis.port

    def answer(body: dict) -> Step:
        if len(server.requests) == 5:
            redis.stop()
        return Step(200, rubric_answer(body))

    server = ScriptedServer(answer)
    try:
        with server.running():
            command = [
                sys.executable,
                "-m",
                "experiments.run",
                "judge=qwen",
                f"judge.api_base={server.api_base}",
                "limit=2",
                "n_samples=2",
                "workers=1",
                "judge.concurrency=4",
                "cache.backend=redis",
                f"cache.url={redis.url}",
                "progress=false",
            ]
            stopped = run_cli(
                command, cwd=tmp_path, env=run_env(tmp_path), capture_output=True, text=True, timeout=300
            )
            err = stopped.stderr.strip()
            assert stopped.returncode == 2 and "\n" not in err, stopped.stderr[-2000:]
            assert "cannot write the Redis call cache" in err and "kept in" in err, err
            paid_first = len(server.requests)
            assert 5 <= paid_first <= 5 + 4
            redis = RedisServer(tmp_path / "redis-data", port=port, persist=True)  # restarted: what it held
            again = run_cli(
                command, cwd=tmp_path, env=run_env(tmp_path), capture_output=True, text=True, timeout=300
            )
            assert again.returncode == 0, again.stderr[-2000:]
            assert "answers an earlier run could not cache" in again.stderr
            assert len(server.requests) == CALLS  # each call paid once, over both runs
    finally:
        redis.stop()


def test_a_full_disk_cache_journals_the_answer_and_the_next_open_imports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk cache's database refuses a write (SQLite's "database or disk is full", raised by a fake set
    in this unit test): the answer goes to the journal and the next open imports it; no journal is left."""
    monkeypatch.setenv("JUDGESCOPE_JOURNAL_DIR", str(tmp_path / "journal"))
    answer = Completion("3", "stop", 12, 7, 0.001, 0.5)
    cache = open_cache("disk", directory=tmp_path / "cache")

    def full_disk_fake(key: str, value: str) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cache._cache, "set", full_disk_fake)
    with pytest.raises(
        CacheError, match=r"cannot write the call cache \(database or disk is full\).*kept in"
    ):
        cache.set("k" * 64, answer)
    assert cache.journaled == 1 and cache.get("k" * 64) is None
    cache.close()
    reopened = open_cache("disk", directory=tmp_path / "cache")
    assert reopened.get("k" * 64) == answer
    assert not list((tmp_path / "journal").rglob("*.jsonl"))
    reopened.close()
    # a damaged journal line (cut short by a crash) is skipped, the rest imported
    other = CallCache(tmp_path / "other")
    other.journal.mkdir(parents=True)
    (other.journal / "crashed.jsonl").write_text('{"key": "x", "value": "0\\n{}"}\n{"key": "cut sho')
    assert other.replay_journal() == 0 and not list(other.journal.iterdir()) and len(other) == 0
