"""Issue 25, items 1-7 and 17: the batch, journal and cache surfaces against the local batch server
(tests/batch_server.py), the scripted chat server (tests/openai_server.py) and a real or fake Redis.

Each test fails on the code before the fix: a key in the error column and in the journal, a rotated key that
makes every answer a miss, a damaged journal that resubmits a running batch, a repeated custom_id counted
twice, cache entries of the wrong type accepted, an import that overwrote the user's answers, and tracebacks
from `judge.cache export`."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pandas as pd
import pytest

from experiments.study import run_study
from judge.batch import BatchClient, BatchError, BatchRequest
from judge.batch_journal import BatchJournal
from judge.batch_run import BatchRunner
from judge.cache import CallCache, _checksum, cache_key
from judge.cache_bundle import FORMAT, BundleError, _entry_line, import_bundle, main
from judge.completer import Completion
from judge.pricing import Prices
from tests.batch_server import BatchServer
from tests.fakes import FakeTextStore
from tests.openai_server import ScriptedServer, Step, rubric_answer
from tests.redis_server import redis_server
from tests.studies import config
from tests.studies import typed as typed_study

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


def live_study(api_base: str, tmp: Path) -> dict[str, Any]:
    """One instance, one sample, live against `api_base`, cached under `tmp/cache`."""
    return config(
        [
            "judge=qwen",
            f"judge.api_base={api_base}",
            "limit=1",
            "n_samples=1",
            "progress=false",
            f"cache_dir={tmp / 'cache'}",
        ]
    )


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
            typed_study(batch_study(server, tmp_path, "batch_settings.rounds=1")), None, tmp_path / "run", run_id="run"
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


# 3. the cache key ignores credentials and a trailing slash -------------------------------------------------


def documented_key(api_base: str | None, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The key as its documented format defines it (judge.cache.cache_key), computed here independently."""
    payload = {
        "api_base": api_base,
        "messages": messages,
        "model": MODEL,
        "params": params,
        "rubric_version": "v1",
        "sample_idx": 0,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_cache_key_is_that_of_the_plain_endpoint() -> None:
    messages, params = [{"role": "user", "content": PROMPT}], {"temperature": 0.0, "seed": 0}
    plain = "http://127.0.0.1:8000/v1"

    def key(api_base: str | None) -> str:
        return cache_key(MODEL, messages, params, 0, "v1", api_base)

    # a plain api_base, or none, keys exactly as before: existing caches keep working
    assert key(plain) == documented_key(plain, messages, params)
    assert key(None) == documented_key(None, messages, params)
    assert key("https://api.example.com/v1?api-version=2024-10-21") == documented_key(
        "https://api.example.com/v1?api-version=2024-10-21", messages, params
    )
    # credentials and a trailing slash do not enter it: a rotated key finds the same answers
    for typed in (
        f"{plain}/",
        f"{plain}?api_key=first-key-1111",
        f"{plain}?api_key=rotated-key-2222",
        "http://u:first-key-1111@127.0.0.1:8000/v1",
        "http://first-key-1111@127.0.0.1:8000/v1/",
        f"{plain}/?key=first-key-1111&token=abcdefgh1234",
    ):
        assert key(typed) == key(plain), typed
    assert key(f"{plain}?api-version=1") != key(plain)  # a parameter that is no credential still counts


def test_rotating_a_key_in_the_api_base_reruns_from_the_cache(tmp_path: Path) -> None:
    """Before: after rotating `?api_key=`, the rerun made every call again and took 0 from the cache."""
    server = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    made = []
    with server.running():
        for i, typed in enumerate(
            [
                f"{server.api_base}?api_key=first-key-1111",
                f"{server.api_base}?api_key=rotated-key-2222",
                f"{server.api_base}/",
            ]
        ):
            cfg = live_study(server.api_base, tmp_path)
            cfg["judge"]["api_base"] = typed
            run_study(typed_study(cfg), None, tmp_path / f"run{i}", run_id=f"run{i}")
            made.append(json.loads((tmp_path / f"run{i}" / "manifest.json").read_text())["calls_made"])
    assert made == [11, 0, 0] and len(server.requests) == 11


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


# 6. one validated cache-entry schema: disk, Redis, bundles --------------------------------------------------

GOOD = {
    "text": '{"score": 3}',
    "finish_reason": "stop",
    "prompt_tokens": 12,
    "completion_tokens": 7,
    "cost_usd": 0.001,
    "latency_s": 0.5,
}
BAD = {
    "text_5": {"text": 5},
    "prompt_tokens_abc": {"prompt_tokens": "abc"},
    "finish_reason_list": {"finish_reason": ["stop"]},
    "cost_negative": {"cost_usd": -1000.0},
    "completion_tokens_negative": {"completion_tokens": -5},
    "tokens_bool": {"prompt_tokens": True},
    "latency_nan": {"latency_s": float("nan")},
    "logprobs_text": {"logprobs": "abc"},
}


def stored(key: str, entry: dict[str, Any], *, checksum: bool = True) -> str:
    """A value as the cache stores it: `<checksum>\\n<completion JSON>` (a correct checksum over bad content)."""
    payload = json.dumps(entry, separators=(",", ":"))
    return f"{_checksum(key, payload)}\n{payload}" if checksum else payload


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_disk_entry_is_a_miss_with_one_note(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "a" * 64
    raw = diskcache.Cache(str(tmp_path / "cache"))
    raw.set(key, stored(key, {**GOOD, **BAD[bad]}))
    raw.set("b" * 64, stored("b" * 64, {**GOOD, **BAD[bad]}))
    raw.close()
    cache = CallCache(tmp_path / "cache")
    assert cache.get(key) is None and cache.get("b" * 64) is None and cache.damaged == 2
    assert key not in cache  # dropped: asked for again
    note = capsys.readouterr().err.strip()
    assert note.startswith(f"note: {tmp_path / 'cache'}: cache entry aaaaaaaaaaaaaaaa... is invalid (")
    assert "\n" not in note  # one line for the whole cache


def test_a_store_value_without_its_checksum_line_is_rejected() -> None:
    """A Redis value is always written with its checksum; one without it (bare JSON) was accepted before."""
    key = "c" * 64
    store = FakeTextStore({key: stored(key, GOOD, checksum=False), "d" * 64: stored("d" * 64, GOOD)})
    cache = CallCache(store=store)
    assert cache.get("d" * 64) == Completion(**GOOD)
    assert cache.get(key) is None and cache.damaged == 1 and key not in store


def test_a_real_redis_value_without_checksum_or_with_bad_types_is_a_miss(tmp_path: Path) -> None:
    import redis

    from judge.stores import open_cache

    with redis_server(tmp_path / "redis") as srv:
        raw = redis.Redis.from_url(srv.url, decode_responses=True)
        raw.set("e" * 64, stored("e" * 64, GOOD, checksum=False))
        raw.set("f" * 64, stored("f" * 64, {**GOOD, "text": 5}))
        raw.set("0" * 64, stored("0" * 64, GOOD))
        cache = open_cache("redis", srv.url)
        assert cache.get("0" * 64) == Completion(**GOOD)
        assert cache.get("e" * 64) is None and cache.get("f" * 64) is None and cache.damaged == 2
        cache.close()


def test_a_negative_cost_entry_never_reaches_the_results(tmp_path: Path) -> None:
    """Before: a stored `cost_usd: -1000` was read as an answer and entered results and manifest totals."""
    server = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with server.running():
        cfg = live_study(server.api_base, tmp_path)
        run_study(typed_study(cfg), None, tmp_path / "first", run_id="first")
        key = (tmp_path / "first" / "cache_keys.txt").read_text().split()[0]
        raw = diskcache.Cache(str(tmp_path / "cache"))
        raw.set(key, stored(key, {**GOOD, "cost_usd": -1000.0}))
        raw.close()
        frame = run_study(typed_study(cfg), None, tmp_path / "second", run_id="second")
    manifest = json.loads((tmp_path / "second" / "manifest.json").read_text())
    assert (
        manifest["calls_made"] == 1 and manifest["cache_damaged_entries"] == 1 and len(server.requests) == 12
    )
    assert (frame["cost_usd"].dropna() >= 0).all() and (manifest["cost_usd"] or 0) >= 0


def write_bundle(path: Path, entries: list[bytes]) -> Path:
    """An export file around these entries.jsonl lines, with a matching manifest (hash and count)."""
    data = b"".join(entries)
    manifest = {
        "format": FORMAT,
        "entries": len(entries),
        "entries_sha256": hashlib.sha256(data).hexdigest(),
        "unanswered_calls": 0,
        "models": {},
        "rubric_versions": {},
        "runs": [],
    }
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("entries.jsonl", data)
        zf.writestr("manifest.json", json.dumps(manifest))
    return path


def bundle_line(key: str, entry: dict[str, Any]) -> bytes:
    payload = json.dumps(entry, separators=(",", ":"))
    return (
        json.dumps({"key": key, "checksum": _checksum(key, payload), "completion": payload}).encode() + b"\n"
    )


@pytest.mark.parametrize("bad", sorted(BAD))
def test_import_refuses_an_entry_of_the_wrong_type(bad: str, tmp_path: Path) -> None:
    lines = [bundle_line("1" * 64, GOOD), bundle_line("2" * 64, {**GOOD, **BAD[bad]})]
    bundle = write_bundle(tmp_path / "bad.zip", lines)
    cache = CallCache(tmp_path / "cache")
    with pytest.raises(BundleError, match=r"bad\.zip: entries\.jsonl:2: bad entry \(") as err:
        import_bundle(bundle, cache)
    assert "\n" not in str(err.value) and len(cache) == 0  # nothing written
    cache.close()


# 7. import never overwrites the user's answers silently -----------------------------------------------------


def test_import_refuses_conflicts_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "1 entries imported (10 already there)" - the user's different answers were replaced."""
    theirs = {f"{i:064x}": Completion(f'{{"score": {i % 4}}}', "stop", 12, 7, 0.001, 0.5) for i in range(11)}
    bundle = write_bundle(tmp_path / "theirs.zip", [_entry_line(k, c) for k, c in theirs.items()])
    cache = CallCache(tmp_path / "cache")
    mine = {k: Completion('{"score": 0}', "stop", 12, 7, 0.001, 0.5) for k in list(theirs)[:3]}
    for key, completion in mine.items():
        cache.set(key, completion)
    cache.close()
    differ = [k for k in mine if mine[k] != theirs[k]]
    assert len(differ) == 2  # one of the three is the same answer

    args = ["import", str(bundle), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bundle}: 2 entries differ from the answers") and "\n" not in err
    assert all(k in err for k in differ) and "--overwrite" in err
    cache = CallCache(tmp_path / "cache")
    assert len(cache) == 3 and all(cache.get(k) == c for k, c in mine.items())  # nothing written
    cache.close()

    assert main([*args, "--overwrite"]) == 0
    assert (
        capsys.readouterr().err.strip() == f"10 entries imported (1 already there) into {tmp_path / 'cache'}"
    )
    cache = CallCache(tmp_path / "cache")
    assert all(cache.get(k) == c for k, c in theirs.items())
    cache.close()


# 17. export problems are one line ---------------------------------------------------------------------------


@pytest.fixture()
def run_folder(tmp_path: Path) -> Iterator[Path]:
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"model": MODEL, "provider_errors": 0}))
    (run / "cache_keys.txt").write_text("a" * 64 + "\n")
    cache = CallCache(tmp_path / "cache")
    cache.set("a" * 64, Completion(**GOOD))
    cache.close()
    yield run


@pytest.mark.parametrize("problem", ["target_is_a_folder", "target_unwritable", "keys_file_is_a_folder"])
def test_export_problems_are_one_line(
    problem: str, run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.zip"
    if problem == "target_is_a_folder":
        target = tmp_path / "existing"
        target.mkdir()
    elif problem == "target_unwritable":
        (tmp_path / "a-file").write_text("not a folder")
        target = tmp_path / "a-file" / "out.zip"
    else:
        (run_folder / "cache_keys.txt").unlink()
        (run_folder / "cache_keys.txt").mkdir()
    assert main(["export", str(run_folder), str(target), "--cache-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    named = run_folder / "cache_keys.txt" if problem == "keys_file_is_a_folder" else target
    assert str(named) in err
    assert main(
        ["export", str(run_folder), str(tmp_path / "fine.zip"), "--cache-dir", str(tmp_path / "cache")]
    ) == (2 if problem == "keys_file_is_a_folder" else 0)
