"""plan=true: counts, tokens and cost of a run before any provider call; the counts match the run that follows."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

from experiments.inputs import load_study_inputs
from experiments.plan import plan_study, run_plan, sum_plans
from judge.spend.pricing import prices_for
from tests.support.cli import run as run_cli
from tests.support.configs import compose
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import cli_env, typed


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def test_prices_known_values_and_overrides() -> None:
    gpt4o = prices_for("gpt-4o")
    info = litellm.get_model_info("gpt-4o")
    assert gpt4o.input_cost_per_token == info["input_cost_per_token"] and gpt4o.source == "litellm"
    # 1,000 prompt + 100 completion tokens at $2.50 / $10 per million (litellm's map for gpt-4o)
    assert gpt4o.cost(1000, 100) == pytest.approx(1000 * 2.5e-6 + 100 * 1e-5)
    assert gpt4o.cost(1000, 100, batch=True) == pytest.approx(1000 * 1.25e-6 + 100 * 5e-6)
    unknown = prices_for("openai/some-unmapped-model")
    assert unknown.cost(1000, 100) is None and unknown.source == "unknown"  # unknown, never 0
    mine = prices_for(
        "openai/some-unmapped-model", {"input_cost_per_token": 1e-6, "output_cost_per_token": "2e-6"}
    )
    assert mine.cost(1000, 100) == pytest.approx(1000e-6 + 200e-6) and mine.cost(1, 1, batch=True) is None
    with pytest.raises(ValueError, match="judge.output_cost_per_token"):
        prices_for("gpt-4o", {"output_cost_per_token": "cheap"})


def test_plan_makes_no_call_and_matches_the_run(server: ScriptedServer, tmp_path: Path) -> None:
    from experiments.study import run_study

    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=2",
        "n_samples=2",
        "progress=false",
        "plan=true",
        "judge.input_cost_per_token=1e-6",
        "judge.output_cost_per_token=4e-6",
    )
    cfg["cache_dir"] = str(tmp_path / "cache")
    inputs = load_study_inputs(typed(cfg))
    before = len(server.requests)
    plan = run_plan(typed(cfg), inputs, tmp_path / "plan", None)
    assert len(server.requests) == before  # no provider call
    assert json.loads((tmp_path / "plan" / "plan.json").read_text()) == plan
    assert plan["calls_total"] == 2 * 11 * 2 and plan["calls_cached"] == 0 and plan["calls_to_make"] == 44
    assert plan["completion_tokens_bound"] == 44 * 160 and plan["prompt_tokens"] > 44 * 100
    expected = plan["prompt_tokens"] * 1e-6 + 44 * 160 * 4e-6
    assert plan["cost_usd"]["live"]["bound"] == pytest.approx(expected, abs=1e-4)
    assert plan["cost_usd"]["batch"]["bound"] is None  # no batch price known for this model: unknown

    # run one instance, then plan both: the cached calls are counted as cached
    run_study(typed({**cfg, "plan": False, "limit": 1}), None, tmp_path / "one", run_id="one")
    again = plan_study(typed(cfg), load_study_inputs(typed(cfg)))
    assert (again["calls_cached"], again["calls_to_make"]) == (22, 22)
    # cached answers (7 completion tokens each from the server) set the expected completion length
    assert again["completion_tokens_expected"] == 22 * 7
    made = len(server.requests)
    run_study(typed({**cfg, "plan": False}), None, tmp_path / "two", run_id="two")
    manifest = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert len(server.requests) - made == manifest["calls_made"] == again["calls_to_make"]
    assert (
        manifest["calls_cached"] == again["calls_cached"] and manifest["calls_total"] == again["calls_total"]
    )
    assert manifest["calls_shared"] == again["calls_shared"] == 0


def test_sweep_sums_and_unknown_cost_stays_unknown() -> None:
    def job(n: int, live: float | None) -> dict[str, Any]:
        return {
            "judge": "j",
            "mode": "m",
            "rubric": "r",
            "calls_total": n,
            "calls_cached": 0,
            "calls_shared": 0,
            "calls_to_make": n,
            "prompt_tokens": 10 * n,
            "completion_tokens_bound": 5 * n,
            "completion_tokens_expected": 2 * n,
            "cost_usd": {k: {"expected": live, "bound": live} for k in ("live", "batch")},
        }

    summed = sum_plans([job(3, 1.5), job(4, 2.0)])
    assert summed["calls_to_make"] == 7 and summed["cost_usd"]["live"]["bound"] == 3.5
    assert sum_plans([job(3, 1.5), job(4, None)])["cost_usd"]["live"]["bound"] is None
    assert sum_plans([job(3, 1.5), job(0, None)])["cost_usd"]["live"]["bound"] == 1.5  # nothing to pay for


@pytest.mark.slow  # a subprocess: the CLI end to end
def test_plan_cli_sweep_without_key_and_without_calls(server: ScriptedServer, tmp_path: Path) -> None:
    env = cli_env(tmp_path)  # no OPENAI_API_KEY
    before = len(server.requests)
    args = [
        "-m",
        "judge=gpt-4o",
        f"judge.api_base={server.api_base}",
        "mode=independent,comparative",
        "limit=1",
        "plan=true",
        "progress=false",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    done = run_cli(
        [sys.executable, "-m", "experiments.run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(server.requests) == before  # OPENAI_API_KEY unset and no request: a plan needs neither
    summed = json.loads((tmp_path / "sweep" / "plan.json").read_text())
    assert (
        summed["jobs"] == 2 and summed["calls_to_make"] == 11 * 3 + 2 * 3
    )  # comparative: a prompt per generator
    assert summed["cost_usd"]["batch"]["bound"] < summed["cost_usd"]["live"]["bound"]
    assert "to make" in done.stderr and "sweep (2 jobs so far)" in done.stderr


@pytest.mark.slow  # a subprocess: the CLI end to end
def test_plan_prints_each_power_line_once_and_answers_a_tiny_effect(tmp_path: Path) -> None:
    """Issue 37 (friction) and 34.12: a two-job sweep printed the power line four times (each job's and each
    summed plan's); `plan_effect=0.002` gave no answer in 55 s. Now one power line, with the instances."""
    args = ["-m", "judge=qwen", "mode=independent,comparative", "limit=2", "plan=true", "plan_effect=0.002"]
    done = run_cli(
        [
            sys.executable,
            "-m",
            "experiments.run",
            *args,
            "progress=false",
            f"hydra.sweep.dir={tmp_path / 'sw'}",
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "power:" in line]
    assert len(lines) == 1, lines
    summed = json.loads((tmp_path / "sw" / "plan.json").read_text())["power"]
    assert f"a shift of 0.002 needs {summed['instances_needed']:,} instances" in lines[0]
    assert f"over {summed['family_tests']} mode-shift test(s)" in lines[0]


def test_bad_price_is_one_line(tmp_path: Path) -> None:
    from experiments.config import command_line_problem

    problem = command_line_problem(["judge=qwen", "plan=true", "judge.output_cost_per_token=cheap"], "config")
    assert (
        problem == "judge.output_cost_per_token: Value 'cheap' of type 'str' could not be converted to Float"
    )


def test_plan_has_a_power_section_from_experiments_power(tmp_path: Path) -> None:
    from experiments import power
    from experiments.inputs import StudyError

    cfg = compose(
        "judge=qwen",
        "judge.api_base=http://127.0.0.1:9/v1",
        "limit=4",
        "plan=true",
        "plan_effect=0.2",
        "plan_discordance=0.4",
    )
    cfg["cache_dir"] = str(tmp_path / "cache")
    inputs = load_study_inputs(typed(cfg))
    plan = plan_study(
        typed(cfg), inputs
    )  # no call: the cache is looked up, the server at port 9 is never asked
    section = plan["power"]
    assert section["instances"] == plan["instances"] == 4
    assert section["discordance_assumed"] == 0.4 and section["alpha"] == 0.05 and section["power"] == 0.8
    assert section["minimum_detectable_shift"] is None  # 4 instances: no exact McNemar test reaches p < 0.05
    # the mode-shift family of this judge: one test per generator × dimension, powered at BH q / m (32.4)
    family = section["family_tests"]
    assert family == len({c.source for i in inputs.instances for c in i.candidates}) * len(
        inputs.rubric.dimensions
    )
    assert section["per_test_level"] == pytest.approx(0.05 / family)
    assert section["instances_needed"] == power.instances_needed(0.2, 0.4, alpha=0.05 / family)
    summed = sum_plans([plan | {"calls_to_make": 0}])
    assert summed["power"] == section
    other = plan | {"judge": "another", "calls": {}}  # a second judge in the sweep doubles the family
    assert sum_plans([plan, other])["power"]["family_tests"] == 2 * family
    with pytest.raises(StudyError, match="plan_effect 0.5"):
        plan_study(typed({**cfg, "plan_effect": 0.5}), inputs)  # more than the discordance allows: one line


def test_a_sweeps_plan_counts_a_call_two_jobs_share_once(tmp_path: Path) -> None:
    """Issue 25 #10: with n_samples=1,3 the plan said 44 calls to make (11 + 33); the sweep made 33, since
    sample 0 of every prompt is one call for both jobs. The summed plan counts each cache key once."""
    prices = ["judge.input_cost_per_token=1e-6", "judge.output_cost_per_token=2e-6"]
    base = ["judge=qwen", "limit=1", "progress=false", *prices]
    plans = []
    for n in (1, 3):
        cfg = compose(*base, f"n_samples={n}")
        cfg["cache_dir"] = str(tmp_path / "cache")
        plans.append(plan_study(typed(cfg), load_study_inputs(typed(cfg))))
    assert [p["calls_to_make"] for p in plans] == [11, 33]
    summed = sum_plans(plans)
    assert summed["calls_to_make"] == 33 and summed["calls_shared"] == 11 and summed["calls_total"] == 44
    assert summed["prompt_tokens"] == plans[1]["prompt_tokens"]  # the larger job holds every call
    assert summed["cost_usd"] == plans[1]["cost_usd"] and summed["by_job"][1]["calls_to_make"] == 22
    assert sum_plans(plans[::-1])["calls_to_make"] == 33


def test_default_run_uses_the_bundled_price_map_and_records_it(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Issue 26.5: even with a shell asking litellm for the remote map, a default study prices with the bundled
    one (no download attempt) and plan.json / manifest.json say which map, the litellm version and a hash of
    the prices used; `prices=remote` is the opt-in, and anything else is refused in one line."""
    import hashlib  # noqa: PLC0415
    from importlib import metadata  # noqa: PLC0415

    args = [
        "-m",
        "experiments.run",
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "judge.api_key_env=null",
        "limit=1",
        "n_samples=1",
        "progress=false",
        "judge.input_cost_per_token=1e-6",
        "judge.output_cost_per_token=4e-6",
    ]
    env = cli_env(tmp_path, {"LITELLM_LOCAL_MODEL_COST_MAP": "False"})  # the shell's setting: remote
    used = {
        "input_cost_per_token": 1e-6,
        "output_cost_per_token": 4e-6,
        "input_cost_per_token_batches": None,
        "output_cost_per_token_batches": None,
    }
    digest = hashlib.sha256(
        json.dumps({"model": "openai/Qwen/Qwen2.5-7B-Instruct", **used}, sort_keys=True).encode()
    ).hexdigest()
    records = []
    for extra, name, folder in ((["plan=true"], "plan.json", "plan"), ([], "manifest.json", "run")):
        done = run_cli(
            [sys.executable, *args, *extra, f"hydra.run.dir={tmp_path / folder}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "cost map fetch" not in done.stderr and "remote model cost map" not in done.stderr
        records.append(json.loads((tmp_path / folder / name).read_text())["price_map"])
    for record in records:
        assert record["map"] == "bundled" and record["loaded_from"] in ("local", None)
        assert record["litellm_version"] == metadata.version("litellm") and record["prices_sha256"] == digest
    assert records[0] == records[1]
    choose = "from judge.spend.price_map import choose; import os, sys; choose(sys.argv[1]); print(os.environ[{!r}])"
    code = choose.format("LITELLM_LOCAL_MODEL_COST_MAP")
    for source, value in (("remote", "False"), ("bundled", "True")):
        out = run_cli([sys.executable, "-c", code, source], env=env, capture_output=True, text=True)
        assert out.stdout.strip() == value, out.stderr
    assert compose("prices=remote")["prices"] == "remote" and compose()["prices"] == "bundled"
    bad = run_cli(
        [sys.executable, *args, "prices=cheap"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "prices" in bad.stderr and "Traceback" not in bad.stderr
