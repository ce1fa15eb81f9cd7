"""The batch path and its journal against the local batch server (tests/support/batch_server.py); issue 25,
items 1, 2, 4 and 5 (the cache's items are in test_cache_entries.py).

Each test fails on the code before the fix: a key in the error column and in the journal, a damaged journal
that resubmits a running batch, a repeated custom_id counted twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.study import run_study
from judge.batch.journal import BatchJournal
from judge.batch.provider import BatchClient, BatchError, BatchRequest
from judge.batch.run import BatchRunner
from judge.cache.store import CallCache
from judge.spend.pricing import Prices
from tests.support.batch_server import BatchServer
from tests.support.studies import config, typed

KEY = "sk-batch-cache-hardening-0123456789"
MODEL = "openai/judge"
PROMPT = 'Rate.\nAnswer with only this JSON object\n{"score": <integer 1-5>}'
BATCH_PRICES = Prices(input_cost_per_token_batches=1e-6, output_cost_per_token_batches=2e-6)
PER_REQUEST = 12 * 1e-6 + 7 * 2e-6  # the batch server's usage: 12 prompt and 7 completion tokens


def requests(n: int) -> list[BatchRequest]:
    return [BatchRequest(f"{i:064x}", [{"role": "user", "content": PROMPT}], {"seed": i}) for i in range(n)]


def client(server: BatchServer) -> BatchClient:
    return BatchClient(MODEL, server.api_base, "no-key", lambda params, _: dict(params))


def runner(server: BatchServer, tmp: Path, api_base: str | None = None) -> tuple[BatchRunner, CallCache]:
    cache = CallCache(tmp / "cache")
    run = BatchRunner(
        client(server),
        cache,
        BatchJournal(tmp / "cache"),
        BATCH_PRICES,
        model=MODEL,
        api_base=api_base or server.api_base,
        poll_s=0.01,
    )
    return run, cache


def batch_study(server: BatchServer, tmp: Path, *more: str) -> dict[str, Any]:
    return config(
        [
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "judge.api_key_env=QWEN_API_KEY",
            "limit=1",
            "n_samples=2",
            "progress=false",
            "batch=true",
            "batch_settings.poll_s=0.02",
            "min_parse_rate=0",
            f"cache_dir={tmp / 'cache'}",
            *more,
        ]
    )


def files_holding(root: Path, secret: str) -> list[Path]:
    """Every file below `root` (results, configs, logs, the cache's database, the batch journal) holding it."""
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# 1. batch errors are redacted ------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["error_file", "non_200_line"])
def test_batch_errors_quoting_the_key_are_redacted(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider's error quotes the Authorization header (Bearer <key>) for the odd-seeded requests:
    before, `Bearer sk-...` was written to the error column of results.parquet and results.csv."""
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    server = BatchServer(
        polls=0,
        echo_auth=True,
        fail=lambda body: body.get("seed", 0) % 2 == 1,
        fail_status=401 if where == "non_200_line" else 0,
    )
    with server.running():
        frame = run_study(
            typed(batch_study(server, tmp_path, "batch_settings.rounds=1")),
            None,
            tmp_path / "run",
            run_id="run",
        )
    unscored = frame[~frame["parse_ok"]]
    assert len(unscored) > 0 and unscored["error"].str.contains("REDACTED").all(), unscored["error"].tolist()
    assert not unscored["error"].str.contains(KEY[:12]).any()
    csv = pd.read_csv(tmp_path / "run" / "results.csv")
    assert csv["error"].dropna().str.contains("REDACTED").sum() == len(unscored)
    assert files_holding(tmp_path, KEY) == []


# 2. the journal records the endpoint without credentials ---------------------------------------------------


@pytest.mark.parametrize("form", ["query", "user_info"])
def test_journal_records_the_endpoint_without_credentials(form: str, tmp_path: Path) -> None:
    server = BatchServer(polls=0)
    with server.running():
        host = server.api_base.split("://", 1)[1]
        typed = f"{server.api_base}?key={KEY}" if form == "query" else f"http://user:{KEY}@{host}"
        run, cache = runner(server, tmp_path, typed)
        results = run.run(requests(2))
        cache.close()
    assert all(r.completion is not None for r in results.values())
    records = list((tmp_path / "cache" / "batches").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["api_base"] == server.api_base
    assert files_holding(tmp_path, KEY) == []


# 4. a damaged journal is never skipped ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage", ["truncated", "wrong_type", "extra_field", "slash_in_journal", "slash_typed"]
)
def test_a_damaged_journal_never_resubmits_a_running_batch(damage: str, tmp_path: Path) -> None:
    """A run submitted a batch and was killed while it ran; its journal record is then damaged. Before, the
    record was skipped and the rerun submitted the same requests in a second batch (paid twice)."""
    server = BatchServer(polls=10_000)
    todo = requests(3)
    with server.running():
        first, cache = runner(server, tmp_path)
        first._enqueue(todo, 1, {})
        first._fill([])  # the batch is running at the provider when the run dies
        cache.close()
        [record] = (tmp_path / "cache" / "batches").glob("*.json")
        text = record.read_text()
        data = json.loads(text)
        if damage == "truncated":
            record.write_text(text[: len(text) // 2])
        elif damage == "wrong_type":
            record.write_text(json.dumps({**data, "keys": "not a list"}))
        elif damage == "extra_field":
            record.write_text(json.dumps({**data, "written_by": "a later version"}))
        elif damage == "slash_in_journal":
            record.write_text(json.dumps({**data, "api_base": server.api_base + "/"}))
        server.polls = 0
        rerun, cache = runner(server, tmp_path, server.api_base + "/" if damage == "slash_typed" else None)
        if damage in ("truncated", "wrong_type"):
            with pytest.raises(BatchError) as err:
                rerun.run(todo)
            assert str(err.value).startswith(f"{record}: batch journal record ") and "\n" not in str(
                err.value
            )
        else:  # recovered: the running batch is polled and collected
            results = rerun.run(todo)
            assert rerun.stats.resumed == 1 and all(r.completion is not None for r in results.values())
        cache.close()
    assert server.created == 1 and server.uploads == 1


# 5. each request is counted once ----------------------------------------------------------------------------


def test_repeated_and_unknown_custom_ids_count_once(tmp_path: Path) -> None:
    """Before: every output line doubled and one unknown custom_id gave answered 11 for 5 requests, twice the
    cost, and 6 cache entries for 5 calls."""
    unknown = "f" * 64

    def mangle(lines: list[Any]) -> list[Any]:
        return [*lines, *lines, {**lines[0], "custom_id": unknown}]

    server = BatchServer(polls=0, mangle=mangle)
    with server.running():
        run, cache = runner(server, tmp_path)
        results = run.run(requests(5))
        assert run.stats.answered == 5 and run.stats.ignored == 6 and run.stats.requests == 5
        assert run.stats.cost_usd == pytest.approx(5 * PER_REQUEST)
        assert len(cache) == 5 and unknown not in cache
        assert all(
            r.completion is not None and r.completion.cost_usd == pytest.approx(PER_REQUEST)
            for r in results.values()
        )
        cache.close()
