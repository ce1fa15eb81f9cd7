"""A study's inputs, checked before anything heavy is imported or any call or file is made.

Kept free of litellm so a wrong name, a missing key or a bad dataset answers in about a second.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from experiments.config import IssuesConfig, JudgeConfig, ModeConfig, StudyConfig
from experiments.datasets.fetch import DataError, resolve_data
from experiments.datasets.loader import DatasetError, Instance, load_dataset
from experiments.modes import Mode, ModeError, mode_from_config
from experiments.shard import ShardError, parse_shard, select
from judge.rubric import Rubric

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*|[a-z_][a-z0-9_]*")


def looks_like_env_name(value: str) -> bool:
    """A variable's name as people write them: one case, no dashes, and a long one has an underscore. A
    pasted key (`sk-...`, mixed case, a long run of hex) is none of these, so it is never echoed."""
    return bool(_ENV_NAME.fullmatch(value)) and (len(value) < 20 or "_" in value)


class StudyError(RuntimeError):
    """A problem with the study's inputs, reported as one line before anything is written."""


class BudgetStop(StudyError):
    """The run stopped at its `budget_usd`; its outputs (what was paid for) are written. Exit code 3."""


class JobFailed(StudyError):
    """A job that cannot run as configured (a robustness perturbation with nothing to judge) but whose -m sweep
    goes on without it: recorded and named at the sweep's end, as a failed parse rate is. Exit code 2."""


class ParseRateError(StudyError):
    """The run scored fewer answers than `min_parse_rate`; its outputs are written. Exit code 4."""


def resolve_path(path: str) -> Path:
    """A dataset path as given, else relative to the project root (so any working directory works); a public
    file named `data:<file>` comes from the data folder, checked (a StudyError names the fetch command)."""
    try:
        fetched = resolve_data(path)
    except DataError as exc:
        raise StudyError(str(exc)) from None
    if fetched is not None:
        return fetched
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return PROJECT_ROOT / candidate


def study_mode(mode: ModeConfig) -> Mode:
    """The study's mode object, from the class its config names (a StudyError when there is none)."""
    try:
        return mode_from_config(mode)
    except ModeError as exc:
        raise StudyError(str(exc)) from None


def check_pairing(mode: Mode, rubric: Rubric) -> None:
    """The rubric asks what the mode reads back, and its template needs only what the mode renders."""
    if mode.asks is not rubric.kind:
        raise StudyError(
            f"rubric={rubric.name}: mode={mode.name} needs a {mode.asks.value} rubric; "
            f"{rubric.name} asks for {rubric.kind.value}"
        )
    missing = sorted(rubric.inputs - mode.renders)
    if missing:
        raise StudyError(
            f"rubric={rubric.name}: its template needs {', '.join(missing)}, which mode={mode.name} "
            "does not provide"
        )


def check_rubric(rubric: Rubric) -> None:
    """A rubric that can be asked: some dimension to score (else every call is paid for 0 rows), and a
    template that can be read and compiled (else a traceback at the first prompt)."""
    if not rubric.dimensions:
        raise StudyError(
            f"rubric.dimensions: rubric={rubric.name} has no dimensions, so no answer could be "
            "scored; list at least one (name plus low/high or choices) in its YAML"
        )
    try:
        _ = rubric.inputs  # reads the template and _common.jinja and parses the template
    except jinja2.TemplateSyntaxError as exc:
        raise StudyError(f"rubric.template={rubric.template}: {exc.message} (line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise StudyError(
            f"rubric.template={rubric.template}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except (OSError, jinja2.TemplateError) as exc:
        raise StudyError(f"rubric.template={rubric.template}: {exc}") from None


def check_api_key_env(judge: JudgeConfig, *, plan: bool = False) -> None:
    """`judge.api_key_env` names a variable that is set. Any name that is set is accepted (real names come in
    every case and shape); only an unset value is judged by its look, so a key pasted there is never echoed."""
    env = judge.api_key_env
    if not env or os.environ.get(env):
        return
    if not looks_like_env_name(env):  # even in a plan: its config would show the pasted key
        raise StudyError(
            "judge.api_key_env must name an environment variable (e.g. OPENAI_API_KEY): no variable "
            "of that name is set, and its value looks like a key pasted by mistake (not shown): put "
            "the key in an environment variable and name that variable here"
        )
    if not plan:  # a plan calls no provider
        raise StudyError(f"judge={judge.name}: the environment variable {env} is not set (API key)")


@dataclass(frozen=True)
class JudgingInputs:
    """What a study gives its judge, checked: the rubric, the (limited, then sharded) instances, the dataset
    path, and the mode, built once here (None for a study without modes, e.g. experiments.stages.issues).
    Not the analysis's inputs (analysis.tables.registry.StudyInputs: the frames the tables read)."""

    rubric: Rubric
    instances: list[Instance]
    data_path: Path
    mode: Mode | None = None


def load_study_inputs(cfg: StudyConfig | IssuesConfig, *, with_mode: bool = True) -> JudgingInputs:
    """The rubric, instances, dataset path and mode, or a StudyError naming the problem (`with_mode=False`: a
    study without modes). Checked in this order: the shard, the rubric, mode/rubric pairing, the API key."""
    study = cfg if isinstance(cfg, StudyConfig) else None
    try:
        shard = parse_shard(study.shard if study else None)
    except ShardError as exc:
        raise StudyError(str(exc)) from None
    rubric = cfg.rubric
    check_rubric(rubric)
    mode = study_mode(study.mode) if study is not None and with_mode else None
    if mode is not None:
        check_pairing(mode, rubric)
    check_api_key_env(cfg.judge, plan=study is not None and study.plan)
    path = resolve_path(cfg.dataset.path)
    try:
        instances = load_dataset(path)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    limited = instances[: cfg.limit] if cfg.limit is not None else instances
    return JudgingInputs(rubric, select(limited, shard), path, mode)
