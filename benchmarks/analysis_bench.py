"""Time the report's computations (no plotting) on a ~1,000,000-row results table.

    python benchmarks/analysis_bench.py [--instances 1111] [--n-boot 1000] [--naive-instances 111]
    python benchmarks/analysis_bench.py --instances 11111 --parquet DIR   # 10M rows, read as a study is

With `--parquet DIR` the table is written there first (by a child process: one results.parquet per judge x
mode, string columns and a `raw` answer per sample, as a run writes them) and then read as `analysis.report.build`
reads a study (`analysis.load.collect.load_results`: only the analysis columns of each parquet file, strings as
categoricals), so the timing and peak RSS are those of loading + all tables, without the table's build.

Table: instances × 10 candidates (reference + 3 generators × 3) × 5 dimensions × 3 samples × 3 judges ×
2 modes (1111 instances → 999,900 rows), plus 3 annotators' labels on the first 300 instances. Prints
rows/s and peak memory (max RSS of the process), and the baseline: a naive per-group Python loop for
candidate scores → best-of-K → win/tie/loss with a bootstrap (one index draw per replicate), against
`win_tie_loss` on the same rows (all of them unless --naive-instances).
Goal (issue 4): all tables for 1M rows in < 20 s and < 3 GB.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import random
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.collect import load_results
from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report.build import compute_tables
from analysis.stats.winrate import win_tie_loss
from analysis.tables.registry import REGISTRY, StudyInputs
from core.intervals import positive_int

DIMENSIONS = ("originality", "gap_addressing", "non_obviousness", "source_boundedness", "specificity")


def build(instances: int, seed: int = 0) -> pd.DataFrame:
    """The benchmark table (categorical string columns, as analysis.load.collect.load_results returns)."""
    return synthetic_results(
        n_instances=instances,
        generators=("narrow_gen", "broad_gen", "gpt-5"),
        k=3,
        dimensions=DIMENSIONS,
        judges=("gpt-4o", "gemini", "deepseek"),
        models=("openai/gpt-4o", "gemini/gemini-2.5-pro", "deepseek/deepseek-chat"),
        n_samples=3,
        shift=0.5,
        unscored=0.02,
        seed=seed,
    )


def naive_win_tie_loss(results: pd.DataFrame, n_boot: int, seed: int = 0) -> dict:
    """The baseline: dictionaries and Python loops, one bootstrap index draw per replicate and group."""
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0])
    cols = [
        "judge",
        "mode",
        "instance_id",
        "candidate_id",
        "source",
        "dimension",
        "score",
        "higher_is_better",
    ]
    lower = set()
    for j, m, i, c, s, d, score, higher in results[cols].itertuples(index=False, name=None):
        if not higher:
            lower.add(d)
        if score == score:  # not NaN
            acc = sums[(j, m, i, c, s, d)]
            acc[0] += score
            acc[1] += 1
    best: dict[tuple, float] = {}
    for (j, m, i, _c, s, d), (total, count) in sums.items():
        sign = -1.0 if d in lower else 1.0
        value = sign * total / count
        key = (j, m, i, s, d)
        best[key] = max(best.get(key, -np.inf), value)
    outcomes: dict[tuple, list[int]] = defaultdict(list)
    for (j, m, i, s, d), value in best.items():
        ref = best.get((j, m, i, "reference", d))
        if s != "reference" and ref is not None:
            outcomes[(j, m, s, d)].append(1 if value > ref + 1e-9 else (-1 if value < ref - 1e-9 else 0))
    rng = random.Random(seed)
    table = {}
    for key, values in outcomes.items():
        n = len(values)
        wins = sorted(sum(v == 1 for v in rng.choices(values, k=n)) / n for _ in range(n_boot))
        table[key] = (
            sum(v == 1 for v in values) / n,
            wins[int(0.025 * n_boot)],
            wins[int(0.975 * n_boot) - 1],
        )
    return table


def write_parquet(root: Path, instances: int) -> int:
    """The benchmark table as a study's files: one results.parquet per judge x mode (strings, not
    categoricals, and a `raw` answer per sample, as `experiments.study` writes them); returns the rows."""
    frame = build(instances)
    frame["raw"] = '{"originality": ' + frame["sample_idx"].astype(str) + ', "gap_addressing": 2}'
    rows = len(frame)
    for (judge, mode), part in frame.groupby(["judge", "mode"], observed=True):
        part = part.astype({c: str for c in part.columns if isinstance(part[c].dtype, pd.CategoricalDtype)})
        (root / f"{judge}-{mode}").mkdir(parents=True)
        part.to_parquet(root / f"{judge}-{mode}" / "results.parquet", index=False)
    return rows


def from_parquet(root: Path, instances: int, n_boot: int, per_table: bool = False, profile: int = 0) -> None:
    """Write the study (child process, so its build does not count in this process's peak RSS), then load it
    as the report does and compute every table; `per_table`: each table's wall and CPU time (a quantity several
    tables share counts in the first that asks for it); `profile`: cProfile's top functions by own time."""
    if not any(root.rglob("results.parquet")):
        t0 = time.perf_counter()
        script = [sys.executable, __file__, "--instances", str(instances), "--write", str(root)]
        subprocess.run(script, check=True)
        print(f"wrote {root} in {time.perf_counter() - t0:.1f} s")
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    results = load_results(root)
    load_s, load_cpu, rss_loaded = time.perf_counter() - t0, time.process_time() - c0, _peak_mb()
    humans = synthetic_humans(results.loc[results["instance_id"].cat.codes.to_numpy() < 300])
    profiler = cProfile.Profile() if profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    tables, times = (
        timed_tables(results, humans, n_boot)
        if per_table
        else (compute_tables(results, humans, n_boot=n_boot), [])
    )
    if profiler:
        profiler.disable()
    report_s, report_cpu, rss_peak = time.perf_counter() - t0, time.process_time() - c0, _peak_mb()
    n = len(results)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at the end; python {platform.python_version()}, pandas {pd.__version__}"
    )
    print(
        f"rows: {n:,} from {len(list(root.rglob('results.parquet')))} parquet files "
        f"(+{len(humans):,} human labels); n_boot = {n_boot}"
    )
    print("| what | rows | wall s | CPU s | rows/s | peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    print(
        f"| load (load_results) | {n:,} | {load_s:.2f} | {load_cpu:.2f} | {n / load_s:,.0f} | {rss_loaded:,.0f} |"
    )
    print(
        f"| all {len(tables)} report tables | {n:,} | {report_s:.2f} | {report_cpu:.2f} | {n / report_s:,.0f} "
        f"| {rss_peak:,.0f} |"
    )
    total = load_s + report_s
    print(
        f"| load + all tables | {n:,} | {total:.2f} | {load_cpu + report_cpu:.2f} | {n / total:,.0f} "
        f"| {rss_peak:,.0f} |"
    )
    if times:
        print("\n| table | wall s | CPU s | share of tables' CPU |\n|---|---|---|---|")
        for key, wall, cpu in sorted(times, key=lambda t: -t[2]):
            print(f"| {key} | {wall:.2f} | {cpu:.2f} | {cpu / report_cpu:.0%} |")
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile)


def timed_tables(
    results: pd.DataFrame, humans: pd.DataFrame, n_boot: int
) -> tuple[dict, list[tuple[str, float, float]]]:
    """`compute_tables`' loop (`analysis.tables.registry.compute_tables`) with each table's wall and CPU time."""
    inputs = StudyInputs(results, humans, n_boot=n_boot)
    tables: dict = {}
    times = []
    for spec in [s for s in REGISTRY if s.report]:
        t0, c0 = time.perf_counter(), time.process_time()
        table = spec.compute(inputs, tables)
        times.append((spec.key, time.perf_counter() - t0, time.process_time() - c0))
        if table is not None:
            tables[spec.key] = table
    return tables, times


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1111)
    parser.add_argument("--n-boot", type=positive_int, default=1000)
    parser.add_argument("--naive-instances", type=int, default=None, help="baseline on the first N instances")
    parser.add_argument("--parquet", type=Path, help="write the study here as parquet files and read it back")
    parser.add_argument(
        "--per-table", action="store_true", help="with --parquet: each table's wall and CPU time"
    )
    parser.add_argument("--profile", type=int, default=0, help="with --parquet: cProfile's top N functions")
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)  # the child of --parquet
    args = parser.parse_args()
    if args.write:
        print(f"{write_parquet(args.write, args.instances):,} rows written to {args.write}")
        return
    if args.parquet:
        from_parquet(args.parquet, args.instances, args.n_boot, args.per_table, args.profile)
        return
    load = os.getloadavg()[0]

    t0 = time.perf_counter()
    results = build(args.instances)
    humans = synthetic_humans(results.loc[results["instance_id"].cat.codes.to_numpy() < 300])
    build_s, rss_data = time.perf_counter() - t0, _peak_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    tables = compute_tables(results, humans, n_boot=args.n_boot)
    report_s, report_cpu, rss_peak = time.perf_counter() - t0, time.process_time() - c0, _peak_mb()

    limit = args.naive_instances if args.naive_instances is not None else args.instances
    subset = results.loc[results["instance_id"].cat.codes.to_numpy() < limit]
    t0 = time.perf_counter()
    win_tie_loss(subset, n_boot=args.n_boot)
    vec_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive_win_tie_loss(subset, args.n_boot)
    naive_s = time.perf_counter() - t0

    n, m = len(results), len(subset)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.1f} at start; "
        f"python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}"
    )
    print(f"rows: {n:,} (+{len(humans):,} human labels), built in {build_s:.1f} s; n_boot = {args.n_boot}")
    print("| what | rows | wall s | rows/s |")
    print("|---|---|---|---|")
    print(
        f"| all {len(tables)} report tables, no plotting ({report_cpu:.1f} s CPU) | {n:,} | {report_s:.2f} "
        f"| {n / report_s:,.0f} |"
    )
    print(f"| win_tie_loss, vectorised | {m:,} | {vec_s:.2f} | {m / vec_s:,.0f} |")
    print(f"| win/tie/loss, naive per-group Python loop | {m:,} | {naive_s:.2f} | {m / naive_s:,.0f} |")
    print(f"baseline ratio (naive / vectorised win/tie/loss): {naive_s / vec_s:,.0f}x")
    print(f"peak RSS: {rss_data:,.0f} MiB with the table built, {rss_peak:,.0f} MiB after all tables")


if __name__ == "__main__":
    main()
