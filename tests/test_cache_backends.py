"""The Redis cache backend against a real redis-server, and a study's cache exported, imported and replayed.

Studies run in-process (`run_study`) through litellm's real HTTP path to a local scripted server that counts
every request, so "0 provider calls" is what the server saw.
"""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import diskcache
import pandas as pd
import pytest
import redis

from experiments.inputs import StudyError
from judge.cache.backends import open_cache
from judge.cache.bundle import BundleError, export_runs, import_bundle, main
from judge.cache.store import CacheError, CallCache
from judge.types import Completion
from tests.support.cli import run as run_cli
from tests.support.configs import config
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.redis_server import RedisServer, redis_server
from tests.support.runners import run_in_process

ROOT = Path(__file__).resolve().parent.parent
ROWS = [
    "prompt_id",
    "candidate_id",
    "dimension",
    "sample_idx",
    "score",
    "parse_ok",
    "raw",
    "position",
    "label",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


@pytest.fixture()
def redis_srv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    # the answers a dying server could not take are journaled per URL: this test's own journal, so a later
    # server on the same port never imports them
    monkeypatch.setenv("JUDGESCOPE_JOURNAL_DIR", str(tmp_path / "journal"))
    with redis_server(tmp_path / "redis") as srv:
        yield srv


def study(server: ScriptedServer, *extra: str) -> dict:
    return config(["judge=qwen", f"judge.api_base={server.api_base}", "limit=2", "n_samples=2", *extra])


def on_redis(url: str) -> list[str]:
    return ["cache.backend=redis", f"cache.url={url}"]


def without_latency(value: str) -> dict:
    return {k: v for k, v in json.loads(value.split("\n", 1)[1]).items() if k != "latency_s"}


def table(run: Path) -> pd.DataFrame:
    return pd.read_parquet(run / "results.parquet")[ROWS]


def test_redis_holds_the_disk_entries_and_replays(
    server: ScriptedServer, redis_srv: RedisServer, tmp_path: Path
) -> None:
    before = len(server.requests)
    # two forked workers, each with its own connection (CallCache.reopen), write to the one Redis
    _, first = run_in_process(study(server, *on_redis(redis_srv.url), "workers=2"), tmp_path / "r1")
    made = len(server.requests) - before
    assert first["calls_made"] == made
    assert made == 2 * 11 * 2  # 2 instances x 11 candidates x 2 samples
    again, manifest = run_in_process(study(server, *on_redis(redis_srv.url)), tmp_path / "r2")
    assert len(server.requests) - before == made and manifest["calls_cached"] == made
    pd.testing.assert_frame_equal(table(tmp_path / "r1"), table(tmp_path / "r2"))

    # the same study on disk stores the very same keys and (checksummed) values
    run_in_process(study(server, f"cache_dir={tmp_path / 'disk'}"), tmp_path / "d1")
    keys = (tmp_path / "r1" / "cache_keys.txt").read_text().split()
    assert keys == (tmp_path / "d1" / "cache_keys.txt").read_text().split() and len(set(keys)) == made
    client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    with diskcache.Cache(str(tmp_path / "disk")) as disk:
        # equal but for the latency each call measured
        assert all(without_latency(client.get(k)) == without_latency(disk.get(k)) for k in keys)
    with diskcache.Cache(str(tmp_path / "copy")) as copy:  # Redis's values, as they are, in a disk cache
        for key in keys:
            copy.set(key, client.get(key))
    on_disk, on_redis_ = CallCache(tmp_path / "copy"), open_cache("redis", redis_srv.url)
    assert all(on_disk.get(k) == on_redis_.get(k) is not None for k in keys) and on_disk.damaged == 0
    assert client.dbsize() == made

    # a damaged value is caught by its checksum, dropped and asked for again: exactly one call
    client.set(keys[0], client.get(keys[0]).replace('"text":"{', '"text":"{ '))
    _, third = run_in_process(study(server, *on_redis(redis_srv.url)), tmp_path / "r3")
    assert third["cache_damaged_entries"] == 1 and third["calls_made"] == 1
    assert len(server.requests) - before == made + 1 + made  # (+ the disk run's own calls)


def test_dead_redis_is_one_line_and_no_calls(
    server: ScriptedServer, redis_srv: RedisServer, tmp_path: Path
) -> None:
    cache = open_cache("redis", redis_srv.url)
    redis_srv.stop()
    with pytest.raises(CacheError, match=r"^redis://127\.0\.0\.1:\d+/0: cannot read the Redis call cache"):
        cache.get("0" * 64)  # a dead server mid-run is an error, never a miss
    before = len(server.requests)
    with pytest.raises(StudyError, match=r"cannot reach the Redis call cache .*start the server") as err:
        run_in_process(study(server, *on_redis(redis_srv.url)), tmp_path / "out")
    assert "\n" not in str(err.value) and len(server.requests) == before and not (tmp_path / "out").exists()
    with pytest.raises(StudyError, match=r"^cache\.url: cache\.backend=redis needs a server URL"):
        run_in_process(study(server, "cache.backend=redis"), tmp_path / "out")
    with pytest.raises(StudyError, match=r"^cache\.backend=s3: unknown backend; choose one of disk, redis"):
        run_in_process(study(server, "cache.backend=s3"), tmp_path / "out")
    assert "secret" not in str(open_cache_error("redis://:secret@127.0.0.1:1/0"))


def test_redis_dying_mid_run_stops_the_study(redis_srv: RedisServer, tmp_path: Path) -> None:
    """The server kills Redis while answering its 5th request: the study stops with one line at the next cache
    write, after at most the requests already in flight - no storm of calls that could not be cached."""

    def answer(body: dict) -> Step:
        if len(dying.requests) == 5:
            redis_srv.stop()
        return Step(200, rubric_answer(body))

    dying = ScriptedServer(answer)
    with dying.running():
        cfg = config(
            [
                "judge=qwen",
                f"judge.api_base={dying.api_base}",
                "limit=2",
                "n_samples=2",
                "workers=1",
                "judge.concurrency=4",
                *on_redis(redis_srv.url),
            ]
        )
        with pytest.raises(
            StudyError, match=r"^redis://127\.0\.0\.1:\d+/0: cannot write the Redis call cache"
        ) as err:
            run_in_process(cfg, tmp_path / "out")
    assert "\n" not in str(err.value)
    assert 5 <= len(dying.requests) <= 5 + 4  # the call that found Redis dead + those already in flight


def open_cache_error(url: str) -> CacheError:
    with pytest.raises(CacheError) as err:
        open_cache("redis", url)
    return err.value


def test_export_import_replays_with_zero_calls(
    server: ScriptedServer, redis_srv: RedisServer, tmp_path: Path
) -> None:
    """Export a two-run study's entries, import them into a fresh folder (and a fresh Redis), rerun: 0 calls."""
    multi, cache = tmp_path / "multirun", f"cache_dir={tmp_path / 'original'}"
    before = len(server.requests)
    run_in_process(study(server, cache), multi / "0_independent")
    run_in_process(study(server, cache, "mode=comparative"), multi / "1_comparative")
    made = len(server.requests) - before
    assert made == 2 * 11 * 2 + 2 * 2 * 2  # comparative: a prompt per generator
    # an entry the study did not use is not exported
    original = CallCache(tmp_path / "original")
    original.set("f" * 64, Completion("unrelated", "stop", 1, 1, None, 0.1))
    manifest = export_runs(multi, tmp_path / "study-cache.zip", original)
    original.close()
    assert manifest["entries"] == made and manifest["unanswered_calls"] == 0
    assert manifest["models"] == {"openai/Qwen/Qwen2.5-7B-Instruct": made}
    assert list(manifest["rubric_versions"]) == ["novelty"] and len(manifest["runs"]) == 2
    assert sorted(r["calls"] for r in manifest["runs"]) == [8, 44]

    # the published file, loaded into a fresh folder through the CLI (one line), replays the study: 0 calls
    out = run_cli(
        [
            sys.executable,
            "-m",
            "judge.cache",
            "import",
            str(tmp_path / "study-cache.zip"),
            "--cache-dir",
            str(tmp_path / "fresh"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert (
        out.returncode == 0
        and out.stderr.strip() == f"{made} entries imported (0 already there) into {tmp_path / 'fresh'}"
    ), out.stderr
    fresh = f"cache_dir={tmp_path / 'fresh'}"
    for name, extra in (("0_independent", []), ("1_comparative", ["mode=comparative"])):
        _, replay = run_in_process(study(server, fresh, *extra), tmp_path / "rerun" / name)
        assert replay["calls_made"] == 0 and replay["calls_cached"] == replay["calls_total"]
        pd.testing.assert_frame_equal(table(tmp_path / "rerun" / name), table(multi / name))
    assert len(server.requests) - before == made

    # ... and into a fresh Redis, which then serves the same rerun
    assert main(["import", str(tmp_path / "study-cache.zip"), "--redis-url", redis_srv.url]) == 0
    _, on_server = run_in_process(study(server, *on_redis(redis_srv.url)), tmp_path / "rerun-redis")
    assert on_server["calls_made"] == 0 and len(server.requests) - before == made
    assert import_bundle(tmp_path / "study-cache.zip", open_cache("redis", redis_srv.url)) == (0, made)


def test_import_refuses_a_damaged_file_and_writes_nothing(server: ScriptedServer, tmp_path: Path) -> None:
    run_in_process(study(server, f"cache_dir={tmp_path / 'c'}", "mode=comparative"), tmp_path / "run")
    with pytest.raises(BundleError, match=r"not in this cache; export from the cache the runs used"):
        export_runs(tmp_path / "run", tmp_path / "x.zip", CallCache(tmp_path / "empty"))
    assert not (tmp_path / "x.zip").exists()
    good = tmp_path / "good.zip"
    export_runs(tmp_path / "run", good, CallCache(tmp_path / "c"))
    with zipfile.ZipFile(good) as zf:
        manifest, lines = json.loads(zf.read("manifest.json")), zf.read("entries.jsonl").splitlines()
    entry = json.loads(lines[2])
    entry["completion"] = entry["completion"].replace('"completion_tokens":7', '"completion_tokens":8')
    lines[2] = json.dumps(entry).encode()
    data = b"\n".join(lines) + b"\n"
    bad_entry = write_zip(tmp_path / "bad-entry.zip", {**manifest, "entries_sha256": sha256(data)}, data)
    with pytest.raises(
        BundleError, match=r"bad-entry\.zip: entries\.jsonl:3: bad entry \(checksum mismatch\)$"
    ):
        import_bundle(bad_entry, CallCache(tmp_path / "target"))
    edited = write_zip(tmp_path / "edited.zip", manifest, data)
    with pytest.raises(BundleError, match=r"does not match the SHA-256 in manifest\.json"):
        import_bundle(edited, CallCache(tmp_path / "target"))
    assert len(CallCache(tmp_path / "target")) == 0
    assert main(["import", str(tmp_path / "missing.zip"), "--cache-dir", str(tmp_path / "target")]) == 2


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def write_zip(path: Path, manifest: dict, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("entries.jsonl", data)
        zf.writestr("manifest.json", json.dumps(manifest))
    return path


def test_the_cache_command_chooses_the_bundled_price_map_before_litellm(tmp_path: Path) -> None:
    """`python -m judge.cache` is an entry point: with no price map chosen in the shell it chooses litellm's
    bundled map before anything it loads could import litellm, so no download is attempted (today its path
    loads no litellm at all: tests/test_imports.py)."""
    import os  # noqa: PLC0415

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["PYTHONPATH"] = str(root)
    command = [sys.executable, "-m", "judge.cache", "--help"]
    done = run_cli(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cost map" not in done.stderr, done.stderr[-2000:]
