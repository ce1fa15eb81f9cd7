"""Issue 33 item 4, the run-time half: a `-m` sweep names, when it ends, every pair of its judges that are one
rater (same model at the same endpoint, or byte-identical answers to the same calls), and no other pair.

Three judge YAMLs in a user config folder (hydra.searchpath) reach one local scripted server: `twin_a` and
`twin_b` name the same model, `other` another one (the server answers each model differently). The sweep runs
through the command line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.duplicates import duplicate_lines
from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import cli_env


def _per_model(body: dict[str, Any]) -> Step:
    """A valid answer that depends on the model asked too: two models never answer byte-identically."""
    return Step(200, rubric_answer({**body, "seed": f"{body.get('seed')}|{body['model']}"}))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], str]:
    tmp = tmp_path_factory.mktemp("sweep_duplicates")
    (tmp / "myconf" / "judge").mkdir(parents=True)
    server = ScriptedServer(_per_model)
    with server.running():
        for name, model in (("twin_a", "same"), ("twin_b", "same"), ("other", "different")):
            (tmp / "myconf" / "judge" / f"{name}.yaml").write_text(
                f"name: {name}\nmodel: openai/{model}\napi_base: {server.api_base}\napi_key_env: null\n"
                "concurrency: 4\n"
            )
        done = run_cli(
            [
                sys.executable,
                "-m",
                "experiments.run",
                "-m",
                f"hydra.searchpath=[file://{tmp / 'myconf'}]",
                "judge=twin_a,twin_b,other",
                "limit=2",
                "n_samples=1",
                "workers=1",
                "progress=false",
                f"hydra.sweep.dir={tmp / 'study'}",
            ],
            cwd=tmp,
            env=cli_env(tmp, {"OPENAI_API_KEY": "sk-local-test-server"}),
            capture_output=True,
            text=True,
            timeout=300,
        )
    return done, server.api_base


def test_two_judges_on_one_model_and_endpoint_are_named_once(
    sweep: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    done, api_base = sweep
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "one rater" in line]
    assert len(lines) == 1, done.stderr[-3000:]
    line = lines[0]
    assert line.startswith("warning: judges twin_a and twin_b are one rater (")
    assert f"same model openai/same at {api_base.rstrip('/')}" in line
    assert "byte-identical answers on all" in line


def test_judges_on_different_models_are_not_named(
    sweep: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    done, _ = sweep
    assert done.returncode == 0, done.stderr[-3000:]
    assert not [line for line in done.stderr.splitlines() if "one rater" in line and "other" in line]


def _job(root: Path, folder: str, name: str, model: str, api_base: str | None, raws: list[str]) -> None:
    job = root / folder
    job.mkdir()
    (job / "config.json").write_text(
        json.dumps({"judge": {"name": name, "model": model, "api_base": api_base}})
    )
    pd.DataFrame({"prompt_id": ["p1", "p2"], "sample_idx": [0, 0], "raw": raws}).to_parquet(
        job / "results.parquet"
    )


def test_a_key_in_the_endpoint_is_never_printed(tmp_path: Path) -> None:
    """Endpoints are compared and printed without user-info or secret-named query parameters."""
    key = "sk-secret-0123456789abcdef"
    _job(tmp_path, "0", "a", "openai/x", f"https://user:{key}@host.example/v1?api_key={key}", ["1", "2"])
    _job(tmp_path, "1", "b", "openai/x", "https://host.example/v1", ["3", "4"])
    _job(tmp_path, "2", "c", "openai/y", None, ["1", "2"])  # another model, the same answers
    lines = duplicate_lines(tmp_path)
    assert lines == [
        "warning: judges a and b are one rater (same model openai/x at https://host.example/v1): "
        "count them once in any comparison or combination",
        "warning: judges a and c are one rater (byte-identical answers on all 2 calls both answered): "
        "count them once in any comparison or combination",
    ]
    assert key not in "\n".join(lines)
