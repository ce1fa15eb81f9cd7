"""The study's inputs, checked before any call (hostile review 2, findings 7, 9, 11; review 3, #6): each
against the local ScriptedServer or the CLI, no timing.

- a rubric with no dimensions, or a template that cannot be read or compiled, is one `error:` line, exit 2;
- a key pasted into judge.api_key_env is never echoed, and any variable that is set is accepted (review 3, #6).

Findings 4 and 5 (Retry-After) are in test_retry_after.py, 6 (a budget stop's parse rate) in test_budget.py,
13 (a damaged manifest) in test_card.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.inputs import StudyError, load_study_inputs
from tests.support.cli import run as run_cli
from tests.support.configs import compose
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import ROOT, cli_env, typed

PASTED = "sk-OTHERsecret999"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


# --- findings 7, 9, 11: bad rubric or key setting, refused before any call -------------------------------------


def test_a_rubric_without_dimensions_is_refused_before_any_call(
    server: ScriptedServer, tmp_path: Path
) -> None:
    from experiments.study import run_study

    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "judge.api_key_env=null",
        "limit=1",
        "rubric.dimensions=[]",
        f"cache_dir={tmp_path / 'cache'}",
    )
    before = len(server.requests)
    with pytest.raises(StudyError, match=r"^rubric\.dimensions: rubric=novelty has no dimensions"):
        run_study(typed(cfg), None, tmp_path / "run", run_id="run")
    assert len(server.requests) == before and not (tmp_path / "run").exists()


def _templates(tmp: Path) -> dict[str, str]:
    (tmp / "latin1.jinja").write_bytes("caf\xe9 {{ x }}".encode("latin-1"))
    (tmp / "syntax.jinja").write_text("{% if %}\n")
    (tmp / "folder.jinja").mkdir()
    return {
        "nope.jinja": r"No such file",
        str(tmp / "missing.jinja"): r"No such file",
        str(tmp / "folder.jinja"): r"Is a directory",
        str(tmp / "latin1.jinja"): r"not UTF-8 text",
        str(tmp / "syntax.jinja"): r"Expected an expression.* \(line 1\)",
    }


def test_a_template_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    for template, why in _templates(tmp_path).items():
        cfg = compose("judge=qwen", "judge.api_key_env=null", f"rubric.template={template}")
        with pytest.raises(StudyError, match=rf"^rubric\.template={template}: .*{why}"):
            load_study_inputs(typed(cfg))


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """experiments.run against a closed port: a refused setting must answer before any call is tried."""
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "judge=qwen",
        "progress=false",
        f"hydra.run.dir={tmp / 'run'}",
        "judge.api_base=http://127.0.0.1:9/v1",
        "retry.max_attempts=1",
        *args,
    ]
    return run_cli(cmd, cwd=ROOT, env=cli_env(tmp), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["rubric.template=nope.jinja"], r"error: rubric\.template=nope\.jinja: \[Errno 2\] No such file"),
        (["rubric.dimensions=[]"], r"error: rubric\.dimensions: rubric=novelty has no dimensions"),
        (
            [f"judge.api_key_env={PASTED}"],
            r"error: judge\.api_key_env must name an environment variable .*looks "
            r"like a key",
        ),
    ],
)
def test_the_cli_says_one_line_and_exits_2(args: list[str], line: str, tmp_path: Path) -> None:
    done = _cli(tmp_path, "limit=1", *args)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.count("\n") == 1 and done.stderr.startswith("error:") and "Traceback" not in done.stderr
    )
    assert re.match(line, done.stderr), done.stderr
    assert PASTED not in done.stdout + done.stderr


@pytest.mark.parametrize(
    "value", [PASTED, "AIzaSyD3xAmpleKey0123456789abcdefghij", "0123456789abcdef0123456789abcdef"]
)
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
def test_a_set_variable_of_any_shape_is_accepted(
    name: str, plan: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "abc123abc123abc")
    load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}", f"plan={plan}")))


@pytest.mark.parametrize("name", SET_NAMES)
def test_an_unset_odd_name_is_not_set_and_maybe_a_key_but_not_echoed(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        StudyError, match="no variable of that name is set.*looks like a key pasted by mistake"
    ) as info:
        load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}")))
    assert name not in str(info.value)


@pytest.mark.parametrize("name", ["QWEN_API_KEY_UNSET_HERE", "my_key"])
def test_a_plan_accepts_an_unset_variable_name(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(name, raising=False)
    load_study_inputs(typed(compose("judge=qwen", f"judge.api_key_env={name}", "plan=true")))


def test_the_cli_plans_with_a_mixed_case_variable_that_is_set(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "experiments.run",
        "judge=gpt-4o",
        "judge.api_key_env=AzureOpenAIKey",
        "limit=1",
        "plan=true",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = cli_env(tmp_path, {"AzureOpenAIKey": "abc123abc123abc"})
    done = run_cli(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "error:" not in done.stderr
