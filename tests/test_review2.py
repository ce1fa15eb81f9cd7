"""Hostile review 2 (findings 4-7, 9, 11, 13): each against the local ScriptedServer or the CLI, no timing.

- a rate-limited judge caps a 429's Retry-After (and an x-ratelimit-reset) at retry.max_wait_s;
- a Retry-After that is neither seconds nor an HTTP date falls back to the backoff;
- a budget stop's manifest rates only the calls made, and its message says when they miss min_parse_rate;
- a rubric with no dimensions, or a template that cannot be read or compiled, is one `error:` line, exit 2;
- a key pasted into judge.api_key_env is never echoed, and any variable that is set is accepted (review 3, #6);
- analysis.card names a damaged manifest.json.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis import card
from experiments.inputs import BudgetStop, StudyError, load_study_inputs
from judge.cache import CallCache
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.ratelimit import RateLimiter
from judge.retry import RetryPolicy
from tests.openai_server import ScriptedServer, Step, rubric_answer, scripted
from tests.studies import ROOT, cli_env, typed
from tests.study_folders import write_fake_run
from tests.test_plan import compose

PRICES = ["judge.input_cost_per_token=1e-5", "judge.output_cost_per_token=1e-5"]
PASTED = "sk-OTHERsecret999"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def _ask(server: ScriptedServer, tmp: Path, policy: RetryPolicy, limiter: RateLimiter | None = None) -> Any:
    """One call through the real litellm path; its CallResult."""
    completer = LiteLLMCompleter("openai/judge", api_base=server.api_base)
    completer.read_headers = limiter is not None
    judge = Judge(completer, CallCache(tmp / "cache"), policy=policy, concurrency=1)
    judge.limiter = limiter
    try:
        return asyncio.run(judge.call_provider([{"role": "user", "content": "q"}], {"seed": 0}, "k"))
    finally:
        judge.cache.close()


# --- finding 4: the rate-limited path caps Retry-After ----------------------------------------------------------

@pytest.mark.parametrize("step", [
    Step(429, headers={"Retry-After": "3600"}),
    Step(429, headers={"Retry-After": "inf"}),
    Step(200, '{"score": 3}', headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2h"}),
])  # fmt: skip
def test_a_rate_limited_pause_is_capped_at_max_wait_s(step: Step, tmp_path: Path) -> None:
    server = ScriptedServer(scripted([step], then=step))
    limiter = RateLimiter(rpm=6000, tpm=None, concurrency=1, tokens=lambda m, p: 1, max_wait_s=5.0)
    start = time.monotonic()
    with server.running():
        _ask(server, tmp_path, RetryPolicy(max_attempts=1, max_wait_s=5.0), limiter)  # no retry: no wait here
    assert len(server.requests) == 1 and limiter.cooldown_until > start  # a pause was scheduled
    # every later request of the run waits until cooldown_until: at most max_wait_s from now, never an hour
    assert limiter.cooldown_until <= time.monotonic() + 5.0


def test_limiter_for_takes_the_retry_cap(tmp_path: Path) -> None:
    from experiments.judges import make_judge

    cfg = compose("judge=qwen", "judge.api_key_env=null", "+judge.rpm=600", "retry.max_wait_s=7",
                  f"cache_dir={tmp_path / 'cache'}")  # fmt: skip
    judge = make_judge(typed(cfg))
    judge.cache.close()
    assert judge.limiter is not None and judge.limiter.max_wait_s == 7.0


# --- finding 5: an unparseable Retry-After falls back to the backoff --------------------------------------------

def test_an_unparseable_retry_after_falls_back_to_the_backoff(tmp_path: Path) -> None:
    odd = [Step(429, headers={"Retry-After": value}) for value in ("soon", "1.5s", "2026-12-01T10:00:00Z")]
    server = ScriptedServer(scripted(odd, then=Step(200, '{"score": 3}')))
    with server.running():
        result = _ask(server, tmp_path, RetryPolicy(max_attempts=6, initial_wait_s=0.01, max_wait_s=0.05))
    assert result.completion is not None and result.retries == 3 and len(server.requests) == 4


# --- finding 6: a budget stop's parse rate ------------------------------------------------------------------

def test_a_budget_stop_rates_only_the_calls_made(tmp_path: Path) -> None:
    from experiments.study import run_study

    srv = ScriptedServer(lambda body: Step(200, "I think this is good."))  # no answer can be scored
    cfg = compose("judge=qwen", "judge.api_key_env=null", "limit=2", "n_samples=2", "progress=false",
                  "max_tokens=40", "workers=1", "min_parse_rate=0.9", *PRICES)  # fmt: skip
    cfg = {**cfg, "cache_dir": str(tmp_path / "cache"), "budget_usd": 0.01}
    with srv.running():
        cfg["judge"]["api_base"] = srv.api_base
        with pytest.raises(BudgetStop, match=r"budget_usd=0.01 reached: .* calls not started .*; and of the calls "
                                             r"made, parse rate 0\.000 is below min_parse_rate=0\.9 \((\d+) of \1 "
                                             r"calls unscored"):  # fmt: skip
            run_study(typed(cfg), None, tmp_path / "run", run_id="run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["calls_not_started"] > 0 and manifest["unscored_calls"] == manifest["calls_made"] > 0
    assert manifest["parse_rate"] == 0.0  # not (not started)/(total): those calls were never answered


# --- findings 7, 9, 11: bad rubric or key setting, refused before any call -------------------------------------

def test_a_rubric_without_dimensions_is_refused_before_any_call(server: ScriptedServer, tmp_path: Path) -> None:
    from experiments.study import run_study

    cfg = compose("judge=qwen", f"judge.api_base={server.api_base}", "judge.api_key_env=null", "limit=1",
                  "rubric.dimensions=[]", f"cache_dir={tmp_path / 'cache'}")  # fmt: skip
    before = len(server.requests)
    with pytest.raises(StudyError, match=r"^rubric\.dimensions: rubric=novelty has no dimensions"):
        run_study(typed(cfg), None, tmp_path / "run", run_id="run")
    assert len(server.requests) == before and not (tmp_path / "run").exists()


def _templates(tmp: Path) -> dict[str, str]:
    (tmp / "latin1.jinja").write_bytes("caf\xe9 {{ x }}".encode("latin-1"))
    (tmp / "syntax.jinja").write_text("{% if %}\n")
    (tmp / "folder.jinja").mkdir()
    return {"nope.jinja": r"No such file", str(tmp / "missing.jinja"): r"No such file",
            str(tmp / "folder.jinja"): r"Is a directory", str(tmp / "latin1.jinja"): r"not UTF-8 text",
            str(tmp / "syntax.jinja"): r"Expected an expression.* \(line 1\)"}  # fmt: skip


def test_a_template_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    for template, why in _templates(tmp_path).items():
        cfg = compose("judge=qwen", "judge.api_key_env=null", f"rubric.template={template}")
        with pytest.raises(StudyError, match=rf"^rubric\.template={template}: .*{why}"):
            load_study_inputs(typed(cfg))


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """experiments.run against a closed port: a refused setting must answer before any call is tried."""
    cmd = [sys.executable, "-m", "experiments.run", "judge=qwen", "progress=false", f"hydra.run.dir={tmp / 'run'}",
           "judge.api_base=http://127.0.0.1:9/v1", "retry.max_attempts=1", *args]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, env=cli_env(tmp), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("args", "line"), [
    (["rubric.template=nope.jinja"], r"error: rubric\.template=nope\.jinja: \[Errno 2\] No such file"),
    (["rubric.dimensions=[]"], r"error: rubric\.dimensions: rubric=novelty has no dimensions"),
    ([f"judge.api_key_env={PASTED}"], r"error: judge\.api_key_env must name an environment variable .*looks "
                                      r"like a key"),
])  # fmt: skip
def test_the_cli_says_one_line_and_exits_2(args: list[str], line: str, tmp_path: Path) -> None:
    done = _cli(tmp_path, "limit=1", *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error:") and "Traceback" not in done.stderr
    assert re.match(line, done.stderr), done.stderr
    assert PASTED not in done.stdout + done.stderr


@pytest.mark.parametrize("value", [PASTED, "AIzaSyD3xAmpleKey0123456789abcdefghij", "0123456789abcdef0123456789abcdef"])
@pytest.mark.parametrize("plan", [False, True])
def test_a_key_pasted_as_api_key_env_is_never_echoed(value: str, plan: bool) -> None:
    cfg = compose("judge=qwen", f"judge.api_key_env={value}", f"plan={plan}")
    with pytest.raises(StudyError, match="looks like a key") as info:
        load_study_inputs(typed(cfg))
    assert value not in str(info.value)


@pytest.mark.parametrize("name", ["QWEN_API_KEY_UNSET_HERE", "my_key"])
def test_an_unset_variable_name_is_still_named(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(name, raising=False)
    with pytest.raises(StudyError, match=f"the environment variable {name} is not set"):
        load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}")))


# Review 3, finding 6: real names come in every shape; any variable that is set is accepted, in a plan or not.
SET_NAMES = ["AzureOpenAIKey", "OpenAI_API_Key", "Groq_Key", "my-key", "OPENROUTERAPIKEYPROD"]


@pytest.mark.parametrize("name", SET_NAMES)
@pytest.mark.parametrize("plan", [False, True])
def test_a_set_variable_of_any_shape_is_accepted(name: str, plan: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "abc123abc123abc")
    load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}", f"plan={plan}")))


@pytest.mark.parametrize("name", SET_NAMES)
def test_an_unset_odd_name_is_not_set_and_maybe_a_key_but_not_echoed(name: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(name, raising=False)
    with pytest.raises(StudyError, match="no variable of that name is set.*looks like a key pasted by mistake") as info:
        load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}")))
    assert name not in str(info.value)


@pytest.mark.parametrize("name", ["QWEN_API_KEY_UNSET_HERE", "my_key"])
def test_a_plan_accepts_an_unset_variable_name(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(name, raising=False)
    load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}", "plan=true")))


def test_the_cli_plans_with_a_mixed_case_variable_that_is_set(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "experiments.run", "judge=gpt-4o", "judge.api_key_env=AzureOpenAIKey", "limit=1",
           "plan=true", f"hydra.run.dir={tmp_path / 'run'}"]  # fmt: skip
    env = cli_env(tmp_path, {"AzureOpenAIKey": "abc123abc123abc"})
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "error:" not in done.stderr


# --- finding 13: a damaged manifest is named ---------------------------------------------------------------

@pytest.mark.parametrize("text", ["{\n'judge': 1}", "[1, 2]"])
def test_card_names_a_damaged_manifest(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_fake_run(tmp_path / "runs" / "a1", "judge-a", "independent", lambda j, c, d, k: 3.0)
    (run / "manifest.json").write_text(text)
    assert card.main([str(tmp_path / "runs"), "--n-boot", "10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {run / 'manifest.json'}: not a readable manifest") and err.count("\n") == 1
