"""benchmarks/rqbench_scale.py still runs end to end: a 3-instance study (and its 1-instance tenth) through
plan, batch against the local batch server, replay from the cache, report and the viewer's first page."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_rqbench_scale_runs_every_step_at_a_tiny_fraction(tmp_path: Path) -> None:
    out = tmp_path / "scale"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "rqbench_scale.py"),
            "--fraction",
            str(3 / 1434),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # 3 instances x (16 candidates judged alone + 3 comparative prompts, one per generator) x 3 samples x 2 rubrics
    assert "calls: 342 at n=3, 114 at n=1" in proc.stdout
    rows = {line.split()[0]: line for line in proc.stdout.splitlines() if line.split()}
    for step in ("plan", "batch", "replay", "report", "viewer"):
        assert step in rows, proc.stdout
        assert rows[step].split()[1] == "3" and rows[step].split()[5] == "1"
    assert "0 live calls" in rows["batch"] and "GET / " in rows["viewer"]
    record = json.loads((out / "rqbench_scale.json").read_text())
    assert [s["name"] for s in record["size"]] == [
        *("plan", "batch", "replay", "report", "viewer"),
        *("imports", "report_small", "cards_small", "analysis"),  # issue 35
    ]
    assert "60 rows" in rows["report_small"] and "x imports" in rows["cards_small"]
    assert "20,700 rows" in rows["analysis"]  # analysis_bench at 23 instances (3 x 11,110 / 1,434)
    assert all(
        s["wall_s"] > 0 and s["cpu_s"] > 0 and s["peak_mib"] > 0 for s in record["size"] + record["tenth"]
    )
    assert (out / "n3" / "report" / "report.md").exists()


def test_rqbench_scale_refuses_a_bad_fraction(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "rqbench_scale.py"),
            "--fraction",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == "error: --fraction 2.0: must be in (0, 1]"


@pytest.mark.parametrize(
    ("steps", "message"),
    [("replay", "replay needs batch; replay needs plan"), ("plan,foo", "unknown step(s) foo")],
)
def test_rqbench_scale_refuses_steps_without_what_they_need(tmp_path: Path, steps: str, message: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "rqbench_scale.py"),
            "--steps",
            steps,
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and message in proc.stderr.strip().splitlines()[-1]
