"""One refresh identity per study (issue 34, break 1): `cache.refresh=true` needs `cache.refresh_date`, given
once for the study and recorded in its manifest; the cache keys, the study id and the manifest read that one
value, never the clock. Before: the keys were dated with the day the command started (UTC), so the same command
after midnight re-asked every call, a refresh batch resumed the next day was submitted again, shards started on
two days could not be merged and a run crossing midnight cached under day D and wrote D+1 in its manifest.

The clock is injected (`experiments.config.utc_now`); nothing sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import experiments.config as config_module
from experiments.config import CacheConfig, ConfigError, refresh_problem
from experiments.shard import refresh_date, study_id
from tests.support.configs import config
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run, run_in_process
from tests.support.studies import typed

MIDNIGHT = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def study(server: ScriptedServer, tmp: Path, *extra: str) -> dict[str, Any]:
    return config(
        [
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "limit=2",
            "n_samples=1",
            f"cache_dir={tmp / 'cache'}",
            "cache.refresh=true",
            *extra,
        ]
    )


def test_refresh_without_a_date_is_refused_before_any_call(server: ScriptedServer, tmp_path: Path) -> None:
    """Through the command line: one line naming the setting and today's date (UTC); no request (before: the
    run went ahead under the day's date, exit 0)."""
    before = len(server.requests)
    args = ["judge=qwen", f"judge.api_base={server.api_base}", "limit=1", "n_samples=1", "cache.refresh=true"]
    done = run(args, tmp_path, {"OPENAI_API_KEY": "sk-local-test-server"})
    err = done.stderr.strip()
    assert done.returncode == 2 and "\n" not in err and "Traceback" not in err, done.stderr[-2000:]
    assert err.startswith("error: cache.refresh=true needs cache.refresh_date=YYYY-MM-DD naming this refresh")
    assert len(server.requests) == before


def test_a_refresh_is_one_study_across_midnight_reruns_and_shards(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 0/2 at 23:59:59, its rerun at 00:00:01 the next day (0 calls), shard 1/2 at 00:00:02: one study id,
    one refresh date in every manifest, the rerun answered from the cache."""
    date = "2026-12-02"
    clock = {"now": MIDNIGHT - timedelta(seconds=1)}
    monkeypatch.setattr(config_module, "utc_now", lambda: clock["now"])
    dated = f"cache.refresh_date={date}"
    start = len(server.requests)
    _, first = run_in_process(study(server, tmp_path, dated, "shard=0/2"), tmp_path / "s0")
    made = len(server.requests) - start
    assert made == first["calls_made"] > 0
    clock["now"] = MIDNIGHT + timedelta(seconds=1)
    _, again = run_in_process(study(server, tmp_path, dated, "shard=0/2"), tmp_path / "s0-again")
    assert again["calls_made"] == 0 and again["calls_cached"] == first["calls_made"]
    assert len(server.requests) - start == made  # not paid twice
    clock["now"] = MIDNIGHT + timedelta(seconds=2)
    _, other = run_in_process(study(server, tmp_path, dated, "shard=1/2"), tmp_path / "s1")
    assert first["study_id"] == again["study_id"] == other["study_id"]
    assert first["cache_refresh"] == again["cache_refresh"] == other["cache_refresh"] == date


AROUND_MIDNIGHT = st.integers(-3 * 3600, 3 * 3600).map(lambda s: MIDNIGHT + timedelta(seconds=s))
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=-8)), timezone(timedelta(hours=5, minutes=30))])


TYPED = typed(config(["judge=qwen", "cache.refresh=true", "cache.refresh_date=2000-01-01"]))


@settings(max_examples=60, deadline=None, database=None)
@given(start=AROUND_MIDNIGHT, later=AROUND_MIDNIGHT, zone=ZONES, given_date=st.dates())
def test_the_refresh_identity_never_depends_on_the_clock(
    start: datetime, later: datetime, zone: timezone, given_date: Any
) -> None:
    """Property: for any two clock times around midnight (in any zone), a study with a refresh date has the same
    refresh, study id and validity; without one it is refused, suggesting the clock's date in UTC."""
    cfg = replace(TYPED, cache=CacheConfig(refresh=True, refresh_date=given_date.isoformat()))
    seen = []
    for now in (start.astimezone(zone), later.astimezone(zone)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(config_module, "utc_now", lambda now=now: now)
            seen.append((refresh_date(cfg.cache), study_id(cfg), refresh_problem(cfg.cache)))
        missing = refresh_problem(CacheConfig(refresh=True), now=lambda now=now: now)
        assert missing is not None and f"cache.refresh_date={now.astimezone(UTC).date()}," in missing
    assert seen[0] == seen[1] and seen[0][0] == given_date.isoformat() and seen[0][2] is None


@pytest.mark.parametrize("value", ["today", "2026-13-01", "2026-2-1", "20261203"])
def test_a_refresh_date_that_is_no_date_is_one_line(value: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"^cache\.refresh_date={value}: not a date; write it as YYYY-MM-DD"
    ):
        typed(config(["judge=qwen", "cache.refresh=true", f"cache.refresh_date={value}"]))
