"""Start-up and small-study times of the analysis commands, as ratios to Python importing pandas, numpy, scipy
and pyarrow in the same run (issue 35, item 4).

    PYTHONPATH=. python benchmarks/startup_bench.py [--study MULTIRUN] [--repeat 3] [--code DIR ...]

Timed, each as a fresh `python` process (median of --repeat, the steps interleaved so a load change on a
shared machine hits them alike): the baseline `python -c "import pandas, numpy, scipy, pyarrow"`; `--help` of
`analysis.report`, `analysis.card`, `analysis.view` and `experiments.run`; the report and the cards on a small
study (default: the shipped sample, 2 judges × 2 modes, built once in a temporary folder by
`tests.support.studies.run_sample_study`). `--code` times other checkouts too (e.g. a `git archive` of an
older commit, for before → after in one run): each step runs with that folder first on PYTHONPATH.
`--importtime`: the slowest imports of each `--help` (`python -X importtime`). Targets (issue 35): the report
≤ 3× the baseline, the cards ≤ 5×.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import pandas, numpy, scipy, pyarrow"
HELP = ("analysis.report", "analysis.card", "analysis.view", "experiments.run")
TARGETS = {"report": 3.0, "cards": 5.0}


def steps(study: Path, humans: Path, out: Path, n_boot: int) -> dict[str, list[str]]:
    """Step name -> the arguments after `python`."""
    named = {"baseline": ["-c", BASELINE]}
    named |= {f"{m} --help": ["-m", m, "--help"] for m in HELP}
    common = [str(study), "--humans", str(humans), "--n-boot", str(n_boot)]
    named["report"] = ["-m", "analysis.report", *common, "--out", str(out / "report")]
    named["cards"] = ["-m", "analysis.card", *common, "--out", str(out / "cards")]
    return named


def env_for(code: Path, tmp: Path) -> dict[str, str]:
    """This checkout (or `code`) first on the path, no provider key, a private cache."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(code), env.get("PYTHONPATH", "")])
    env["JUDGESCOPE_CACHE_DIR"] = str(tmp / "cache")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def run_once(args: list[str], code: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one fresh process (CPU: user + system, less disturbed by other load on a
    shared machine than the wall time); a failure stops the benchmark with its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=code, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"python {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slowest_imports(module: str, code: Path, env: dict[str, str], top: int = 8) -> list[tuple[str, float]]:
    """The top-level packages `python -X importtime -m module --help` spent longest importing (cumulative s)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", module, "--help"],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
    )
    first: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith(" ") and not name.startswith("  "):  # one space: imported at the top level
            package = name.strip().split(".")[0]
            first[package] = first.get(package, 0.0) + int(cumulative) / 1e6
    return sorted(first.items(), key=lambda kv: -kv[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--study", type=Path, help="a multirun folder (default: the sample study, built here)"
    )
    parser.add_argument("--humans", type=Path, default=ROOT / "data" / "sample" / "humans.csv")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--n-boot", type=int, default=20)
    parser.add_argument("--code", type=Path, nargs="*", default=[], help="other checkouts to time as well")
    parser.add_argument("--importtime", action="store_true", help="print each --help's slowest imports")
    parser.add_argument("--json", type=Path, help="write the medians here")
    parser.add_argument("--only", nargs="*", help="time only these steps (the baseline always)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        study = args.study
        if study is None:
            from tests.support.studies import run_sample_study  # noqa: PLC0415 (only when building it)

            study = run_sample_study(tmp / "sample")
        codes = [ROOT, *args.code]
        named = {
            code: steps(study, args.humans, tmp / f"out{i}", args.n_boot) for i, code in enumerate(codes)
        }
        envs = {code: env_for(code, tmp) for code in codes}
        if args.only:
            named = {
                c: {n: a for n, a in s.items() if n in {"baseline", *args.only}} for c, s in named.items()
            }
        times: dict[Path, dict[str, list[tuple[float, float]]]] = {
            code: {name: [] for name in named[code]} for code in codes
        }
        for _ in range(args.repeat):  # interleaved: every step of every checkout once per round
            for code in codes:
                for name, step in named[code].items():
                    times[code][name].append(run_once(step, code, envs[code]))
                    wall, cpu = times[code][name][-1]
                    print(
                        f"  {code.name}: {name} {wall:.2f} s wall, {cpu:.2f} s CPU",
                        file=sys.stderr,
                        flush=True,
                    )
        record = {}
        for code in codes:
            medians = {n: statistics.median(w for w, _ in t) for n, t in times[code].items()}
            cpus = {n: statistics.median(c for _, c in t) for n, t in times[code].items()}
            base, base_cpu = medians["baseline"], cpus["baseline"]
            print(f'\n{code} (median of {args.repeat}; baseline `python -c "{BASELINE}"`: {base:.2f} s)')
            print(f"{'step':<26}{'wall s':>8}{'× baseline':>12}{'CPU s':>8}{'× baseline':>12}{'target':>9}")
            for name, wall in medians.items():
                target = f"≤ {TARGETS[name]:.0f}×" if name in TARGETS else ""
                ratio, cpu_ratio = wall / base, cpus[name] / base_cpu
                print(f"{name:<26}{wall:>8.2f}{ratio:>12.2f}{cpus[name]:>8.2f}{cpu_ratio:>12.2f}{target:>9}")
            record[str(code)] = {"median_wall_s": medians, "median_cpu_s": cpus, "runs": times[code]}
            if args.importtime:
                for module in HELP:
                    slow = slowest_imports(module, code, envs[code])
                    print(f"  {module} --help imports: " + ", ".join(f"{n} {s:.2f}s" for n, s in slow))
        if args.json:
            args.json.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
