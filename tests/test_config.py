"""The typed study model: Hydra checks every key and type against the dataclasses in experiments/config.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from experiments.config import (
    ConfigError,
    GenerateConfig,
    IssuesConfig,
    RetryConfig,
    StudyConfig,
    as_dict,
    command_line_problem,
    load,
)
from judge import retry_defaults
from judge.retry import RetryPolicy
from judge.rubric import Rubric, RubricKind
from tests.support.hostile import one_line


def composed(name: str, *overrides: str) -> object:
    with initialize_config_module(config_module="conf", version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


def test_shipped_configs_load_as_frozen_typed_objects() -> None:
    study = load(composed("config", "rubric=narrowness", "+judge.extra.top_p=0.5"))
    assert isinstance(study, StudyConfig) and study.rubric.kind is RubricKind.scores
    assert study.judge.extra == {"top_p": 0.5} and study.min_parse_rate == 0.9
    assert [d.higher_is_better for d in study.rubric.dimensions] == [False, False]
    with pytest.raises(dataclasses.FrozenInstanceError):
        study.n_samples = 4  # type: ignore[misc]
    assert load(composed("config", "mode=pairwise")).rubric.kind is RubricKind.preference
    assert load(composed("config", "experiment=review_quality")).max_tokens is None  # derived per prompt
    assert load(composed("generate"), GenerateConfig).k == 5
    assert load(composed("issues"), IssuesConfig).rubric.kind is RubricKind.match


def test_the_retry_defaults_live_in_one_place() -> None:
    """RetryConfig (read before litellm is imported) and judge.retry's RetryPolicy take their defaults from
    judge.retry_defaults, and the shipped config.yaml states the same values (issue 23, item 2)."""
    defaults = {
        "max_attempts": retry_defaults.MAX_ATTEMPTS,
        "initial_wait_s": retry_defaults.INITIAL_WAIT_S,
        "max_wait_s": retry_defaults.MAX_WAIT_S,
    }
    assert dataclasses.asdict(RetryConfig()) == defaults
    assert dataclasses.asdict(RetryPolicy()) == defaults
    assert dataclasses.asdict(load(composed("config")).retry) == defaults


def test_the_loaded_rubric_is_the_one_rubric_model() -> None:
    """One rubric model: the study's rubric is judge.rubric.Rubric itself, with tuples (its version is a repr)."""
    rubric = load(composed("config", "rubric=narrowness")).rubric
    assert type(rubric) is Rubric and isinstance(rubric.dimensions, tuple) and rubric.version
    assert all(isinstance(d.choices, tuple) for d in rubric.dimensions)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["n_samples=abc"], "n_samples: Value 'abc' of type 'str' could not be converted to Integer"),
        (["temperature=hot"], "temperature: Value 'hot' of type 'str' could not be converted to Float"),
        (["limit=two"], "limit: Value 'two' of type 'str' could not be converted to Integer"),
        (["judge.timout_s=3"], "judge.timout_s: Key 'timout_s' not in 'JudgeConfig'"),
        (["+judge.timout_s=3"], "judge.timout_s: unknown setting; JudgeConfig has: name, model"),
        (["+min_parse_rat=0.5"], "min_parse_rat: unknown setting; StudyConfig has: judge"),
        (["-m", "temperature=0.1,hot"], "temperature: Value 'hot'"),
        (["mode=independent,comparative"], "mode=independent,comparative: several values need -m"),
        (
            ["judge.api_base=http://u:hunter2hunter2@h/v1?x=1"],
            "judge.api_base=...: not an override Hydra can read (value not shown); quote a value",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(argv: list[str], expected: str) -> None:
    problem = command_line_problem(argv, "config")
    assert problem is not None and problem.startswith(expected) and "\n" not in problem


def test_good_command_lines_pass() -> None:
    assert (
        command_line_problem(
            [
                "-m",
                "mode=independent,comparative",
                "rubric=novelty,narrowness",
                "limit=2",
                "+judge.extra.top_p=0.5",
                "hydra.run.dir=/tmp/x",
            ],
            "config",
        )
        is None
    )
    assert command_line_problem(["task=reviews", "k=3"], "generate") is None
    assert command_line_problem(["threshold=x"], "issues") is not None


def test_plain_mapping_is_checked_too() -> None:
    with pytest.raises(ConfigError, match=r"^judge\.modle: unknown setting"):
        load({"judge": {"name": "x", "modle": "y"}})
    with pytest.raises(ConfigError, match=r"^rubric\.kind: "):
        load({**_plain(), "rubric": {**_plain()["rubric"], "kind": "score"}})


def _plain() -> dict:
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(composed("config"), resolve=True)
    assert isinstance(cfg, dict)
    return cfg


# --- hostile settings (issues 11 and 25): any value is valid or one line naming the setting ---

HOSTILE_SETTINGS = [
    "limit=-1",
    "limit=0",
    "limit=two",
    "n_samples=-2",
    "n_samples=0",
    "n_samples=abc",
    "temperature=hot",
    "temperature=-1",
    "temperature=nan",
    "judge.concurrency=0",
    "judge.timeout_s=0",
    "max_tokens=0",
    "retry.max_attempts=0",
    "retry.initial_wait_s=-1",
    "workers=0",
    "budget_usd=-5",
    "mode.k_per_source=0",
    "min_parse_rate=2",
]


@pytest.mark.parametrize("setting", HOSTILE_SETTINGS)
def test_a_hostile_setting_is_one_line_naming_it(setting: str) -> None:
    problem = command_line_problem([setting], "config")
    name = setting.split("=")[0]
    assert problem is not None and "\n" not in problem and problem.startswith(name), problem


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(
    st.sampled_from(
        [
            "limit",
            "n_samples",
            "temperature",
            "max_tokens",
            "seed",
            "judge.concurrency",
            "judge.timeout_s",
            "retry.max_attempts",
            "workers",
            "budget_usd",
        ]
    ),
    st.one_of(
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=True),
        st.text(max_size=6),
        st.sampled_from(["null", "[]", "{}", "true", "1e999", "٣", "１"]),
    ),
)
def test_any_value_of_a_setting_is_valid_or_one_line(name: str, value: object) -> None:
    problem = command_line_problem([f"{name}={value}"], "config")
    assert problem is None or ("\n" not in problem and problem.strip()), problem


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


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["mode=comparative", "judge=qwen"],
        ["experiment=robustness"],
        ["mode=pairwise", "judge.api_bases=[http://a/v1,http://b/v1]"],
    ],
)
def test_the_typed_config_writes_the_resolved_config(overrides: list[str]) -> None:
    """config.json (and the study_id hashed from it) come from the typed object through `as_dict`: the same
    keys, values and order as Hydra's resolved config, so a run's config.json is unchanged."""
    cfg = composed("config", *overrides)
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert json.dumps(as_dict(load(cfg))) == json.dumps(plain)


def test_the_judge_is_assembled_in_one_place(tmp_path: Path) -> None:
    """make_judge builds the whole judge: the budget sized to the run's largest output and shared with the
    sweep's ledger, the rate limiter, and the completer reading the provider's limit headers."""
    from experiments.judges import make_judge

    study = load(
        composed(
            "config",
            "judge=qwen",
            "budget_usd=1",
            "judge.rpm=60",
            "judge.concurrency=3",
            "judge.input_cost_per_token=1e-6",
            "judge.output_cost_per_token=2e-6",
            f"cache_dir={tmp_path / 'cache'}",
        )
    )
    judge = make_judge(study, largest_output=777, sweep_dir=tmp_path, job="job0")
    try:
        assert judge.budget is not None and judge.budget.max_tokens == 777 and judge.budget.shared is not None
        assert judge.limiter is not None and judge.concurrency == 3
        assert judge.completer.read_headers is True  # type: ignore[attr-defined]
    finally:
        judge.cache.close()


def test_the_mode_is_built_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A study's mode is built once, with its inputs, and planned / run from there."""
    import experiments.inputs as inputs_module
    from experiments.inputs import load_study_inputs
    from experiments.plan import plan_study

    built: list[str] = []
    real = inputs_module.mode_from_config
    monkeypatch.setattr(inputs_module, "mode_from_config", lambda mode: built.append(mode.name) or real(mode))
    study = load(
        composed(
            "config",
            "judge=qwen",
            "mode=comparative",
            "limit=1",
            "n_samples=1",
            "plan=true",
            f"cache_dir={tmp_path / 'cache'}",
        )
    )
    plan = plan_study(study, load_study_inputs(study))
    assert plan["mode"] == "comparative" and built == ["comparative"]
