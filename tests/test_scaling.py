"""Scaling out: sharded studies, sweeps on Hydra's joblib and submitit_local launchers, one shared cache.

Every study talks to a local OpenAI-compatible server (`tests.support.openai_server`, real HTTP through litellm) whose
answers depend on the prompt only, so a sharded and an unsharded study must agree row for row.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import diskcache
import pandas as pd
import pytest

from analysis.load.collect import load_results
from analysis.load.shards import ShardMergeError
from analysis.report.build import main as report_main
from experiments.inputs import StudyError
from experiments.shard import Shard, ShardError, parse_shard, select, study_id
from judge.cache.store import CallCache
from tests.support.cli import run as run_cli
from tests.support.configs import config
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run_in_process
from tests.support.studies import typed

ROOT = Path(__file__).resolve().parent.parent
SAME = [
    "judge",
    "model",
    "mode",
    "rubric",
    "rubric_version",
    "prompt_id",
    "instance_id",
    "candidate_id",
    "source",
    "dimension",
    "sample_idx",
    "position",
    "score",
    "preference",
    "parse_ok",
    "cost_usd",
]
ORDER = ["prompt_id", "candidate_id", "dimension", "sample_idx"]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def study(server: ScriptedServer, *extra: str) -> list[str]:
    return ["judge=qwen", f"judge.api_base={server.api_base}", "mode=comparative", "n_samples=2", *extra]


def rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The judgments, in one order, with plain dtypes (categories differ between loads)."""
    out = frame[SAME].astype(object).where(frame[SAME].notna(), None)
    return out.sort_values(ORDER).reset_index(drop=True)


def sweep(args: list[str], tmp: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """`python -m experiments.run -m ...` in a subprocess that runs this worktree's code."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        {"JUDGESCOPE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-local-test"}
    )
    return run_cli(
        [sys.executable, "-m", "experiments.run", "-m", *args, "progress=false"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )


def test_shard_spec_and_split() -> None:
    assert parse_shard(None) is None and parse_shard("") is None
    assert parse_shard("1/4") == Shard(1, 4) and str(parse_shard(" 3 / 4 ")) == "3/4"
    for bad in ("4/4", "1/0", "a/b", "1-4", "-1/4"):
        with pytest.raises(ShardError, match=r"^shard="):
            parse_shard(bad)
    items = list(range(10))
    parts = [select(items, Shard(i, 4)) for i in range(4)]
    assert parts == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert sorted(x for p in parts for x in p) == items
    base = ["judge=qwen", "mode=comparative", "n_samples=2"]
    # the shard and how calls are made do not change the study; what is judged does
    assert study_id(typed(config([*base, "shard=0/4", "workers=1"]))) == study_id(
        typed(config([*base, "judge.concurrency=4"]))
    )
    assert study_id(typed(config(base))) != study_id(typed(config([*base, "n_samples=3"])))


def test_bad_shard_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(StudyError, match=r"^shard=5/4: need 0 <= i < n"):
        run_in_process(config(["judge=qwen", "shard=5/4"]), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_four_shards_merge_to_the_unsharded_study(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """4 shards (comparative prompts, kept whole) make exactly the unsharded study's calls and rows."""
    before = len(server.requests)
    whole, whole_manifest = run_in_process(
        config([*study(server), f"cache_dir={tmp_path / 'c1'}"]), tmp_path / "w"
    )
    unsharded_calls = len(server.requests) - before
    made = 0
    for i in range(4):
        cfg = config([*study(server), f"shard={i}/4", f"cache_dir={tmp_path / 'c2'}"])
        _, manifest = run_in_process(cfg, tmp_path / "shards" / f"{i}_study")
        assert manifest["shard"] == {"index": i, "count": 4}
        assert manifest["study_id"] == whole_manifest["study_id"]
        made += manifest["calls_made"]
    assert (
        unsharded_calls == whole_manifest["calls_made"] == made == 6 * 2 * 2
    )  # 6 instances x 2 generators x 2 samples
    assert len(server.requests) - before == 2 * unsharded_calls
    merged = load_results(tmp_path / "shards")
    assert list(merged["run_id"].unique()) == ["0_study"]  # one study under the first shard's run id
    pd.testing.assert_frame_equal(rows(merged), rows(load_results(tmp_path / "w")))
    assert len(merged) == len(whole) == 6 * 12 * 2 * 3  # 2 prompts of 6 items per instance

    # a missing shard, a repeated one, or a shard of another config: refused with one line
    shutil.move(tmp_path / "shards" / "3_study", tmp_path / "aside")
    with pytest.raises(ShardMergeError, match=r"missing shard\(s\) 3/4$"):
        load_results(tmp_path / "shards")
    other = config([*study(server), "shard=3/4", "n_samples=1", f"cache_dir={tmp_path / 'c2'}"])
    run_in_process(other, tmp_path / "shards" / "3_other")
    with pytest.raises(
        ShardMergeError, match=r"cannot merge the shards of study .*other configs here: 3_other"
    ):
        load_results(tmp_path / "shards")
    shutil.rmtree(tmp_path / "shards" / "3_other")
    shutil.copytree(tmp_path / "aside", tmp_path / "shards" / "3_study")
    shutil.copytree(tmp_path / "aside", tmp_path / "shards" / "3_again")
    with pytest.raises(ShardMergeError, match=r"shard 3/4 twice"):
        load_results(tmp_path / "shards")
    assert report_main([str(tmp_path / "shards")]) == 2  # the report says so in one line, no traceback
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "shard 3/4 twice" in err and "\n" not in err


def check_shared_cache(cache_dir: Path, expected: int) -> None:
    """Every entry of a cache that parallel jobs wrote reads back whole (none damaged)."""
    with diskcache.Cache(str(cache_dir)) as raw:
        keys = list(raw.iterkeys())
    assert len(keys) == expected
    cache = CallCache(cache_dir)
    try:
        assert all(cache.get(k) is not None for k in keys) and cache.damaged == 0
    finally:
        cache.close()


KEY = "sk-launcher-planted-0123456789abcdef"
HEADER_KEY = "sk-header-planted-fedcba9876543210"


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_sharded_sweep_on_a_launcher(launcher: str, server: ScriptedServer, tmp_path: Path) -> None:
    """`-m shard=0/2,1/2` on a parallel launcher: two jobs at once, own folders, one shared cache, and the
    merged shards equal the unsharded study (run here, in-process, with a cache of its own). The sweep carries
    keys in its api_base and a header: the job processes, submitit's pickled jobs and logs hold none (the
    override carries `${oc.env:...}`, the value travels in the environment)."""
    keyed = [
        f"judge.api_base='{server.api_base}?key={KEY}'",
        "judge.api_key_env=null",
        f"+judge.extra.headers={{X-Api-Key:{HEADER_KEY}}}",
    ]
    before = len(server.requests)
    out = sweep(
        [
            f"hydra/launcher={launcher}",
            *study(server),
            *keyed,
            "shard=0/2,1/2",
            f"hydra.sweep.dir={tmp_path / 'sw'}",
        ],
        tmp_path,
        tmp_path / "shared",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    folders = sorted(p.name for p in (tmp_path / "sw").glob("*_qwen_*"))
    assert folders == ["0_qwen_comparative_novelty", "1_qwen_comparative_novelty"]
    manifests = [json.loads((tmp_path / "sw" / f / "manifest.json").read_text()) for f in folders]
    assert sum(m["calls_made"] for m in manifests) == len(server.requests) - before == 24
    assert launcher == "joblib" or any((tmp_path / "sw" / ".submitit").rglob("*_submitted.pkl"))
    assert KEY not in out.stdout + out.stderr and HEADER_KEY not in out.stdout + out.stderr
    check_shared_cache(tmp_path / "shared", 24)
    whole, _ = run_in_process(
        config([*study(server), *keyed, f"cache_dir={tmp_path / 'shared'}"]), tmp_path / "w"
    )
    assert len(server.requests) - before == 24  # the unsharded study is all in the shards' shared cache
    pd.testing.assert_frame_equal(rows(load_results(tmp_path / "sw")), rows(load_results(tmp_path / "w")))
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):  # the sweep's and the in-process run's files
        assert KEY.encode() not in path.read_bytes() and HEADER_KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_sharded_sweep_on_ray(server: ScriptedServer, tmp_path: Path) -> None:
    """`hydra/launcher=ray` on a local Ray instance. hydra-ray-launcher pins cloudpickle 2.2.1, which the joblib
    launcher's joblib>=1.5 refuses, so it is not in `.[dev]`; run it in an environment of its own:
    `python -m venv --system-site-packages .venv-ray && .venv-ray/bin/pip install -e '.[ray]' &&
    .venv-ray/bin/python -m pytest -q tests/test_scaling.py -k ray`."""
    pytest.importorskip(
        "hydra_plugins.hydra_ray_launcher", reason="pip install -e '.[ray]' (see the docstring)"
    )
    before = len(server.requests)
    out = sweep(
        [
            "hydra/launcher=ray",
            "+hydra.launcher.ray.init.num_cpus=2",
            *study(server),
            "shard=0/2,1/2",
            f"hydra.sweep.dir={tmp_path / 'sw'}",
        ],
        tmp_path,
        tmp_path / "shared",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(server.requests) - before == 12
    check_shared_cache(tmp_path / "shared", 12)
    whole, _ = run_in_process(config([*study(server), f"cache_dir={tmp_path / 'shared'}"]), tmp_path / "w")
    assert len(server.requests) - before == 12
    pd.testing.assert_frame_equal(rows(load_results(tmp_path / "sw")), rows(load_results(tmp_path / "w")))
