"""Issue 33 items 1, 6, 7, issue 34 breaks 13 and 19, issue 37's robustness-folder and rate-limit frictions:
the record says what was sent, what ran, what failed and why - each through the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run


def test_every_extra_sampling_override_is_recorded_as_sent(tmp_path: Path) -> None:
    """`temperature=0.3 +judge.extra.temperature=0.9` (and top_p, max_tokens, seed in judge.extra): what the
    server received is what every results row and manifest.json say (it sent 0.3 and recorded 0.9)."""
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.structured_output=false",
                "mode=independent",
                "limit=1",
                "n_samples=1",
                "temperature=0.3",
                "+judge.extra.temperature=0.9",
                "+judge.extra.top_p=0.5",
                "+judge.extra.max_tokens=777",
                "+judge.extra.seed=41",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    sent = {(b["temperature"], b["top_p"], b["max_tokens"], b["seed"]) for b in srv.requests}
    assert sent == {(0.9, 0.5, 777, 41)}, sent  # judge.extra wins over the typed setting (README)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    record = manifest["request"]["sent"]
    assert (record["temperature"], record["top_p"], record["max_tokens"], record["seed"]) == (0.9, 0.5, 777, 41)
    assert manifest["temperature"] == 0.9 and manifest["temperature_asked"] == 0.9
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert set(rows["temperature"]) == {0.9}
