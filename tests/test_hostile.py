"""The hostile provider (issue 11): a local OpenAI-compatible server that answers each request with a random
draw of bad answers - huge and odd numbers, lone surrogates, empty choices, wrong types, duplicate and
missing labels, truncation, error bodies and answers that echo the key, 429/5xx/drops - and the invariants
that must hold whatever it does:
- no traceback (the run ends normally, or with one StudyError line);
- every row is scored with a valid value, or unscored with its raw text (or the provider's error);
- the manifest's counts equal what the server saw;
- no secret in any file or output;
- a rerun makes no call already paid for.
Plus the hostile config values: every one is a single line naming the setting. Derandomized, small."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import math
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.config import command_line_problem
from experiments.inputs import StudyError
from experiments.study import run_study
from judge.batch import BatchClient, BatchRequest
from judge.batch_journal import BatchJournal
from judge.batch_run import BatchRunner
from judge.cache import CallCache, _checksum
from judge.cache_bundle import FORMAT, BundleError, import_bundle
from judge.pricing import Prices
from tests.batch_server import BatchServer
from tests.fakes import FakeTextStore
from tests.fault_server import ANSWERS, HOSTILE, FaultServer
from tests.studies import cli_env, typed
from tests.test_hardening import KEY, study_cfg

FEW = settings(max_examples=6, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
TRANSIENT = ("429_retry_after", "429", "500", "503", "drop", "not_json", "empty_choices")
DRAWN = (*HOSTILE, "off_rubric", "truncated")
RANGES = {"originality": (0, 3), "gap_addressing": (0, 3), "non_obviousness": (0, 3)}


def rates(kinds: tuple[str, ...], total: float) -> st.SearchStrategy[dict[str, float]]:
    """Rates for a random subset of `kinds`, summing to at most `total`."""
    return st.lists(st.sampled_from(kinds), min_size=1, max_size=len(kinds), unique=True).map(
        lambda chosen: {k: total / len(chosen) for k in chosen}
    )


def run_once(tmp: Path, name: str, srv: FaultServer, mode: str, capfd: pytest.CaptureFixture[str],
             monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any] | None, str]:  # fmt: skip
    """One study against the hostile server: (its manifest, or None when it stopped with one line; output)."""
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    cfg = study_cfg(tmp, srv.api_base, f"mode={mode}", "n_samples=2", "retry.max_attempts=4",
                    "retry.initial_wait_s=0.001", "retry.max_wait_s=0.01", "judge.timeout_s=5")  # fmt: skip
    requests_before = srv.requests
    try:
        run_study(typed(cfg), None, tmp / name, run_id=name)
    except StudyError as exc:  # every call failed: still one line, and the rows are written
        assert "\n" not in str(exc)
    out, err = capfd.readouterr()
    manifest_path = tmp / name / "manifest.json"
    if not manifest_path.exists():
        return None, out + err
    manifest = json.loads(manifest_path.read_text())
    seen = manifest["calls_made"] + manifest["provider_errors"] + manifest["retries"]
    assert seen == srv.requests - requests_before, (manifest, srv.counts())
    return manifest, out + err


def check_rows(table: pd.DataFrame) -> None:
    """Scored with a valid value, or unscored with its raw text (or the provider's error)."""
    for row in table.itertuples():
        if row.parse_ok:
            low, high = RANGES[row.dimension]
            assert low <= row.score <= high and float(row.score).is_integer(), row
        else:
            assert pd.isna(row.score) and (row.raw or row.error), row


@FEW
@given(seed=st.integers(0, 2**16), mode=st.sampled_from(["independent", "comparative"]),
       faults=rates(TRANSIENT, 0.35), answers=rates(DRAWN, 0.6))  # fmt: skip
def test_a_hostile_provider_breaks_no_invariant(seed: int, mode: str, faults: dict[str, float],
                                                answers: dict[str, float], tmp_path_factory: pytest.TempPathFactory,
                                                capfd: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    tmp = tmp_path_factory.mktemp("hostile")
    srv = FaultServer(seed=seed, faults=faults, answers=answers, echo_key=True, max_faults=2, dead_rate=0.1)
    with srv.running():
        first, out1 = run_once(tmp, "first", srv, mode, capfd, monkeypatch)
        n_first = srv.requests
        second, out2 = run_once(tmp, "second", srv, mode, capfd, monkeypatch)
    assert first is not None and second is not None
    check_rows(pd.read_parquet(tmp / "first" / "results.parquet"))
    check_rows(pd.read_parquet(tmp / "second" / "results.parquet"))
    # paid for: a 200 with a completion (litellm rejects a non-string content as a malformed body: transient)
    paid = {s.call for s in srv.log[:n_first] if s.fault in (*ANSWERS, *HOSTILE) and s.fault != "wrong_type"}
    assert not paid & {s.call for s in srv.log[n_first:]}  # the rerun asks only for what failed
    assert second["calls_made"] + second["provider_errors"] <= first["provider_errors"]
    for text in (out1, out2):
        assert "Traceback" not in text and KEY not in text
    for path in tmp.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


HOSTILE_SETTINGS = ["limit=-1", "limit=0", "limit=two", "n_samples=-2", "n_samples=0", "n_samples=abc",
                    "temperature=hot", "temperature=-1", "temperature=nan", "judge.concurrency=0",
                    "judge.timeout_s=0", "max_tokens=0", "retry.max_attempts=0", "retry.initial_wait_s=-1",
                    "workers=0", "budget_usd=-5", "mode.k_per_source=0", "min_parse_rate=2"]  # fmt: skip


@pytest.mark.parametrize("setting", HOSTILE_SETTINGS)
def test_a_hostile_setting_is_one_line_naming_it(setting: str) -> None:
    problem = command_line_problem([setting], "config")
    name = setting.split("=")[0]
    assert problem is not None and "\n" not in problem and problem.startswith(name), problem


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(["limit", "n_samples", "temperature", "max_tokens", "seed", "judge.concurrency",
                        "judge.timeout_s", "retry.max_attempts", "workers", "budget_usd"]),
       st.one_of(st.integers(-10**20, 10**20), st.floats(allow_nan=True), st.text(max_size=6),
                 st.sampled_from(["null", "[]", "{}", "true", "1e999", "٣", "１"])))  # fmt: skip
def test_any_value_of_a_setting_is_valid_or_one_line(name: str, value: object) -> None:
    problem = command_line_problem([f"{name}={value}"], "config")
    assert problem is None or ("\n" not in problem and problem.strip()), problem


# --- issue 25: hostile batch outputs, hostile cache entries (disk, store, bundle), and a leak scan over every
# file a batch study writes (results, logs, the cache's database, the batch journal) ----------------------------

BATCH_KEY = "sk-hostile-batch-key-0123456789"
BATCH_PROMPT = 'Rate.\nAnswer with only this JSON object\n{"score": <integer 1-5>}'
MANGLES = (
    "repeat",
    "unknown",
    "not_json",
    "not_object",
    "custom_id_number",
    "no_response",
    "choices_text",
    "message_list",
    "content_number",
    "usage_text",
    "tokens_huge",
    "tokens_negative",
    "missing_usage",
    "non_200_echo",
    "logprobs_garbage",
    "finish_list",
)


def mangled(ops: list[tuple[str, int]]) -> Callable[[list[Any]], list[Any]]:
    """A batch server's output rewrite: each op appends a hostile line or spoils the body of line `i`."""

    def apply(lines: list[Any]) -> list[Any]:
        out = copy.deepcopy(lines)
        for op, i in ops:
            line = out[i % len(lines)]
            body = (
                line["response"]["body"]
                if isinstance(line, dict) and isinstance(line.get("response"), dict)
                else {}
            )
            choice = (
                (body.get("choices") or [{}])[0]
                if isinstance(body, dict) and isinstance(body.get("choices"), list)
                else {}
            )
            added = {
                "repeat": copy.deepcopy(line),
                "unknown": {**line, "custom_id": "f" * 64},
                "not_json": '{"custom_id": "cut',
                "not_object": "[1, 2]",
                "custom_id_number": {**line, "custom_id": 12345},
                "no_response": {"custom_id": line["custom_id"]},
                "non_200_echo": {
                    "custom_id": line["custom_id"],
                    "response": {
                        "status_code": 401,
                        "body": {"error": {"message": f"Incorrect API key provided: Bearer {BATCH_KEY}"}},
                    },
                },
            }
            if op in added:
                out.append(added[op])
            elif op == "choices_text":
                body["choices"] = "abc"
            elif op == "message_list" and isinstance(choice, dict):
                choice["message"] = ["x"]
            elif op == "content_number" and isinstance(choice.get("message"), dict):
                choice["message"]["content"] = 5
            elif op == "finish_list" and isinstance(choice, dict):
                choice["finish_reason"] = ["stop"]
            elif op == "logprobs_garbage" and isinstance(choice, dict):
                choice["logprobs"] = {"content": [{"token": 5, "logprob": "x"}]}
            elif op in ("usage_text", "tokens_huge", "tokens_negative", "missing_usage") and isinstance(
                body, dict
            ):
                body["usage"] = {
                    "usage_text": {"prompt_tokens": "abc", "completion_tokens": [1]},
                    "tokens_huge": {"prompt_tokens": 10**30, "completion_tokens": 1e300},
                    "tokens_negative": {"prompt_tokens": -5, "completion_tokens": -1000},
                    "missing_usage": None,
                }[op]
        return out

    return apply


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    ops=st.lists(st.tuples(st.sampled_from(MANGLES), st.integers(0, 4)), min_size=1, max_size=6),
    echo=st.booleans(),
    fail_status=st.sampled_from([0, 401]),
)
def test_hostile_batch_outputs_break_no_invariant(
    ops: list[tuple[str, int]],
    echo: bool,
    fail_status: int,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the output and error files hold: every request counted once (answered = results with an answer
    = cache entries), the cost is that of those answers, only asked-for keys are cached, every cached entry is
    valid, and the key is in no error and no file."""
    monkeypatch.setenv("HOSTILE_BATCH_API_KEY", BATCH_KEY)
    tmp = tmp_path_factory.mktemp("hostile-batch")
    server = BatchServer(
        polls=0,
        echo_auth=echo,
        fail_status=fail_status,
        mangle=mangled(ops),
        fail=lambda body: body.get("seed", 0) == 1,
    )
    todo = [
        BatchRequest(f"{i:064x}", [{"role": "user", "content": BATCH_PROMPT}], {"seed": i}) for i in range(5)
    ]
    prices = Prices(input_cost_per_token_batches=1e-6, output_cost_per_token_batches=2e-6)
    with server.running():
        client = BatchClient("openai/judge", server.api_base, BATCH_KEY, lambda params, _: dict(params))
        cache = CallCache(tmp / "cache")
        run = BatchRunner(
            client,
            cache,
            BatchJournal(tmp / "cache"),
            prices,
            model="openai/judge",
            api_base=server.api_base,
            poll_s=0.01,
            rounds=2,
        )
        results = run.run(todo)
    answers = {k: r.completion for k, r in results.items() if r.completion is not None}
    assert set(results) == {r.key for r in todo}
    assert run.stats.answered == len(answers) == len(cache) and set(answers) <= {r.key for r in todo}
    assert run.stats.cost_usd == pytest.approx(sum(c.cost_usd or 0 for c in answers.values()))
    for key, completion in answers.items():
        assert (
            cache.get(key) == completion
            and completion.prompt_tokens >= 0
            and completion.completion_tokens >= 0
        )
    assert cache.damaged == 0 and "f" * 64 not in cache
    cache.close()
    for result in results.values():
        assert result.completion is not None or (result.error and BATCH_KEY not in result.error)
    assert not [p for p in tmp.rglob("*") if p.is_file() and BATCH_KEY.encode() in p.read_bytes()]


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


SECRET_FORMS = ("env", "url_user_info", "url_query")


@pytest.mark.parametrize("form", SECRET_FORMS)
@settings(
    max_examples=2,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fail_status=st.sampled_from([0, 401]),
    ops=st.lists(
        st.tuples(st.sampled_from(("repeat", "unknown", "non_200_echo")), st.integers(0, 9)), max_size=3
    ),
)
def test_no_file_a_batch_study_writes_holds_the_key(
    form: str,
    fail_status: int,
    ops: list[tuple[str, int]],
    tmp_path_factory: pytest.TempPathFactory,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key given in the environment, in the api_base's user-info or its query, and echoed by the provider
    (the batch error file, non-200 output lines, the Authorization header): in no file below the study -
    results, config, logs, manifest, the cache's database, the batch journal - and in no output."""
    from judge.secrets import _LEARNT

    monkeypatch.setattr("judge.secrets._LEARNT", set(_LEARNT))  # what this study learns stays in it
    monkeypatch.setenv("QWEN_API_KEY", BATCH_KEY if form == "env" else "sk-other-env-key-000000")
    tmp = tmp_path_factory.mktemp("leak")
    server = BatchServer(
        polls=0,
        echo_auth=True,
        fail_status=fail_status,
        mangle=mangled(ops),
        fail=lambda body: body.get("seed", 0) % 2 == 1,
    )
    with server.running():
        host = server.api_base.split("://", 1)[1]
        api_base = {
            "env": server.api_base,
            "url_user_info": f"http://user:{BATCH_KEY}@{host}",
            "url_query": f"{server.api_base}?api_key={BATCH_KEY}",
        }[form]
        cfg = study_cfg(
            tmp,
            server.api_base,
            "n_samples=2",
            "batch=true",
            "batch_settings.poll_s=0.02",
            "batch_settings.rounds=1",
        )
        cfg["judge"]["api_base"] = api_base
        try:
            run_study(typed(cfg), None, tmp / "run", run_id="run")
        except StudyError as exc:  # e.g. the query form: the provider's file API does not take it
            assert "\n" not in str(exc)
    out, err = capfd.readouterr()
    # the key as typed, and as the Authorization header an HTTP client builds from user-info (Basic base64)
    forms = [BATCH_KEY, base64.b64encode(f"user:{BATCH_KEY}".encode()).decode()]
    assert not [f for f in forms if f in out + err] and "Traceback" not in out + err
    assert list((tmp / "cache" / "batches").glob("*.json"))  # the journal was written, and is scanned
    leaked = [p for p in tmp.rglob("*") for f in forms if p.is_file() and f.encode() in p.read_bytes()]
    assert leaked == [], leaked


@pytest.mark.slow  # a subprocess: the command line end to end
def test_a_key_on_the_command_line_is_in_no_file_of_a_batch_study(tmp_path: Path) -> None:
    """The key typed on the command line inside the api_base (`user:KEY@`), echoed back by the provider in its
    error file and non-200 lines: in no file below the folder (Hydra's overrides, config, results, the cache's
    database, the batch journal) and in no output."""
    server = BatchServer(polls=0, echo_auth=True, fail=lambda body: body.get("seed", 0) % 2 == 1)
    with server.running():
        host = server.api_base.split("://", 1)[1]
        args = [
            "judge=qwen",
            f"judge.api_base=http://user:{BATCH_KEY}@{host}",
            "limit=1",
            "n_samples=2",
            "batch=true",
            "batch_settings.poll_s=0.02",
            "batch_settings.rounds=1",
            "min_parse_rate=0",
            "progress=false",
            "hydra.run.dir=run",
        ]
        out = subprocess.run(
            [sys.executable, "-m", "experiments.run", *args],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert out.returncode == 0 and server.created == 1, out.stderr[-2000:]
    forms = [BATCH_KEY, base64.b64encode(f"user:{BATCH_KEY}".encode()).decode()]
    assert not [f for f in forms if f in out.stdout + out.stderr] and "Traceback" not in out.stderr
    assert list((tmp_path / "cache" / "batches").glob("*.json"))
    leaked = [p for p in tmp_path.rglob("*") for f in forms if p.is_file() and f.encode() in p.read_bytes()]
    assert leaked == [], leaked


# --- issue 25: hostile ledgers, Label Studio exports, viewer query strings and pool settings ----------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
AMOUNT = st.one_of(
    st.floats(allow_nan=True), st.integers(-(10**6), 10**6), st.booleans(), st.none(), st.text(max_size=4)
)
LEDGER_LINE = st.fixed_dictionaries(
    {"spent_usd": AMOUNT, "reserved_usd": AMOUNT}, optional={"pid": JSON, "host": JSON}
)
LEDGERS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"jobs": st.dictionaries(st.text(max_size=6), LEDGER_LINE | JSON, max_size=3)},
        optional={"stopped_at_usd": AMOUNT},
    ),
)


def one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text and "Traceback" not in text


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(content=LEDGERS)
def test_a_hostile_ledger_is_sound_or_refused_in_one_line(
    content: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A sweep's spend.json, whatever it holds: read with every amount a finite, non-negative number (so no
    job's spend can hand budget to another), or refused in one line naming the file."""
    import math

    from judge.ledger import LedgerError, SharedSpend, read_ledger

    path = tmp_path_factory.mktemp("ledger") / "spend.json"
    path.write_text(json.dumps(content))
    try:
        ledger = read_ledger(path)
        SharedSpend(path, "0_job").reserve(0.01, 1.0)
    except LedgerError as exc:
        assert one_line(str(exc)) and str(exc).startswith(str(path)), exc
        return
    amounts = [line[k] for line in ledger["jobs"].values() for k in ("spent_usd", "reserved_usd")]
    amounts += [] if ledger["stopped_at_usd"] is None else [ledger["stopped_at_usd"]]
    assert all(
        isinstance(a, int | float) and not isinstance(a, bool) and math.isfinite(a) and a >= 0
        for a in amounts
    )


USERS = st.one_of(JSON, st.fixed_dictionaries({}, optional={"email": JSON, "id": JSON}))
RESULTS = st.lists(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {
                "from_name": st.just("score"),
                "value": st.one_of(
                    JSON, st.fixed_dictionaries({"choices": st.one_of(JSON, st.lists(JSON, max_size=2))})
                ),
            }
        ),
    ),
    max_size=2,
)
TASKS = st.lists(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {
                "data": st.one_of(JSON, st.fixed_dictionaries({"item": JSON})),
                "annotations": st.one_of(
                    JSON,
                    st.lists(
                        st.fixed_dictionaries(
                            {"completed_by": USERS, "result": st.one_of(JSON, RESULTS)},
                            optional={"was_cancelled": JSON},
                        ),
                        max_size=3,
                    ),
                ),
            }
        ),
    ),
    max_size=4,
)


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(tasks=st.one_of(TASKS, JSON), nested=st.sampled_from([0, 0, 0, 5_000, 200_000]))
def test_a_hostile_label_studio_export_is_read_or_one_line(
    tasks: object, nested: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Any JSON in place of a Label Studio export (wrong types anywhere, nesting past the parser, users with
    no email or id): labels with a text item and a distinct annotator each, or one line naming the file."""
    from analysis.annotate_io import AnnotationError, read_labelstudio

    path = tmp_path_factory.mktemp("ls") / "export.json"
    text = json.dumps(tasks)
    path.write_text("[" * nested + text + "]" * nested)
    try:
        labels = read_labelstudio(path)
    except AnnotationError as exc:
        assert one_line(str(exc)) and str(exc).startswith(str(path)), exc
        return
    assert labels["item"].map(lambda v: v is None or isinstance(v, str)).all()
    assert (
        labels["annotator"].map(lambda v: isinstance(v, str) and v not in ("None", "labelstudio:None")).all()
    )


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The viewer's app on a small synthetic study (two runs: parquet and CSV), as a test client."""
    from fastapi.testclient import TestClient

    from analysis.synthetic import synthetic_results
    from analysis.view import create_app
    from analysis.viewdata import Study

    root = tmp_path_factory.mktemp("viewer")
    frame = synthetic_results(n_instances=3, seed=2)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    for n, (_, part) in enumerate(frame.groupby(["judge", "mode"])):
        (root / str(n)).mkdir()
        if n % 2:
            part.to_csv(root / str(n) / "results.csv", index=False)
        else:
            part.to_parquet(root / str(n) / "results.parquet", index=False)
    study = Study(root)
    yield TestClient(create_app(study), base_url="http://127.0.0.1:8765", raise_server_exceptions=False)
    study.close()


QUERY_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["1e30", "nan", "-0", "9223372036854775808", "", "%00", "'", '"', "inst00001", "spread"]),
)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(["/", "/item"]),
    params=st.dictionaries(
        st.sampled_from(
            [
                "offset",
                "sort",
                "judge",
                "mode",
                "rubric",
                "dimension",
                "source",
                "instance_id",
                "candidate_id",
                "x",
            ]
        ),
        QUERY_VALUE,
        max_size=5,
    ),
    host=st.sampled_from(["127.0.0.1:8765", "localhost", "evil.example", "127.0.0.1.evil.example"]),
)
def test_a_hostile_query_string_is_a_page_or_one_line(
    viewer: Any, path: str, params: dict[str, str], host: str
) -> None:
    """Any query string on any page, from any Host: a page (the item page says when nothing matches), or a
    4xx with one line; never a 500 or a traceback, and never the study for another host (DNS rebinding)."""
    response = viewer.get(path, params=params, headers={"host": host})
    assert response.status_code < 500, (path, params, response.text[:300])
    if "evil" in host:
        assert response.status_code == 400
    assert "Traceback" not in response.text
    if response.status_code >= 400 and not response.text.startswith("<!doctype html>"):  # a page, or one line
        assert one_line(response.text), response.text[:300]


HOSTILE_POOL_SETTINGS = [
    "judge.pool.max_parallel_requests=-1",
    "judge.pool.rpm=-5",
    "judge.pool.rpm=0",
    "judge.pool.allowed_fails=-1",
    "judge.pool.cooldown_s=-3",
    "judge.pool.cooldown_s=nan",
    "judge.pool.routing=fastest",
    "judge.tpm=0",
]


@pytest.mark.parametrize("setting", HOSTILE_POOL_SETTINGS)
def test_a_hostile_pool_setting_is_one_line_naming_it(setting: str) -> None:
    problem = command_line_problem([setting], "config")
    assert problem is not None and one_line(problem) and problem.startswith(setting.split("=")[0]), problem
