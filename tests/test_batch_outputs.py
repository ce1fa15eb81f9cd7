"""Whatever a batch API's output and error files hold (issue 25; hypothesis, derandomized, small): every
request counted once, the cost that of the answers, only valid entries cached, and the key - in the
environment, in the api_base, echoed by the provider - in no error, no output and no file a batch study
writes (results, logs, the cache's database, the batch journal)."""

from __future__ import annotations

import base64
import copy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.inputs import StudyError
from experiments.study import run_study
from judge.batch.journal import BatchJournal
from judge.batch.provider import BatchClient, BatchRequest
from judge.batch.run import BatchRunner
from judge.cache.store import CallCache
from judge.spend.pricing import Prices
from tests.support.batch_server import BatchServer
from tests.support.cli import run as run_cli
from tests.support.configs import study_cfg
from tests.support.studies import cli_env, typed

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
        out = run_cli(
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
