"""The typed study model: Hydra checks every key and type against the dataclasses in experiments/config.py."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_module

from experiments.config import (
    ConfigError,
    GenerateConfig,
    IssuesConfig,
    StudyConfig,
    command_line_problem,
    load,
)
from judge.rubric import Rubric, RubricKind


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


def test_the_loaded_rubric_is_the_one_rubric_model() -> None:
    """One rubric model: the study's rubric is judge.rubric.Rubric itself, with tuples (its version is a repr)."""
    rubric = load(composed("config", "rubric=narrowness")).rubric
    assert type(rubric) is Rubric and isinstance(rubric.dimensions, tuple) and rubric.version
    assert all(isinstance(d.choices, tuple) for d in rubric.dimensions)


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
