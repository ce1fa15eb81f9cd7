"""A study's inputs, checked before anything heavy is imported or any call or file is made.

Kept free of litellm so a wrong name, a missing key or a bad dataset answers in about a second.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.datasets import DatasetError, Instance, load_dataset
from experiments.modes import MODES
from experiments.shard import ShardError, parse_shard, select
from judge.rubric import Rubric, RubricKind, rubric_from_config

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class StudyError(RuntimeError):
    """A problem with the study's inputs, reported as one line before anything is written."""


class BudgetStop(StudyError):
    """The run stopped at its `budget_usd`; its outputs (what was paid for) are written. Exit code 3."""


def resolve_path(path: str) -> Path:
    """A dataset path as given, else relative to the project root (so any working directory works)."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return PROJECT_ROOT / candidate


def check_inputs(cfg: Mapping[str, Any], rubric: Rubric) -> None:
    """Reject an inconsistent study: mode/rubric pairing and the API key."""
    mode = cfg["mode"]["name"]
    if mode not in MODES:
        raise StudyError(f"mode.name: unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if (mode == "pairwise") != (rubric.kind is RubricKind.preference):
        need = "a preference rubric (rubric=pairwise or review_pairwise)" if mode == "pairwise" else \
            "a scores rubric (novelty, narrowness, review_quality)"  # fmt: skip
        raise StudyError(f"rubric={rubric.name}: mode={mode} needs {need}")
    env = cfg["judge"].get("api_key_env")
    if env and not os.environ.get(env) and not cfg.get("plan"):  # a plan calls no provider
        raise StudyError(f"judge={cfg['judge']['name']}: the environment variable {env} is not set (API key)")


def load_study_inputs(cfg: Mapping[str, Any]) -> tuple[Rubric, list[Instance], Path]:
    """The rubric, the (limited, then sharded) instances and the dataset path, or a StudyError naming the
    problem."""
    try:
        shard = parse_shard(cfg.get("shard"))
    except ShardError as exc:
        raise StudyError(str(exc)) from None
    rubric = rubric_from_config(cfg["rubric"])
    check_inputs(cfg, rubric)
    path = resolve_path(str(cfg["dataset"]["path"]))
    try:
        instances = load_dataset(path)
    except DatasetError as exc:
        raise StudyError(str(exc)) from None
    limit = cfg.get("limit")
    limited = instances[: int(limit)] if limit is not None else instances
    return rubric, select(limited, shard), path
