"""A study run the two ways the tests run one: the real CLI in a subprocess (`run`), or `run_study` in this
process where only the results and the cache matter (`run_in_process`, no interpreter start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from tests.support.cli import run as run_cli
from tests.support.studies import cli_env


def run(
    args: list[str], tmp: Path, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m experiments.run <args> progress=false` in `tmp`, with `cli_env`."""
    return run_cli(
        [sys.executable, "-m", "experiments.run", *args, "progress=false"],
        cwd=tmp,
        env=cli_env(tmp, env_extra),
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_env(tmp: Path, env_extra: dict[str, str] | None = None) -> dict[str, str]:
    """`cli_env` with the key the local servers accept in OPENAI_API_KEY."""
    return cli_env(tmp, {"OPENAI_API_KEY": "sk-local-test-server", **(env_extra or {})})


def run_in_process(cfg: dict[str, Any], out: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """`run_study` in this process (no interpreter start-up): the table and the manifest."""
    from experiments.study import run_study
    from tests.support.studies import typed

    os.environ.setdefault("OPENAI_API_KEY", "sk-local-test-server")
    table = run_study(typed(cfg), None, out, run_id=out.name)
    return table, manifest_of(out)


def manifest_of(run_dir: Path) -> dict[str, Any]:
    """The run's manifest.json, parsed."""
    return json.loads((run_dir / "manifest.json").read_text())
