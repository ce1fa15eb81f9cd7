"""The Hydra study runner end to end, through litellm's real HTTP path to a local scripted server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from analysis.load.collect import load_results
from core.schema import COLUMNS
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run

PLANTED = "sk-planted-0123456789abcdef-SECRET"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def test_three_modes_multirun_then_cached_rerun(server: ScriptedServer, tmp_path: Path) -> None:
    args = [
        "-m",
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "judge.api_key_env=QWEN_API_KEY",
        "mode=independent,comparative,pairwise",
        "limit=2",
        "n_samples=2",
    ]
    env = {"QWEN_API_KEY": PLANTED}
    first = run([*args, f"hydra.sweep.dir={tmp_path / 'a'}"], tmp_path, env)
    assert first.returncode == 0, first.stderr[-2000:]
    n_first = len(server.requests)
    tables = {p.parent.name: pd.read_parquet(p) for p in sorted((tmp_path / "a").glob("*/results.parquet"))}
    assert sorted(tables) == [
        "0_qwen_independent_novelty",
        "1_qwen_comparative_novelty",
        "2_qwen_pairwise_pairwise",
    ]
    ind, cmp_, pw = tables.values()
    for table in tables.values():
        assert list(table.columns) == COLUMNS and table["parse_ok"].all()
    # 2 instances x 11 candidates x 2 samples x 3 dimensions
    assert len(ind) == 2 * 11 * 2 * 3 and ind["position"].isna().all()
    # the paper's comparative prompts: per instance, one per generator with the reference and its 5 candidates
    assert len(cmp_) == 2 * 2 * 6 * 2 * 3
    per_prompt = cmp_[cmp_.dimension == "originality"].groupby(["prompt_id", "sample_idx"])
    assert len(per_prompt) == 2 * 2 * 2
    assert all(sorted(g["position"]) == list(range(6)) for _, g in per_prompt)
    assert all(
        sorted(g["source"].unique()) in (["narrow_gen", "reference"], ["broad_gen", "reference"])
        for _, g in per_prompt
    )
    assert set(cmp_["label"]) == {f"Q{i}" for i in range(1, 7)}
    assert cmp_["higher_is_better"].all() and not cmp_["salvaged"].any()
    assert len(pw) == 2 * 10 * 2 * 2 and set(pw["preference"]) <= {"a", "b", "tie"}
    assert pw["inconsistent"].notna().all()
    assert n_first == (22 + 4 + 40) * 2  # prompts x samples, no retries
    for folder, table in zip(sorted((tmp_path / "a").glob("*_qwen_*")), tables.values(), strict=True):
        prompts = pd.read_parquet(folder / "prompts.parquet")  # every results row leads to its prompt
        assert set(table["prompt_id"]) == set(prompts["prompt_id"]) and prompts["prompt_id"].is_unique
        sent = {json.dumps(r["messages"]) for r in server.requests}
        assert all(json.dumps(json.loads(m)) in sent for m in prompts["messages"])
    manifest = json.loads((tmp_path / "a" / "0_qwen_independent_novelty" / "manifest.json").read_text())
    assert manifest["calls_made"] == 44 and manifest["calls_cached"] == 0 and manifest["parse_rate"] == 1.0

    again = run([*args, f"hydra.sweep.dir={tmp_path / 'b'}"], tmp_path, env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert len(server.requests) == n_first
    for path in sorted((tmp_path / "b").glob("*/manifest.json")):
        m = json.loads(path.read_text())
        assert m["calls_made"] == 0 and m["calls_cached"] == m["calls_total"] > 0
    replay = pd.read_parquet(tmp_path / "b" / "1_qwen_comparative_novelty" / "results.parquet")
    cols = ["candidate_id", "dimension", "sample_idx", "score", "position", "label"]
    pd.testing.assert_frame_equal(replay[cols], cmp_[cols])

    # results.csv (written by Arrow's CSV writer) reads back, through the analysis loader, as the parquet does
    folders = sorted((tmp_path / "a").glob("*_qwen_*"))
    assert len(folders) == 3
    for folder in folders:
        from_csv, from_parquet = (load_results(folder / f"results.{kind}") for kind in ("csv", "parquet"))
        assert from_csv["score"].dtype == from_parquet["score"].dtype == "float64"  # "2" in the CSV is 2.0
        assert from_csv["cost_usd"].dtype == from_parquet["cost_usd"].dtype
        assert from_parquet["raw"].str.startswith("{").all()  # the loader keeps each answer as received
        as_values = [f.astype(object).where(f.notna(), None) for f in (from_csv, from_parquet)]  # one null
        pd.testing.assert_frame_equal(*as_values, check_dtype=False)

    # the planted key is nowhere on disk: outputs, cache, configs
    for path in [*tmp_path.rglob("*")]:
        if path.is_file():
            assert PLANTED.encode() not in path.read_bytes(), path
    assert PLANTED not in first.stderr + first.stdout + again.stderr + again.stdout


def test_unknown_judge_is_one_line(tmp_path: Path) -> None:
    out = run(["judge=nope"], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert "judge=nope: unknown judge; choose one of:" in out.stderr and "gpt-4o" in out.stderr


def test_missing_api_key_writes_nothing(tmp_path: Path) -> None:
    out = run(["judge=gpt-4o", "hydra.run.dir=run"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().endswith(
        "error: judge=gpt-4o: the environment variable OPENAI_API_KEY is not set (API key)"
    )
    assert not (tmp_path / "run").exists()


def test_invalid_dataset_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x", "background": [], "candidates": []}\n{not json\n')
    out = run([f"dataset.path={bad}", "hydra.run.dir=run"], tmp_path)
    assert out.returncode == 2
    assert f"{bad}:2:" in out.stderr
    assert not (tmp_path / "run").exists()


def test_mode_rubric_mismatch(tmp_path: Path) -> None:
    out = run(["mode=independent", "rubric=pairwise", "hydra.run.dir=run"], tmp_path)
    assert (
        out.returncode == 2
        and "rubric=pairwise: mode=independent needs a scores rubric; pairwise asks for preference"
        in out.stderr
    )
