"""Comparative mode against a provider that cuts answers at max_tokens, as real providers do.

The local server (tests.support.openai_server.provider_answer) writes the rubric's answer as chat models write JSON
(pretty-printed in a ```json fence), counts its tokens with a real BPE tokenizer and stops at the request's
`max_tokens` with finish_reason "length". The shipped sample (6 instances, a reference and 5 candidates of each
of 2 generators) is judged in full.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from experiments.inputs import ParseRateError
from tests.support.cli import run as run_cli
from tests.support.configs import config
from tests.support.openai_server import ScriptedServer, provider_answer
from tests.support.runners import run_env, run_in_process

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(provider_answer)
    with srv.running():
        yield srv


def study(server: ScriptedServer, tmp: Path, *extra: str) -> dict:
    return config(
        [
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "n_samples=1",
            "workers=1",
            "progress=false",
            f"cache_dir={tmp / 'cache'}",
            *extra,
        ]
    )


def test_the_defaults_fit_the_comparative_answer(server: ScriptedServer, tmp_path: Path) -> None:
    before = len(server.requests)
    table, manifest = run_in_process(study(server, tmp_path, "mode=comparative"), tmp_path / "run")
    sent = server.requests[before:]
    # one prompt per (instance, generator): the reference and that generator's 5 candidates
    assert manifest["prompts"] == 6 * 2 == len(sent)
    items = table[table.dimension == "originality"].groupby("prompt_id")
    assert all(
        len(g) == 6 and (g.source == "reference").sum() == 1 and g.source.nunique() == 2 for _, g in items
    )
    assert all(body["max_tokens"] >= 250 for body in sent)  # derived from the rubric and the 6 items shown
    assert manifest["parse_rate"] >= 0.9 and (table.finish_reason == "stop").mean() >= 0.9
    assert table["parse_ok"].mean() >= 0.9


def test_a_cut_answer_keeps_its_complete_entries_and_a_low_parse_rate_fails(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """v0.1's setting (all generators in one prompt, max_tokens 160): every answer is cut. The complete
    entries are salvaged, the run writes everything and then fails, naming the reasons."""
    cfg = study(server, tmp_path, "mode=comparative_all", "max_tokens=160", "limit=2")
    with pytest.raises(
        ParseRateError,
        match=r"parse rate 0\.000 is below min_parse_rate=0\.9 .*top reasons: "
        r"truncated \(finish_reason=length\): missing entry 'Q\d+'( / 'Q\d+')*( / \d+ more)? \(cut off\) \(2\)",
    ):
        run_in_process(cfg, tmp_path / "run")
    table = pd.read_parquet(tmp_path / "run" / "results.parquet")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["parse_rate"] == 0.0 and (table.finish_reason == "length").all()
    assert len(table) == 2 * 11 * 3
    salvaged = table[table.parse_ok]
    assert len(salvaged) > 0 and salvaged["salvaged"].all() and salvaged["score"].notna().all()
    # the salvaged entries are exactly the ones an uncut answer gives
    full = pd.DataFrame(
        run_in_process(
            study(server, tmp_path, "mode=comparative_all", "limit=2", "min_parse_rate=0"), tmp_path / "full"
        )[0]
    )
    keys = ["candidate_id", "dimension"]
    merged = salvaged.merge(full, on=keys, suffixes=("", "_full"))
    assert len(merged) == len(salvaged) and (merged["score"] == merged["score_full"]).all()


def test_the_command_exits_non_zero_below_min_parse_rate(server: ScriptedServer, tmp_path: Path) -> None:
    args = [
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "mode=comparative_all",
        "max_tokens=120",
        "limit=1",
        "n_samples=1",
        "workers=1",
        "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    env = {**run_env(tmp_path), "PYTHONPATH": str(ROOT)}
    done = run_cli(
        [sys.executable, "-m", "experiments.run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 4, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: parse rate 0.000 is below min_parse_rate=0.9")
    assert (tmp_path / "run" / "results.parquet").is_file() and (tmp_path / "run" / "manifest.json").is_file()
