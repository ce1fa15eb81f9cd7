"""Cache keys and cache entries: the key ignores credentials, and one validated entry schema on disk, in Redis
and in bundles; issue 25, items 3, 6, 7 and 17, against the scripted chat server
(tests/support/openai_server.py) and a real or fake Redis (the batch journal's items are in
test_batch_journal.py).

Each test fails on the code before the fix: a rotated key that makes every answer a miss, cache entries of the
wrong type accepted, an import that overwrote the user's answers, and tracebacks from `judge.cache.store export`."""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.study import run_study
from judge.cache.bundle import FORMAT, BundleError, _entry_line, import_bundle, main
from judge.cache.store import CallCache, _checksum, cache_key
from judge.types import Completion
from tests.support.fakes import FakeTextStore
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.redis_server import redis_server
from tests.support.studies import config
from tests.support.studies import typed as typed_study

MODEL = "openai/judge"
PROMPT = 'Rate.\nAnswer with only this JSON object\n{"score": <integer 1-5>}'


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


# 3. the cache key ignores credentials and a trailing slash -------------------------------------------------


def documented_key(api_base: str | None, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
    """The key as its documented format defines it (judge.cache.store.cache_key), computed here independently."""
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

    from judge.cache.backends import open_cache

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


# --- hostile cache entries (issue 25): one verdict on disk, in a store and in a bundle ---


def hostile_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**60), 2**60),
        st.floats(allow_nan=True),
        st.text(max_size=5),
        st.lists(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    )


ENTRY_FIELDS = (
    "text",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "logprobs",
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    spoiled=st.dictionaries(st.sampled_from(ENTRY_FIELDS), hostile_values(), max_size=3),
    dropped=st.lists(st.sampled_from(ENTRY_FIELDS), max_size=1),
    checksum=st.booleans(),
)
def test_hostile_cache_entries_one_verdict_everywhere(
    spoiled: dict[str, Any], dropped: list[str], checksum: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One schema: a stored entry is valid in a folder, in a store (Redis) and in an export alike, or refused
    alike - a miss with a count (folder, store) or one line naming the entry (import) - never a traceback, and
    a Completion read back always has text, counts >= 0 and a cost >= 0."""
    entry = {
        "text": "3",
        "finish_reason": "stop",
        "prompt_tokens": 12,
        "completion_tokens": 7,
        "cost_usd": 0.001,
        "latency_s": 0.5,
        **spoiled,
    }
    for name in dropped:
        entry.pop(name, None)
    key = "a" * 64
    payload = json.dumps(entry, separators=(",", ":"))
    value = f"{_checksum(key, payload)}\n{payload}"
    tmp = tmp_path_factory.mktemp("hostile-entry")
    raw = diskcache.Cache(str(tmp / "disk"))
    raw.set(key, value if checksum else payload)
    raw.close()
    verdicts = []
    for cache in (CallCache(tmp / "disk"), CallCache(store=FakeTextStore({key: value}))):
        got = cache.get(key)
        verdicts.append(got is not None)
        assert cache.damaged == (got is None)
        if got is not None:
            assert isinstance(got.text, str) and isinstance(got.finish_reason, str | None)
            assert type(got.prompt_tokens) is int and got.prompt_tokens >= 0 and got.completion_tokens >= 0
            assert got.cost_usd is None or (math.isfinite(got.cost_usd) and got.cost_usd >= 0)
            assert math.isfinite(got.latency_s) and got.latency_s >= 0
        cache.close()
    line = (
        json.dumps({"key": key, "checksum": _checksum(key, payload), "completion": payload}).encode() + b"\n"
    )
    manifest = {"format": FORMAT, "entries": 1, "entries_sha256": hashlib.sha256(line).hexdigest()}
    bundle = tmp / "entry.zip"
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("entries.jsonl", line)
        zf.writestr("manifest.json", json.dumps(manifest))
    target = CallCache(tmp / "imported")
    try:
        import_bundle(bundle, target)
        verdicts.append(True)
    except BundleError as exc:
        assert "\n" not in str(exc) and "entries.jsonl:1: bad entry" in str(exc)
        verdicts.append(False)
    assert len(target) == int(verdicts[-1])
    target.close()
    # the store and the export agree; the folder too, unless the value lacked its checksum line (a folder
    # written before checksums existed holds bare JSON, which stays readable there)
    assert verdicts[1] == verdicts[2] and (not checksum or verdicts[0] == verdicts[1]), (entry, verdicts)
