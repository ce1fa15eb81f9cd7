"""rqbench_scale --reuse: a replay of an earlier run's cache counts the calls it replays (the plan made on the
filled cache has every call cached and none to make), in process: no benchmark run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rqbench_scale", ROOT / "benchmarks" / "rqbench_scale.py")
    assert spec and spec.loader
    module = sys.modules["rqbench_scale"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_replay_on_a_reused_cache_counts_the_cached_calls() -> None:
    planned_calls = _scale().planned_calls
    fresh = {"calls_total": 342, "calls_cached": 0, "calls_shared": 0, "calls_to_make": 342}
    reused = {"calls_total": 342, "calls_cached": 342, "calls_shared": 0, "calls_to_make": 0}
    assert planned_calls(fresh) == (342, "342 calls")
    # before: 0 calls, and the replay's rate 0 / wall = '0 judgments/s' in the record
    assert planned_calls(reused) == (342, "342 calls (342 already cached)")


def test_reuse_never_runs_a_second_batch_into_the_reused_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default steps included batch: `--reuse DIR` ran the batch step again into DIR's sweep, beside the
    first run's folders, and the report and viewer steps read both runs as one study."""
    scale = _scale()
    asked: list[tuple[str, ...]] = []

    def fake_run_size(*args: object) -> tuple[list[object], int]:
        asked.append(tuple(args[3]))  # type: ignore[arg-type]
        return [], 0

    monkeypatch.setattr(scale, "run_size", fake_run_size)
    assert scale.main(["--fraction", "0.002", "--reuse", str(tmp_path), "--no-tenth"]) == 0
    assert asked == [tuple(s for s in scale.STEPS if s != "batch")]
    assert scale.main(["--reuse", str(tmp_path), "--steps", "plan,batch,replay"]) == 2
    assert "error: --steps batch with --reuse" in capsys.readouterr().err.strip().splitlines()[-1]
