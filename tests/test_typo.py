"""Issue 37 friction: a config typo lists the choices and also names the closest (difflib), through
`python -m experiments.run`; a name close to none gets the list alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core.choices import did_you_mean
from tests.support.cli import run as run_cli
from tests.support.studies import ROOT, cli_env


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "mode=comparitive",
            "error: mode=comparitive: unknown mode; choose one of: comparative, comparative_all, independent, "
            "pairwise; did you mean comparative?",
        ),
        ("judge=gpt4o", "; did you mean gpt-4o?"),
        (
            "judge.pool.routing=leastbusy",
            "choose one of least-busy, simple-shuffle, latency-based-routing, usage-based-routing-v2; did you mean least-busy?",
        ),
    ],
)
def test_a_typo_names_the_closest_choice(tmp_path: Path, override: str, line: str) -> None:
    run = run_cli(
        [sys.executable, "-m", "experiments.run", override, f"hydra.run.dir={tmp_path / 'out'}"],
        cwd=ROOT,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert line in run.stderr, run.stderr


def test_a_name_close_to_none_gets_the_list_alone() -> None:
    assert did_you_mean("zzz", ["independent", "comparative"]) == ""
    assert did_you_mean("GPT-4O", ["gpt-4o", "gpt-5"]) == "; did you mean gpt-4o?"
