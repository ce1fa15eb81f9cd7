"""Reliability under faults: every fault, crash and resume, shared caches, damaged caches, secrets.

The studies run through the framework's real path (`python -m experiments.run` in a subprocess, or
`run_study` in-process where only the cache matters) and litellm's real HTTP path to `tests.support.fault_server`.
Each test asserts counts: rows, requests the server saw, retries in the manifest, cache entries.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import litellm
import pandas as pd
import pytest

from experiments.inputs import StudyError
from judge.cache.store import CacheError, CallCache
from judge.retry import is_transient
from judge.types import Completion
from tests.support.cli import popen
from tests.support.cli import run as run_cli
from tests.support.configs import config
from tests.support.fault_server import ANSWERS, OFF_RUBRIC, TRANSIENT, FaultServer
from tests.support.openai_server import ScriptedServer, Step
from tests.support.runners import manifest_of, run_env, run_in_process
from tests.support.studies import typed

PLANTED = "sk-planted-fault-path-0123456789-SECRET"
JUDGMENT = [
    "instance_id",
    "candidate_id",
    "dimension",
    "sample_idx",
    "score",
    "preference",
    "parse_ok",
    "raw",
    "position",
    "label",
]
MAX_ATTEMPTS = 6
FAST = ["retry.initial_wait_s=0.01", "retry.max_wait_s=0.05", f"retry.max_attempts={MAX_ATTEMPTS}"]


def write_dataset(path: Path, n_instances: int, n_generated: int = 7) -> Path:
    """`n_instances` instances, each with a reference and `n_generated` candidates (all texts unique)."""
    with path.open("w") as fh:
        for i in range(n_instances):
            iid = f"rel-{i}"
            fh.write(
                json.dumps(
                    {
                        "instance_id": iid,
                        "field": "nlp",
                        "background": [
                            {"title": f"Paper {i}", "text": f"Background passage {i} about retrieval gates."}
                        ],
                        "reference": {"candidate_id": f"{iid}:ref", "text": f"Reference question {i}?"},
                        "candidates": [
                            {"candidate_id": f"{iid}:g:{k}", "source": "gen", "text": f"Question {i}.{k}?"}
                            for k in range(n_generated)
                        ],
                    }
                )
                + "\n"
            )
    return path


def runner(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "experiments.run", *args, "progress=false"]


def run(
    args: list[str], tmp: Path, env_extra: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return run_cli(
        runner(args), cwd=tmp, env=run_env(tmp, env_extra), capture_output=True, text=True, timeout=timeout
    )


def study_args(server: FaultServer, data: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        f"dataset.path={data}",
        f"hydra.run.dir={run_dir}",
        *FAST,
        *extra,
    ]


def judgments(table: pd.DataFrame) -> pd.DataFrame:
    keys = ["instance_id", "candidate_id", "dimension", "sample_idx"]
    return table[JUDGMENT].sort_values(keys).reset_index(drop=True)


# --- every fault, 240 calls ---------------------------------------------------------------------------------

# Every kind at a rate that still shows it several times in 240 calls (~300 draws counting retries): the
# accounting below is exact whatever the counts, so what the size must buy is only that each kind occurs. The
# 1,080-call version at the default rates (1% slow, 3% off-rubric) spent 4x the CPU for the same checks.
FAULTS = {**dict.fromkeys(TRANSIENT, 0.04), "slow": 0.02}
CALLS = 10 * 8 * 3  # instances x candidates (a reference and 7 generated) x samples


@pytest.mark.slow
def test_faults_every_call_accounted_for(tmp_path: Path) -> None:
    """10 instances x 8 candidates x 3 samples = 240 calls through every kind of fault, on 2 workers."""
    # judge.timeout_s leaves a healthy answer 5 s on a loaded machine (at 3 s, load 11 timed out 3 healthy answers,
    # which the retry count then counted as injected faults); the injected slow answer takes 10 s
    data = write_dataset(tmp_path / "data.jsonl", 10)
    server = FaultServer(
        seed=7,
        faults=FAULTS,
        answers={"off_rubric": 0.05, "truncated": 0.05},
        dead_rate=0.03,
        max_faults=MAX_ATTEMPTS - 2,
        slow_s=10.0,
    )
    with server.running():
        args = study_args(
            server,
            data,
            tmp_path / "run",
            "n_samples=3",
            "judge.timeout_s=5",
            "judge.concurrency=16",
            "workers=2",
            "min_parse_rate=0",  # 1 call in 8 is unscored here by design
        )
        out = run(args, tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        counts, answered, log = server.counts(), server.answered(), list(server.log)

        # every kind of fault was injected
        assert all(counts[k] > 0 for k in (*TRANSIENT, *ANSWERS)), counts
        calls = server.calls()
        dead = {c for c in calls if server.is_dead(c)}
        assert len(calls) == CALLS and 0 < len(dead) < 20
        assert set(answered) == calls - dead  # every other call got its answer in the end

        table = pd.read_parquet(tmp_path / "run" / "results.parquet")
        manifest = manifest_of(tmp_path / "run")
        # exactly one row per (prompt, sample, dimension)
        assert len(table) == CALLS * 3
        assert not table.duplicated(["instance_id", "candidate_id", "sample_idx", "dimension"]).any()
        assert table.groupby(["instance_id", "candidate_id"]).size().eq(9).all()
        # scored, or unscored with the reason and the raw text
        scored, unscored = table[table.parse_ok], table[~table.parse_ok]
        assert scored["score"].notna().all() and unscored["score"].isna().all()
        assert unscored["error"].str.len().gt(0).all()
        kinds = answer_kinds(answered)
        off = unscored[unscored.raw == OFF_RUBRIC]
        assert len(off) == 3 * kinds["off_rubric"] and off["error"].str.contains("no JSON object").all()
        cut = unscored[unscored.finish_reason == "length"]
        assert len(cut) == 3 * kinds["truncated"] and cut["error"].str.startswith("truncated").all()
        assert set(cut["raw"]) == {s.text for s in answered.values() if s.fault == "truncated"}
        failed = unscored[unscored.error.str.contains(f"after {MAX_ATTEMPTS} attempts")]
        assert len(failed) == 3 * len(dead) and (failed.raw == "").all()
        assert failed["error"].str.contains("ServiceUnavailableError").all()
        assert len(scored) == 3 * kinds["ok"]

        # the manifest's accounting matches what the server saw
        transient = server.transient_injected()
        assert manifest["calls_total"] == CALLS and manifest["calls_cached"] == 0
        assert manifest["calls_made"] == len(answered) and manifest["provider_errors"] == len(dead)
        # every transient fault was followed by exactly one retry, except the last attempt of a dead call
        assert manifest["retries"] == transient - len(dead)
        alive_faults = sum(1 for s in log if s.fault in TRANSIENT and s.call not in dead)
        assert manifest["retries"] == alive_faults + (MAX_ATTEMPTS - 1) * len(dead)
        assert all(sum(s.call == c for s in log) == MAX_ATTEMPTS for c in dead)
        assert server.requests == manifest["calls_total"] + manifest["retries"]
        assert manifest["unscored_calls"] == len(dead) + kinds["off_rubric"] + kinds["truncated"]

        # a rerun pays for nothing it has: only the failed calls go out again (and fail again)
        before = server.requests
        again, second = run_in_process(
            config([*args, f"cache_dir={tmp_path / 'cache'}", "workers=1"]), tmp_path / "run2"
        )
        assert second["calls_cached"] == CALLS - len(dead) and second["calls_made"] == 0
        assert server.requests - before == len(dead) * MAX_ATTEMPTS
        assert {s.call for s in server.log[before:]} == dead
        pd.testing.assert_frame_equal(judgments(again), judgments(table))


def answer_kinds(answered: dict[str, Any]) -> dict[str, int]:
    out = dict.fromkeys(ANSWERS, 0)
    for served in answered.values():
        out[served.fault] += 1
    return out


# --- crash and resume ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_mid_run_then_resume(tmp_path: Path) -> None:
    """SIGKILL once 60 of 144 calls went out (84 still to go: at 16 in flight a clear margin over the polling
    below), then a resumed run asks only for what the cache lacks."""
    data = write_dataset(tmp_path / "data.jsonl", 6)  # 48 prompts x 3 samples = 144 calls
    total, concurrency, kill_at = 144, 8, 60
    server = FaultServer(seed=3, faults={}, answers={}, latency_s=0.03)
    with server.running():
        args = study_args(
            server, data, tmp_path / "killed", "n_samples=3", f"judge.concurrency={concurrency}", "workers=2"
        )
        with (tmp_path / "killed.err").open("w") as err:  # a file: nothing blocks on an unread pipe
            proc = popen(
                runner(args),
                cwd=tmp_path,
                env=run_env(tmp_path),
                stdout=subprocess.DEVNULL,
                stderr=err.fileno(),
            )
        deadline = time.monotonic() + 120
        while server.requests < kill_at and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, (
            f"the run ended before it could be killed: {(tmp_path / 'killed.err').read_text()[-2000:]}"
        )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # the workers died with it: nothing keeps calling the provider
        time.sleep(1.5)
        n_killed = server.requests
        time.sleep(1.0)
        assert server.requests == n_killed and kill_at <= n_killed < total
        assert not (tmp_path / "killed" / "results.parquet").exists()  # nothing partial was written
        with diskcache.Cache(str(tmp_path / "cache")) as cache:
            n_cached = len(cache)
        answered_before = {s.call for s in server.log}
        assert n_killed - concurrency <= n_cached <= n_killed

        resumed = run(study_args(server, data, tmp_path / "resumed", "n_samples=3"), tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        second = server.log[n_killed:]
        # only the calls that were not cached went out, each once; a call that had an answer but was not yet
        # cached when the process died (in flight) is the only kind asked again, at most `concurrency` of them
        assert len(second) == total - n_cached
        assert len({s.call for s in second}) == len(second)
        assert len(answered_before & {s.call for s in second}) == n_killed - n_cached <= concurrency
        assert server.calls() == answered_before | {s.call for s in second} and len(server.calls()) == total
        m = manifest_of(tmp_path / "resumed")
        assert m["calls_cached"] == n_cached and m["calls_made"] == total - n_cached

        # the final table equals an uninterrupted run's (its own cache, the same provider)
        whole, _ = run_in_process(
            config([*args, f"cache_dir={tmp_path / 'cache-whole'}", "workers=1"]), tmp_path / "whole"
        )
    resumed_table = judgments(pd.read_parquet(tmp_path / "resumed" / "results.parquet"))
    assert len(resumed_table) == total * 3
    pd.testing.assert_frame_equal(resumed_table, judgments(whole))


# --- two processes, one cache --------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_runs_share_one_cache_folder_at_once(tmp_path: Path) -> None:
    """Two runners (each with its workers) on one cache at once: no lost or damaged entry."""
    data = write_dataset(tmp_path / "data.jsonl", 6)  # 48 prompts
    server = FaultServer(seed=5, faults={"429": 0.05, "500": 0.03}, answers={}, latency_s=0.005)
    with server.running():
        procs = [
            popen(
                runner(study_args(server, data, tmp_path / f"r{n}", f"n_samples={n}", "workers=2")),
                cwd=tmp_path,
                env=run_env(tmp_path),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for n in (3, 4)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-3000:]
        union = 48 * 4
        answers = sum(1 for s in server.log if s.fault == "ok")
        assert union <= answers <= 48 * 3 + 48 * 4  # a call both runs missed at once may be paid twice
        cache = CallCache(tmp_path / "cache")
        keys = list(cache._cache.iterkeys())
        assert len(keys) == union
        assert all(cache.get(k) is not None for k in keys) and cache.damaged == 0
        cache.close()

        before = server.requests
        third, manifest = run_in_process(
            config(
                [*study_args(server, data, tmp_path / "r5", "n_samples=4"), f"cache_dir={tmp_path / 'cache'}"]
            ),
            tmp_path / "r5",
        )
        assert server.requests == before and manifest["calls_cached"] == union  # everything was there
    pd.testing.assert_frame_equal(
        judgments(third), judgments(pd.read_parquet(tmp_path / "r4" / "results.parquet"))
    )


def _hammer(directory: str, worker: int, n: int) -> None:
    cache = CallCache(directory)
    for i in range(n):
        shared = i % 3 == 0
        key = f"shared-{i}" if shared else f"w{worker}-{i}"
        value = Completion(f"answer {key}", "stop", i, 1, None, 0.0)
        cache.set(key, value)
        got = cache.get(key)
        assert got is not None and got.text == value.text
    cache.close()


def test_four_processes_write_one_cache_at_once(tmp_path: Path) -> None:
    n = 300
    ctx = multiprocessing.get_context("fork")  # children inherit the imports (spawn would re-import litellm)
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), w, n)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    cache = CallCache(tmp_path)
    shared = len(range(0, n, 3))
    assert len(cache) == 4 * (n - shared) + shared
    for key in cache._cache.iterkeys():
        got = cache.get(key)
        assert got is not None and got.text == f"answer {key}"
    assert cache.damaged == 0


# --- damaged cache -------------------------------------------------------------------------------------------


@pytest.fixture
def small_study(tmp_path: Path) -> Iterator[tuple[FaultServer, dict[str, Any], pd.DataFrame]]:
    """A 48-call study run once in-process (workers=1) against a clean server: (server, config, table)."""
    data = write_dataset(tmp_path / "data.jsonl", 2)  # 16 prompts x 3 samples
    server = FaultServer(seed=11, faults={}, answers={"off_rubric": 0.1})
    with server.running():
        cfg = config(
            [
                "judge=qwen",
                f"judge.api_base={server.api_base}",
                f"dataset.path={data}",
                f"cache_dir={tmp_path / 'cache'}",
                "workers=1",
                *FAST,
            ]
        )
        table, _ = run_in_process(cfg, tmp_path / "first")
        assert server.requests == 48
        yield server, cfg, table


def test_tampered_entry_is_detected_and_asked_again(small_study: Any, tmp_path: Path) -> None:
    server, cfg, table = small_study
    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    rowid, value = db.execute("SELECT rowid, value FROM Cache ORDER BY rowid LIMIT 1").fetchone()
    checksum, payload = value.split("\n", 1)
    # a flipped digit inside the stored answer: still valid JSON, still a valid rubric answer
    digit = next(i for i, ch in enumerate(payload) if ch in "0123" and payload[i - 1] == " ")
    flipped = payload[:digit] + str((int(payload[digit]) + 1) % 4) + payload[digit + 1 :]
    db.execute("UPDATE Cache SET value = ? WHERE rowid = ?", (f"{checksum}\n{flipped}", rowid))
    db.commit()
    db.close()
    before = server.requests
    again, manifest = run_in_process(cfg, tmp_path / "again")
    assert server.requests == before + 1 and manifest["cache_damaged_entries"] == 1
    pd.testing.assert_frame_equal(judgments(again), judgments(table))
    # an entry handed back for another key (as an index corruption would) is caught the same way
    db = sqlite3.connect(tmp_path / "cache" / "cache.db")
    key1, key2 = (r[0] for r in db.execute("SELECT key FROM Cache ORDER BY rowid LIMIT 2"))
    db.execute("UPDATE Cache SET key = ? WHERE key = ?", ("swap", key1))
    db.execute("UPDATE Cache SET key = ? WHERE key = ?", (key1, key2))
    db.execute("UPDATE Cache SET key = ? WHERE key = ?", (key2, "swap"))
    db.commit()
    db.close()
    before = server.requests
    third, manifest = run_in_process(cfg, tmp_path / "third")
    assert server.requests == before + 2 and manifest["cache_damaged_entries"] == 2
    pd.testing.assert_frame_equal(judgments(third), judgments(table))


def test_damaged_database_is_a_clear_error_or_a_clean_rebuild(small_study: Any, tmp_path: Path) -> None:
    server, cfg, table = small_study
    pristine = tmp_path / "pristine"
    shutil.copytree(tmp_path / "cache", pristine)
    outcomes = []
    for seed, flips in enumerate((1, 1, 2, 3, 8, 24)):
        shutil.rmtree(tmp_path / "cache")
        shutil.copytree(pristine, tmp_path / "cache")
        db = tmp_path / "cache" / "cache.db"
        data = bytearray(db.read_bytes())
        rng = random.Random(seed)
        for _ in range(flips):  # bytes flipped anywhere after the 100-byte header
            data[rng.randrange(100, len(data))] ^= 0xFF
        db.write_bytes(bytes(data))
        try:
            again, _ = run_in_process(cfg, tmp_path / f"damaged{seed}")
        except StudyError as exc:
            assert (
                "call cache" in str(exc)
                and str(tmp_path / "cache") in str(exc)
                and "move the folder" in str(exc)
            )
            outcomes.append("error")
        else:
            pd.testing.assert_frame_equal(judgments(again), judgments(table))  # never a wrong result
            outcomes.append("ok")
    # a header that is not SQLite: one clear error, before any call
    (tmp_path / "cache" / "cache.db").write_bytes(b"this is not a database" * 100)
    before = server.requests
    with pytest.raises(StudyError, match="cannot open the call cache"):
        run_in_process(cfg, tmp_path / "garbage")
    assert server.requests == before and not (tmp_path / "garbage").exists()
    with pytest.raises(CacheError):
        CallCache(tmp_path / "cache")
    # an emptied database file: a clean rebuild (every call asked again), same table
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        (tmp_path / "cache" / name).unlink(missing_ok=True)
    (tmp_path / "cache" / "cache.db").write_bytes(b"")
    rebuilt, manifest = run_in_process(cfg, tmp_path / "rebuilt")
    assert server.requests == before + 48 and manifest["calls_made"] == 48
    pd.testing.assert_frame_equal(judgments(rebuilt), judgments(table))
    assert len(outcomes) == 6, outcomes


# --- secrets on the fault path -----------------------------------------------------------------------------


@pytest.mark.slow
def test_planted_key_never_leaks_on_the_fault_path(tmp_path: Path) -> None:
    """Error bodies that quote the key, exhausted retries, a 401, DEBUG logging: the key is nowhere.

    Both runs start fresh interpreters (litellm reads LITELLM_LOG at import) and log every request at DEBUG,
    so the study is small: 16 calls, one in four dead, and at most half of all attempts faulted still take
    every path (echoed key in 429 and 5xx bodies, exhausted retries, a Retry-After, the provider-error list)."""
    data = write_dataset(tmp_path / "data.jsonl", 1)  # 8 prompts
    env = {"QWEN_API_KEY": PLANTED, "LITELLM_LOG": "DEBUG"}
    server = FaultServer(
        seed=2,
        echo_key=True,
        dead_rate=0.25,
        faults={"429": 0.2, "500": 0.2, "429_retry_after": 0.1},
        answers={},
    )
    with server.running():
        args = study_args(
            server,
            data,
            tmp_path / "run",
            "judge.api_key_env=QWEN_API_KEY",
            "n_samples=2",
            "workers=2",
            "hydra.job_logging.root.level=DEBUG",
            "min_parse_rate=0",
        )
        first = run(args, tmp_path, env)
        assert first.returncode == 0, first.stderr[-3000:]
        manifest = manifest_of(tmp_path / "run")
        assert manifest["provider_errors"] > 0 and manifest["retries"] > 0
        assert any("REDACTED" in e for e in manifest["first_provider_errors"])
    denied = FaultServer(echo_key=True, auth_fails=True)
    with denied.running():
        second = run(
            study_args(
                denied,
                data,
                tmp_path / "denied",
                "judge.api_key_env=QWEN_API_KEY",
                "hydra.job_logging.root.level=DEBUG",
            ),
            tmp_path,
            {**env, "JUDGESCOPE_CACHE_DIR": str(tmp_path / "cache2")},
        )
        assert second.returncode == 2 and "AuthenticationError" in second.stderr.strip().splitlines()[-1]
        # fatal: no call is retried, and no new call starts after the first 401 (at most the ones in flight)
        assert 1 <= denied.requests <= 8 and all(s.attempt == 0 for s in denied.log)
    # the key reached the server (so it was really used) ...
    assert server.authorizations == denied.authorizations == {f"Bearer {PLANTED}"}
    # ... and is in no file and no output line
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PLANTED.encode() not in path.read_bytes(), path
    for out in (first, second):
        assert PLANTED not in out.stdout + out.stderr
    assert "DEBUG" in first.stdout + first.stderr  # the debug logs really were on


# --- classification ------------------------------------------------------------------------------------------


STATUSES = {
    400: False,
    401: False,
    403: False,
    404: False,
    408: True,
    409: True,
    413: False,
    422: False,
    425: True,
    429: True,
    500: True,
    501: False,
    502: True,
    503: True,
    504: True,
    520: True,
    529: True,
}


def test_status_classification_through_litellm() -> None:
    """The exception litellm raises for each HTTP status (through its real HTTP path) is classified right."""
    import asyncio

    async def classify(api_base: str, status: int) -> tuple[int, str, bool]:
        try:
            await litellm.acompletion(
                model=f"openai/status-{status}",
                messages=[{"role": "user", "content": "x"}],
                api_base=api_base,
                api_key="sk-test",
                timeout=10,
                num_retries=0,
                max_retries=0,
            )
        except Exception as exc:  # noqa: BLE001
            return status, type(exc).__name__, is_transient(exc)
        return status, "no exception", False

    async def all_statuses(api_base: str) -> list[tuple[int, str, bool]]:
        return list(await asyncio.gather(*(classify(api_base, status) for status in STATUSES)))

    # the scripted server answers a request for model `status-<code>` with that HTTP status and an error body
    server = ScriptedServer(lambda body: Step(status=int(str(body["model"]).rsplit("-", 1)[1])))
    with server.running():
        got = asyncio.run(all_statuses(server.api_base))
    assert {status: transient for status, _, transient in got} == STATUSES, got


# --- the lean litellm path and the worker plan -------------------------------------------------------------


def test_lean_hooks_skip_only_judge_calls_without_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    from judge import completer, speedups

    for name in ("success_callback", "_async_success_callback", "callbacks", "input_callback"):
        monkeypatch.setattr(litellm, name, [])  # a litellm Router made earlier in this process leaves its own
    assert speedups.install_lean_litellm() is True
    assert getattr(litellm.utils.update_response_metadata, "judgescope_lean", False)
    assert getattr(litellm.utils.dispatch_success_logging, "judgescope_lean", False)
    seen: list[str] = []
    hook = speedups._lean_wrapper(lambda *a, **k: seen.append("ran"))
    hook(result=None)  # not a judge call: litellm's own behaviour
    token = speedups.LEAN_CALL.set(True)
    try:
        hook(result=None)  # a judge call: skipped
        monkeypatch.setattr(litellm, "success_callback", ["langfuse"])
        hook(result=None)  # the user wants callbacks: they get cost and logs
    finally:
        speedups.LEAN_CALL.reset(token)
    assert seen == ["ran", "ran"]
    monkeypatch.setenv("JUDGESCOPE_LEAN_LITELLM", "0")
    assert completer.LiteLLMCompleter("openai/x").lean is False


def test_worker_plan() -> None:
    from experiments.study import MAX_AUTO_WORKERS, plan_workers
    from judge.client import Judge
    from tests.support.fakes import FakeCompleter

    judge = Judge(FakeCompleter(lambda m, p: "{}", model="openai/x"), cache=None, concurrency=16)  # type: ignore[arg-type]
    cores = len(os.sched_getaffinity(0))
    base = config([])  # composed once (~0.3 CPU-s a composition): the plans differ only in `workers`

    def workers(n: int | None) -> Any:
        return typed({**base, "workers": n})

    assert plan_workers(workers(1), judge, 10_000) == 1
    assert plan_workers(workers(3), judge, 10_000) == 3
    assert plan_workers(workers(3), judge, 2) == 2
    assert plan_workers(workers(None), judge, 150) == 1  # too few calls to be worth a fork
    assert plan_workers(workers(None), judge, 10_000) == min(2 * cores, MAX_AUTO_WORKERS, 8)
    judge.concurrency = 2
    assert plan_workers(workers(None), judge, 10_000) == 1
    from judge.local.provider import LOCAL_MODEL, register

    register()
    local = Judge(FakeCompleter(lambda m, p: "{}", model=LOCAL_MODEL), cache=None, concurrency=16)  # type: ignore[arg-type]
    assert plan_workers(workers(None), local, 10_000) == 1  # an in-process model is never forked
