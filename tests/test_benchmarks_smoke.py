"""benchmarks/rqbench_scale.py still runs end to end: a 3-instance study (and its 1-instance tenth) through
plan, batch against the local batch server, replay from the cache, report and the viewer's first page."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import cli, fork_python

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def scale() -> ModuleType:
    """benchmarks/rqbench_scale.py as a module: its argument checks and table run in-process (the script's own
    start-up imports pandas, aiohttp and the project: seconds per refusal in a fresh interpreter)."""
    spec = importlib.util.spec_from_file_location("rqbench_scale", ROOT / "benchmarks" / "rqbench_scale.py")
    assert spec and spec.loader
    module = sys.modules["rqbench_scale"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Interpreter:
    """`sys` as benchmarks/rqbench_scale.py sees it, with `executable` the fork server's stand-in."""

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)


def _main(scale: ModuleType, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = scale.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
def test_rqbench_scale_runs_every_step_at_a_tiny_fraction_and_reuses_its_cache(
    scale: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Every step once at 3 instances (the 1/10 run is the same code at 1 instance: `table` below covers the
    ratios), then `--reuse` replays that run's cache with a server on the same port, no call reaching it.

    The script's `main` runs here (its start-up imports pandas, aiohttp and the project) and its `python -m`
    steps are forked from the fork server through a stand-in `sys.executable` (tests.support.fork_python): each
    is still its own child process the script starts, waits for and signals, but pays for its work, not for
    importing litellm, scipy and Hydra again (most of a plan, batch or replay step's ~15 CPU-s). Its `-c` and
    script steps (imports, analysis) run fresh; so does every step with JUDGESCOPE_TEST_FRESH=1 or without a
    fork server, and as a user runs the script."""
    cpu_log = tmp_path / "forked_cpu.txt"
    forked = cli.forkable([sys.executable, "-m", "experiments.run"], scale._env(tmp_path / "cache"))
    try:
        server = cli.SERVER.address() if forked else ""
    except (OSError, RuntimeError):  # no fork server: every step runs fresh, as a user runs them
        forked = False
    if forked:
        monkeypatch.setattr(scale, "sys", _Interpreter(str(fork_python.stand_in(tmp_path, server, cpu_log))))
    out = tmp_path / "scale"
    try:
        status, stdout, stderr = _main(
            scale, capsys, "--fraction", str(3 / 1434), "--out", str(out), "--no-tenth"
        )
        assert status == 0, stderr[-3000:]
        # 3 instances x (16 candidates judged alone + 3 comparative prompts, one per generator) x 3 samples x 2 rubrics
        assert "calls: 342 at n=3, 0 at n=1" in stdout
        rows = {line.split()[0]: line for line in stdout.splitlines() if line.split()}
        for step in ("plan", "batch", "replay", "report", "viewer"):
            assert step in rows, stdout
            assert rows[step].split()[1] == "3" and rows[step].split()[5] == "-"
        assert "0 live calls" in rows["batch"] and "GET / " in rows["viewer"]
        record = json.loads((out / "rqbench_scale.json").read_text())
        assert [s["name"] for s in record["size"]] == [
            *("plan", "batch", "replay", "report", "viewer"),
            *("imports", "report_small", "cards_small", "analysis"),  # issue 35
        ]
        assert record["tenth"] == []
        assert "60 rows" in rows["report_small"] and "x imports" in rows["cards_small"]
        assert "20,700 rows" in rows["analysis"]  # analysis_bench at 23 instances (3 x 11,110 / 1,434)
        assert all(s["wall_s"] > 0 and s["cpu_s"] > 0 and s["peak_mib"] > 0 for s in record["size"])
        assert (out / "n3" / "report" / "report.md").exists()

        reuse = ("--fraction", str(3 / 1434), "--reuse", str(out), "--no-tenth", "--steps", "plan,replay")
        status, stdout, stderr = _main(scale, capsys, *reuse)
        assert status == 0, stderr[-3000:]  # the script fails if any replayed call reaches the server
        replayed = {line.split()[0]: line for line in stdout.splitlines() if line.split()}
        assert "judgments/s" in replayed["replay"] and "batch" not in replayed
        assert "calls: 342 at n=3" in stdout and "342 already cached" in replayed["plan"]  # was 0 calls
        assert len(list(out.glob("rqbench_scale-*.json"))) == 1 and (out / "rqbench_scale.json").exists()
        # the stand-in forked the 7 `python -m` steps, then the reuse run's plan and replay
        assert not forked or len(cpu_log.read_text().split()) == 9
    finally:
        cli.FORKED_CPU[0] += fork_python.forked_cpu(cpu_log)  # the CPU log counts the forked steps


def test_the_scale_table_gives_growth_ratios_and_flags_more_than_12x(scale: ModuleType) -> None:
    size = [
        scale.Step("plan", 30, 24.0, 12.0, 400.0, "3,420 calls"),
        scale.Step("replay", 30, 130.0, 10.0, 300.0),
    ]
    tenth = [scale.Step("plan", 3, 12.0, 6.0, 200.0), scale.Step("replay", 3, 10.0, 5.0, 150.0)]
    lines = scale.table(size, tenth).splitlines()
    assert lines[2].split()[1:] == [
        *("30", "24.00", "12.00", "400", "3", "12.00", "6.00", "200", "2.00", "2.00", "2.00"),
        *("<", "60", "s", "3,420", "calls"),
    ]
    assert lines[3].endswith("(> 12x)") and not lines[2].endswith("x)")
    assert scale.table(size, []).splitlines()[2].split()[5:12] == ["-"] * 7


def _refused(scale: ModuleType, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        status = scale.main(list(args))
    except SystemExit as exc:  # argparse's own refusals
        status = int(exc.code or 0)
    return status, capsys.readouterr().err.strip().splitlines()[-1]


def test_rqbench_scale_refuses_a_bad_fraction(
    scale: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    refused = _refused(scale, capsys, "--fraction", "2", "--out", str(tmp_path))
    assert refused == (2, "error: --fraction 2.0: must be in (0, 1]")


@pytest.mark.parametrize(
    ("steps", "message"),
    [("replay", "replay needs batch; replay needs plan"), ("plan,foo", "unknown step(s) foo")],
)
def test_rqbench_scale_refuses_steps_without_what_they_need(
    scale: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path, steps: str, message: str
) -> None:
    status, line = _refused(scale, capsys, "--steps", steps, "--out", str(tmp_path))
    assert status == 2 and message in line


def test_rqbench_scale_refuses_a_reuse_folder_without_a_batch_run(
    scale: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ("--fraction", str(3 / 1434), "--reuse", str(tmp_path), "--no-tenth", "--steps", "plan,replay")
    assert _refused(scale, capsys, *args) == (
        1,
        f"error: --reuse: {tmp_path / 'n3'} has no cache/ and sweep/ from an earlier batch step",
    )
    assert _refused(scale, capsys, "--reuse", str(tmp_path), "--out", str(tmp_path)) == (
        2,
        "error: --reuse and --out: give one (a reused folder keeps its outputs)",
    )
