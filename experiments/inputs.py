"""A study's inputs, checked before anything heavy is imported or any call or file is made.

Kept free of litellm so a wrong name, a missing key or a bad dataset answers in about a second.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.datasets import DatasetError, Instance, load_dataset
from experiments.modes import Mode, ModeError, mode_from_config
from experiments.shard import ShardError, parse_shard, select
from judge.rubric import Rubric, rubric_from_config

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class StudyError(RuntimeError):
    """A problem with the study's inputs, reported as one line before anything is written."""


class BudgetStop(StudyError):
    """The run stopped at its `budget_usd`; its outputs (what was paid for) are written. Exit code 3."""


class ParseRateError(StudyError):
    """The run scored fewer answers than `min_parse_rate`; its outputs are written. Exit code 4."""


def resolve_path(path: str) -> Path:
    """A dataset path as given, else relative to the project root (so any working directory works)."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return PROJECT_ROOT / candidate


def study_mode(cfg: Mapping[str, Any]) -> Mode:
    """The study's mode object, from the class its config names (a StudyError when there is none)."""
    try:
        return mode_from_config(cfg["mode"])
    except ModeError as exc:
        raise StudyError(str(exc)) from None


def check_pairing(mode: Mode, rubric: Rubric) -> None:
    """The rubric asks what the mode reads back, and its template needs only what the mode renders."""
    if mode.asks is not rubric.kind:
        raise StudyError(f"rubric={rubric.name}: mode={mode.name} needs a {mode.asks.value} rubric; "
                         f"{rubric.name} asks for {rubric.kind.value}")  # fmt: skip
    missing = sorted(rubric.inputs - mode.renders)
    if missing:
        raise StudyError(f"rubric={rubric.name}: its template needs {', '.join(missing)}, which mode={mode.name} "
                         "does not provide")  # fmt: skip


def check_inputs(cfg: Mapping[str, Any], rubric: Rubric, *, with_mode: bool = True) -> None:
    """Reject an inconsistent study: mode/rubric pairing and the API key."""
    if with_mode:
        check_pairing(study_mode(cfg), rubric)
    env = cfg["judge"].get("api_key_env")
    if env and not os.environ.get(env) and not cfg.get("plan"):  # a plan calls no provider
        raise StudyError(f"judge={cfg['judge']['name']}: the environment variable {env} is not set (API key)")


def load_study_inputs(cfg: Mapping[str, Any], *, with_mode: bool = True) -> tuple[Rubric, list[Instance], Path]:
    """The rubric, the (limited, then sharded) instances and the dataset path, or a StudyError naming the
    problem (`with_mode=False`: a study without modes, e.g. experiments.issues)."""
    try:
        shard = parse_shard(cfg.get("shard"))
    except ShardError as exc:
        raise StudyError(str(exc)) from None
    rubric = rubric_from_config(cfg["rubric"])
    check_inputs(cfg, rubric, with_mode=with_mode)
    path = resolve_path(str(cfg["dataset"]["path"]))
    try:
        instances = load_dataset(path)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    limit = cfg.get("limit")
    limited = instances[: int(limit)] if limit is not None else instances
    return rubric, select(limited, shard), path
