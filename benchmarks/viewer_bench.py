"""Time the study viewer's queries (analysis.view.data, DuckDB over parquet) on ~1,000,000 results rows.

    python benchmarks/viewer_bench.py [--instances 1111] [--repeat 5]

The table is analysis_bench's (instances × 10 candidates × 5 dimensions × 3 samples × 3 judges × 2 modes;
1111 instances → 999,900 rows) plus a `raw` answer per sample, written as one results.parquet per judge ×
mode like a multirun. Timed: opening the study and its first page (what `python -m analysis.view` does
before it serves), the background build that sorting by disagreement waits for, a filtered page, a filtered + disagreement-sorted page, a deep page, and an item page.
Baseline, measured in the same run: pandas reading every parquet file whole (what a page would cost if it
loaded the table). Issue 13's goal: 1M rows open in < 2 s.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from analysis_bench import build  # the same table (run as a script: benchmarks/ is on sys.path)

from analysis.view.data import Study


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1111)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
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
            study = Study(root)
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
