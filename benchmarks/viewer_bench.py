"""Time the study viewer's queries (analysis.view.data, DuckDB over parquet) on ~1,000,000 results rows.

    python benchmarks/viewer_bench.py [--instances 1111] [--repeat 5]
    python benchmarks/viewer_bench.py --start [--base OLD_CHECKOUT] [--instances 811] [--repeat 3]

The table is analysis_bench's (instances × 10 candidates × 5 dimensions × 3 samples × 3 judges × 2 modes;
1111 instances → 999,900 rows) plus a `raw` answer per sample, written as one results.parquet per judge ×
mode like a multirun. Timed: opening the study and its first page (what `python -m analysis.view` does
before it serves), the background build that sorting by disagreement waits for, a filtered page, a filtered + disagreement-sorted page, a deep page, and an item page.
Baseline, measured in the same run: pandas reading every parquet file whole (what a page would cost if it
loaded the table). Issue 13's goal: 1M rows open in < 2 s.

`--start`: process start to `GET /` answered (`python -m analysis.view STUDY --port 0 --no-browser` in a fresh
process; wall, and the server's CPU read from /proc when the page has come), on the study and on a 3-instance
one, alternating this checkout's first open (no sidecar), its reopen (the sidecar of an earlier open) and
`--base` (a checkout of the code to compare with, e.g. `git archive main | tar -x -C /tmp/base`), each round
in that order; medians and the ratios to the base (issue 35: < 2 s at RQ-Bench's full size, 731,340 rows).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from analysis_bench import build  # the same table (run as a script: benchmarks/ is on sys.path)

from analysis.view.data import INDEX_DIR, Study

CODE = Path(__file__).resolve().parent.parent


def write_study(root: Path, instances: int) -> int:
    """The benchmark table as one parquet file per judge × mode; returns the number of rows."""
    frame = build(instances)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    frame["raw"] = '{"originality": ' + frame["sample_idx"].astype(str) + ', "gap_addressing": 2}'
    for (judge, mode), part in frame.groupby(["judge", "mode"]):
        (root / f"{judge}-{mode}").mkdir(parents=True)
        part.to_parquet(root / f"{judge}-{mode}" / "results.parquet", index=False)
    return len(frame)


def timed(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of `repeat` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cpu_s(pid: int) -> float:
    """The process's user + system CPU so far, all threads (Linux /proc); NaN elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def first_page(code: Path, study: Path) -> tuple[float, float, bool]:
    """(wall s, CPU s, pending) from starting the viewer of `code` on `study` to its first page answered."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    command = [sys.executable, "-m", "analysis.view", str(study), "--port", "0", "--no-browser"]
    start = time.perf_counter()
    server = subprocess.Popen(
        command, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        url = line.split(": ", 1)[1].split()[0]  # "judgescope viewer for ROOT: URL  (Ctrl-C to stop)"
        body = urllib.request.urlopen(url, timeout=600).read().decode()
        wall, cpu = time.perf_counter() - start, _cpu_s(server.pid)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    return wall, cpu, 'id="pending"' in body


def start_to_first_page(root: Path, instances: int, repeat: int, base: Path | None) -> None:
    """The `--start` table: first open, reopen (sidecar) and the base, alternated, on a large and a small study."""
    for name, n in ((f"{instances} instances", instances), ("3 instances", 3)):
        study = root / f"start-{n}"
        rows = write_study(study, n)
        times: dict[str, list[tuple[float, float, bool]]] = {
            "first open": [],
            "reopen (sidecar)": [],
            "base": [],
        }
        for _ in range(repeat):
            shutil.rmtree(study / INDEX_DIR, ignore_errors=True)
            times["first open"].append(first_page(CODE, study))
            with Study(study) as opened:  # the sidecar an earlier open keeps once its build is done
                opened.wait()
            times["reopen (sidecar)"].append(first_page(CODE, study))
            if base is not None:
                times["base"].append(first_page(base, study))
        print(f"{name}: {rows:,} rows, median of {repeat}, load average {os.getloadavg()[0]:.1f}")
        base_wall = statistics.median(t[0] for t in times["base"]) if times["base"] else float("nan")
        base_cpu = statistics.median(t[1] for t in times["base"]) if times["base"] else float("nan")
        for case, runs in times.items():
            if not runs:
                continue
            wall, cpu = statistics.median(t[0] for t in runs), statistics.median(t[1] for t in runs)
            pending = sum(t[2] for t in runs)
            print(
                f"  {case:<18} wall {wall:6.2f} s ({wall / base_wall:4.2f}x base)  CPU {cpu:6.2f} s "
                f"({cpu / base_cpu:4.2f}x base)  first page in item order (pending): {pending}/{len(runs)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1111)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--start", action="store_true", help="time process start to the first page")
    parser.add_argument("--base", type=Path, help="--start: a checkout of the code to compare with")
    args = parser.parse_args()
    if args.start:
        with tempfile.TemporaryDirectory() as tmp:
            start_to_first_page(Path(tmp), args.instances, args.repeat, args.base)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n_rows = write_study(root, args.instances)
        files = sorted(root.rglob("results.parquet"))
        baseline = timed(
            lambda: pd.concat([pd.read_parquet(p) for p in files], ignore_index=True), args.repeat
        )
        opens, builds = [], []
        for _ in range(max(1, args.repeat // 2)):
            start = time.perf_counter()
            study = Study(root, index=False)  # a first open each time: no sidecar read or kept
            study.page({})
            opens.append(time.perf_counter() - start)
            study.wait()  # every item's disagreements, built in the background behind the first page
            builds.append(time.perf_counter() - start)
        open_s, build_s = statistics.median(opens), statistics.median(builds)
        first = study.page({}).rows[0]
        cases = {
            "first page (already open)": lambda: study.page({}),
            "filter judge + mode": lambda: study.page({"judge": "gemini", "mode": "comparative"}),
            "filter dimension, sort by spread": lambda: study.page({"dimension": "originality"}, "spread"),
            "sort by judge-judge": lambda: study.page({}, "judge_judge"),
            "page 1,000 (offset 50,000)": lambda: study.page({}, "item", offset=50_000),
            "item page rows": lambda: study.item_rows(first["instance_id"], first["candidate_id"]),
        }
        print(
            f"{n_rows:,} rows in {len(files)} parquet files; {platform.python_version()}, "
            f"{platform.machine()}, median of {args.repeat}"
        )
        print(f"baseline: pandas reads every file whole       {baseline:7.3f} s")
        print(
            f"open study + first page                      {open_s:7.3f} s  ({open_s / baseline:5.2f}x baseline)"
        )
        print(
            f"  + disagreements of every item (background) {build_s:7.3f} s  ({build_s / baseline:5.2f}x baseline)"
        )
        for name, fn in cases.items():
            seconds = timed(fn, args.repeat)
            print(f"{name:<44} {seconds:7.3f} s  ({seconds / baseline:5.3f}x baseline)")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of the process (table build included): {peak:,.0f} MB")


if __name__ == "__main__":
    main()
