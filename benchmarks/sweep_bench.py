"""Wall time of one 8-job sweep on Hydra's basic launcher (jobs one after another) vs the joblib launcher.

Every job is a real study (`python -m experiments.run -m ...`) against a local OpenAI-compatible server
(tests.support.fault_server with no faults) that answers each request after `--latency` seconds, like a remote
provider; each job gets its own seed, so all 8 make their own calls, and each sweep starts with an empty
cache. The basic launcher is the baseline measured in the same run; the script prints the ratios.

    python benchmarks/sweep_bench.py                 # 8 jobs x 22 calls, 1.0 s latency, concurrency 2
    python benchmarks/sweep_bench.py --latency 0.5 --n-jobs 2 8
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.fault_server import FaultServer  # noqa: E402


def sweep(launcher: list[str], api_base: str, jobs: int, concurrency: int, tmp: Path) -> float:
    """Seconds for one `-m seed=0..jobs-1` sweep (each job: 1 instance x 11 candidates x 2 samples)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "JUDGESCOPE_CACHE_DIR": str(tmp / "cache"),
    }
    args = [
        sys.executable,
        "-m",
        "experiments.run",
        "-m",
        *launcher,
        "judge=qwen",
        f"judge.api_base={api_base}",
        f"judge.concurrency={concurrency}",
        "limit=1",
        "n_samples=2",
        "workers=1",
        "progress=false",
        f"seed={','.join(map(str, range(jobs)))}",
        f"hydra.sweep.dir={tmp / 'sweep'}",
    ]
    tmp.mkdir(parents=True)
    started = time.perf_counter()
    out = subprocess.run(args, env=env, cwd=tmp, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"sweep failed ({' '.join(launcher) or 'basic'}):\n{out.stderr[-2000:]}")
    made = len(list((tmp / "sweep").glob("*/results.parquet")))
    if made != jobs:
        raise SystemExit(f"expected {jobs} job folders, found {made}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds the server takes per request")
    parser.add_argument("--concurrency", type=int, default=2, help="requests in flight per job")
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[2, 8], help="joblib's parallel jobs to try")
    args = parser.parse_args()
    server = FaultServer(faults={}, answers={}, latency_s=args.latency, max_seconds=3600)
    with server.running(), tempfile.TemporaryDirectory() as tmp:
        base = sweep([], server.api_base, args.jobs, args.concurrency, Path(tmp) / "basic")
        calls = server.requests
        print(
            f"{args.jobs} jobs x {calls // args.jobs} calls, server latency {args.latency:.2f} s, "
            f"concurrency {args.concurrency} per job, cores {os.cpu_count()}"
        )
        print(f"basic launcher (baseline)      {base:7.1f} s   1.00x")
        for n in args.n_jobs:
            wall = sweep(
                ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n}"],
                server.api_base,
                args.jobs,
                args.concurrency,
                Path(tmp) / f"joblib{n}",
            )
            print(f"joblib launcher, n_jobs={n:<3}     {wall:7.1f} s   speed-up {base / wall:.2f}x")
        assert server.requests == calls * (1 + len(args.n_jobs)), "every sweep makes the same calls"


if __name__ == "__main__":
    main()
