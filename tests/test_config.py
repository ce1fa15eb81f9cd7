"""The typed study model: Hydra checks every key and type against the dataclasses in experiments/config.py."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_module
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.config import (
    ConfigError,
    GenerateConfig,
    IssuesConfig,
    RubricKind,
    StudyConfig,
    command_line_problem,
    load,
)
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


@pytest.mark.parametrize(("argv", "expected"), [
    (["n_samples=abc"], "n_samples: Value 'abc' of type 'str' could not be converted to Integer"),
    (["temperature=hot"], "temperature: Value 'hot' of type 'str' could not be converted to Float"),
    (["limit=two"], "limit: Value 'two' of type 'str' could not be converted to Integer"),
    (["judge.timout_s=3"], "judge.timout_s: Key 'timout_s' not in 'JudgeConfig'"),
    (["+judge.timout_s=3"], "judge.timout_s: unknown setting; JudgeConfig has: name, model"),
    (["+min_parse_rat=0.5"], "min_parse_rat: unknown setting; StudyConfig has: judge"),
    (["-m", "temperature=0.1,hot"], "temperature: Value 'hot'"),
    (["mode=independent,comparative"], "mode=independent,comparative: several values need -m"),
    (["judge.api_base=http://u:hunter2hunter2@h/v1?x=1"], "judge.api_base=...: not an override Hydra can read "
                                                         "(value not shown); quote a value"),
])  # fmt: skip
def test_a_bad_setting_is_one_line_naming_it(argv: list[str], expected: str) -> None:
    problem = command_line_problem(argv, "config")
    assert problem is not None and problem.startswith(expected) and "\n" not in problem


def test_good_command_lines_pass() -> None:
    assert command_line_problem(["-m", "mode=independent,comparative", "rubric=novelty,narrowness", "limit=2",
                                 "+judge.extra.top_p=0.5", "hydra.run.dir=/tmp/x"], "config") is None
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
