"""The RQ-Bench-sized study end to end on this machine, step by step, at a size and at 1/10 of it (issue 26).

    python benchmarks/rqbench_scale.py                       # 1,434 instances (RQ-Bench's size) and 143
    python benchmarks/rqbench_scale.py --fraction 0.01 --out /tmp/rqscale

A synthetic RQ-Bench-shaped dataset (`benchmarks/plan_rqbench.write_dataset`: 3 cited passages, a reference and
5 questions from each of 3 generators per instance) is judged with the `rq_novelty_illusion` preset (novelty +
narrowness x independent + comparative, 3 samples: 114 calls per instance) by one judge served by the
project's own local batch server (tests/support/batch_server.py, in a thread of this process, capped as OpenAI is:
200 MB per input file; `--max-enqueued-tokens` adds an enqueued-token cap). Each step is a fresh process, as a
user would run it, timed with `os.wait4` (its rusage: CPU of the process and the children it reaped, peak RSS
of the largest of them):

1. plan: `python -m experiments.run -m experiment=rq_novelty_illusion ... plan=true`
2. batch: the same with `batch=true` against the batch server, empty cache (the server answers at once, so
   this is the framework's own submission and collection, not a provider's processing)
3. replay: the same command again, every call answered from the cache (no request reaches the server)
4. report: `python -m analysis.report <sweep>` (tables, figures, report.md/html)
5. viewer: `python -m analysis.view <sweep> --port 0 --no-browser` until `GET /` has answered
6. imports: `python -c "import pandas, numpy, scipy, pyarrow"`, the baseline of the next two (issue 35)
7. report_small, cards_small: `python -m analysis.report` and `python -m analysis.card` on a small study
   (`write_small_study`: 60 rows at 1/10 of RQ-Bench, 600 at its size)
8. analysis: `benchmarks/analysis_bench.py --parquet` (load + every report table, no plotting) on its synthetic
   table at 11,110 / 1,434 instances per RQ-Bench instance: 10M rows at RQ-Bench's size, 1M at 1/10

Every step runs at `--fraction` of RQ-Bench (the "size") and at 1/10 of that in the same run; the growth
ratio (size / tenth) of every step should stay <= 12x (linear growth). The issue's targets (for the full
size, on the 2-core machine) are printed beside; the batch server's own CPU (this process) is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the project, and plan_rqbench beside this script

from plan_rqbench import write_dataset  # noqa: E402

from analysis.load.synthetic import synthetic_results  # noqa: E402
from analysis.view.data import INDEX_DIR  # noqa: E402
from judge.batch.provider import MB  # noqa: E402
from tests.support.batch_server import BatchServer  # noqa: E402

RQBENCH_INSTANCES = 1434
GENERATORS = 3  # RQ-Bench: a reference + 5 questions from each of 3 generators (163,476 calls per judge)
STEPS = ("plan", "batch", "replay", "report", "viewer", "imports", "report_small", "cards_small", "analysis")
# issues 26 and 35's targets for the full size on the 2-core machine (the growth target applies to every step)
TARGETS = {
    "plan": "< 60 s",
    "batch": "< 600 s (excl. provider)",
    "replay": ">= 10,000 judgments/s",
    "report": "< 120 s, < 4 GB",
    "viewer": "first page < 2 s",
    "imports": "(baseline of the next two)",
    "report_small": "<= 3x imports",
    "cards_small": "<= 5x imports",
    "analysis": "< 60 s, < 8 GB (10M rows)",
}
# issue 35: the analysis step's table is analysis_bench's 10M rows (11,110 instances) at RQ-Bench's size, scaled
# with the study; the small study (`write_small_study`) has 60 rows at 1/10 of RQ-Bench and 600 at its size
ANALYSIS_INSTANCES_PER_INSTANCE = 11110 / RQBENCH_INSTANCES
SMALL_INSTANCES_PER_INSTANCE = 10 / RQBENCH_INSTANCES
MAX_GROWTH = 12.0


@dataclass
class Step:
    """One step's cost: wall and CPU seconds (user + system, the process and its reaped children), peak RSS."""

    name: str
    instances: int
    wall_s: float
    cpu_s: float
    peak_mib: float
    note: str = ""


class StepFailed(RuntimeError):
    """A step's process exited non-zero; the message carries the tail of its stderr."""


def _env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JUDGESCOPE_CACHE_DIR": str(cache),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


def _finish(name: str, proc: subprocess.Popen[str], started: float, instances: int, note: str = "") -> Step:
    """Reap `proc` with wait4 (its own rusage, not this process's other children) and time it."""
    err = proc.stderr.read() if proc.stderr else ""  # to EOF first: a full pipe would block the step
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, -signal.SIGINT):
        raise StepFailed(f"{name} ({instances} instances) exited {proc.returncode}:\n{err[-3000:]}")
    return Step(name, instances, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, note)


def run_step(name: str, args: list[str], env: dict[str, str], cwd: Path, instances: int) -> Step:
    """Run one step to completion in a fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return _finish(name, proc, started, instances)


def viewer_step(sweep: Path, env: dict[str, str], cwd: Path, instances: int, timeout_s: float = 600) -> Step:
    """Start the viewer, fetch its first page as a browser would, stop it: wall = start to page received."""
    started = time.perf_counter()
    args = [sys.executable, "-m", "analysis.view", str(sweep), "--port", "0", "--no-browser"]
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    # "judgescope viewer for <root>: http://127.0.0.1:<port>/  (Ctrl-C to stop)", once it answers
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    if not found:
        proc.kill()
        err = proc.stderr.read() if proc.stderr else ""
        os.wait4(proc.pid, 0)
        raise StepFailed(f"viewer ({instances} instances) did not start:\n{line}{err[-3000:]}")
    asked = time.perf_counter()
    with urllib.request.urlopen(found.group(0), timeout=timeout_s) as answer:
        page = answer.read()
    first_page = time.perf_counter() - started
    fetch = f"GET / {time.perf_counter() - asked:.2f} s once serving, {len(page) // 1024} KiB"
    proc.send_signal(signal.SIGINT)  # uvicorn stops gracefully, the study closes its DuckDB build
    step = _finish("viewer", proc, started, instances, note=fetch)
    step.wall_s = first_page
    return step


def _log(step: Step) -> Step:
    """Print a finished step at once (a long run's partial numbers survive it being stopped)."""
    print(
        f"  n={step.instances} {step.name}: wall {step.wall_s:.2f} s, CPU {step.cpu_s:.2f} s, peak "
        f"{step.peak_mib:.0f} MiB, load {os.getloadavg()[0]:.1f}  {step.note}",
        flush=True,
    )
    return step


def reused_port(work: Path) -> int:
    """The batch server's port in an earlier run's folder, read from its sweep's overrides (`judge.api_base=...`):
    the cache keys of that run's answers include its api_base."""
    overrides = work / "sweep" / "multirun.yaml"
    found = overrides.exists() and re.search(
        r"judge\.api_base=http://127\.0\.0\.1:(\d+)/", overrides.read_text()
    )
    if not found:
        raise StepFailed(f"--reuse: {overrides} does not name the batch server's port (judge.api_base)")
    return int(found.group(1))


def planned_calls(plan: dict[str, Any]) -> tuple[int, str]:
    """The calls a replay of the plan's study answers from the cache, and the plan step's note. A fresh run
    plans before the batch step (every call to make); a `--reuse` run plans on the filled cache, where the
    calls are cached and none is to make: counting only those to make gave 0 calls and '0 judgments/s'."""
    calls, cached = int(plan["calls_to_make"]), int(plan["calls_cached"])
    return calls + cached, f"{calls + cached:,} calls" + (f" ({cached:,} already cached)" if cached else "")


def run_size(
    instances: int,
    work: Path,
    max_enqueued: int | None,
    only: Collection[str] = STEPS,
    reuse: bool = False,
) -> tuple[list[Step], int]:
    """Every step (of `only`) at one size in its own folder and cache; returns the steps and the calls made
    (0 without the plan step). With `reuse`, `work` is an earlier run's folder whose batch step filled the
    cache and wrote the sweep: the server takes that run's port (so the cache keys match), and every step rerun
    replaces its own output folder."""
    data = work / "rqbench_sized.jsonl"
    if reuse:
        if not (work / "cache").is_dir() or not (work / "sweep").is_dir():
            raise StepFailed(f"--reuse: {work} has no cache/ and sweep/ from an earlier batch step")
        port = reused_port(work)
        # the viewer's sidecar too: an earlier viewer step's built tables would make this one's first open a
        # sidecar read, not the first open the fresh run timed
        for folder in (
            "plan",
            "replay",
            "report",
            "small",
            "report_small",
            "cards_small",
            f"sweep/{INDEX_DIR}",
        ):
            shutil.rmtree(work / folder, ignore_errors=True)
    else:
        work.mkdir(parents=True)
        write_dataset(data, instances, GENERATORS, refs=3)
        port = 0
    env = _env(work / "cache")
    server = BatchServer(polls=1, max_file_bytes=200 * MB, max_enqueued_tokens=max_enqueued, port=port)
    steps: list[Step] = []
    calls = 0
    with server.running():
        base = [
            sys.executable,
            "-m",
            "experiments.run",
            "-m",
            "experiment=rq_novelty_illusion",
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "progress=false",
            f"dataset.path={data}",
        ]
        if "plan" in only:
            plan = [*base, "plan=true", f"hydra.sweep.dir={work / 'plan'}"]
            steps.append(run_step("plan", plan, env, work, instances))
            calls, steps[-1].note = planned_calls(json.loads((work / "plan" / "plan.json").read_text()))
            _log(steps[-1])
        sweep = work / "sweep"
        if "batch" not in only and not reuse:
            return steps + analysis_steps(instances, work, env, only), calls
        if "batch" in only:
            batch = [*base, "batch=true", "batch_settings.poll_s=0.02", f"hydra.sweep.dir={sweep}"]
            if max_enqueued:
                batch.append(f"batch_settings.max_enqueued_tokens={max_enqueued}")
            steps.append(run_step("batch", batch, env, work, instances))
            if server.refused_uploads or server.token_refusals:
                raise StepFailed(
                    f"batch: {server.refused_uploads} uploads and {server.token_refusals} batches refused"
                )
            steps[-1].note = f"{server.created} batches, {server.chat_requests} live calls"
            _log(steps[-1])
        if "replay" in only:
            before = (server.created, server.chat_requests)
            replay = run_step("replay", [*base, f"hydra.sweep.dir={work / 'replay'}"], env, work, instances)
            if (server.created, server.chat_requests) != before:
                raise StepFailed("replay: calls reached the server; the cache did not answer them all")
            replay.note = f"{calls / replay.wall_s:,.0f} judgments/s"
            steps.append(_log(replay))
    report = [sys.executable, "-m", "analysis.report", str(sweep), "--out", str(work / "report")]
    if "report" in only:
        steps.append(_log(run_step("report", report, env, work, instances)))
    if "viewer" in only:
        steps.append(_log(viewer_step(sweep, env, work, instances)))
    steps += analysis_steps(instances, work, env, only)
    return steps, calls


def write_small_study(folder: Path, instances: int) -> int:
    """A researcher's small study as a run folder (results.parquet, strings as a run writes them): two judges
    x two modes, a reference and one question from each of two generators, five dimensions, one sample
    (60 rows per instance); returns the rows."""
    frame = synthetic_results(
        n_instances=instances,
        generators=("narrow_gen", "broad_gen"),
        k=1,
        dimensions=("originality", "gap_addressing", "non_obviousness", "source_boundedness", "specificity"),
        judges=("judge_a", "judge_b"),
        n_samples=1,
        seed=0,
    )
    frame = frame.astype({c: str for c in frame.columns if str(frame[c].dtype) == "category"})
    folder.mkdir(parents=True)
    frame.to_parquet(folder / "results.parquet", index=False)
    return len(frame)


def analysis_steps(
    instances: int, work: Path, env: dict[str, str], only: Collection[str] = STEPS
) -> list[Step]:
    """Issue 35's steps: the import baseline (pandas, numpy, scipy, pyarrow in a fresh process), the report
    and the reliability cards of a small study (their ratio to that baseline), and every report table on
    analysis_bench's synthetic table (10M rows at RQ-Bench's size) read from parquet as a study is."""
    py = sys.executable
    steps = []
    if "imports" in only:
        imports = [py, "-c", "import pandas, numpy, scipy, pyarrow"]
        steps.append(_log(run_step("imports", imports, env, work, instances)))
    if "report_small" in only or "cards_small" in only:
        steps += small_steps(instances, work, env, only, steps[0])
    if "analysis" in only:
        steps.append(_log(analysis_step(instances, work, env)))
    return steps


def small_steps(
    instances: int, work: Path, env: dict[str, str], only: Collection[str], imports: Step
) -> list[Step]:
    """The report and the cards of a small study, each with its ratio to the import baseline."""
    py = sys.executable
    steps: list[Step] = []
    small = work / "small"
    rows = write_small_study(small, max(1, round(instances * SMALL_INSTANCES_PER_INSTANCE)))
    for name, module in (("report_small", "analysis.report"), ("cards_small", "analysis.card")):
        if name not in only:
            continue
        step = run_step(name, [py, "-m", module, str(small), "--out", str(work / name)], env, work, instances)
        wall, cpu = step.wall_s / imports.wall_s, step.cpu_s / imports.cpu_s
        step.note = f"{rows} rows, {wall:.1f}x imports on wall, {cpu:.1f}x on CPU"
        steps.append(_log(step))
    return steps


def analysis_step(instances: int, work: Path, env: dict[str, str]) -> Step:
    """Every report table on analysis_bench's synthetic table, loaded from parquet."""
    py = sys.executable
    bench = ROOT / "benchmarks" / "analysis_bench.py"
    n = max(1, round(instances * ANALYSIS_INSTANCES_PER_INSTANCE))
    folder = work / "analysis_parquet"
    write = [py, str(bench), "--instances", str(n), "--write", str(folder)]
    subprocess.run(write, env=env, cwd=work, check=True, stdout=subprocess.DEVNULL)  # not timed
    step = run_step(
        "analysis", [py, str(bench), "--instances", str(n), "--parquet", str(folder)], env, work, n
    )
    step.note = f"{n * 900:,} rows (analysis_bench --instances {n} --parquet)"
    shutil.rmtree(folder, ignore_errors=True)  # ~1 GB at 10M rows
    return step


def table(size: list[Step], tenth: list[Step]) -> str:
    """The per-step table: both sizes, the growth ratios, the targets."""
    head = (
        f"{'step':<8}{'n':>6}{'wall s':>9}{'CPU s':>9}{'peak MiB':>10}  {'n/10':>5}{'wall s':>9}{'CPU s':>9}"
        f"{'peak MiB':>10}  {'x wall':>7}{'x CPU':>7}{'x RSS':>7}  {'target (full size)':<26}note"
    )
    rows = [head, "-" * len(head)]
    pairs: list[Step | None] = [*tenth] if tenth else [None] * len(size)
    for big, small in zip(size, pairs, strict=True):
        if small is None:  # --no-tenth
            other, ratios, flag = f"{'-':>5}{'-':>9}{'-':>9}{'-':>10}  ", f"{'-':>7}" * 3, ""
        else:
            ratio = [big.wall_s / small.wall_s, big.cpu_s / small.cpu_s, big.peak_mib / small.peak_mib]
            flag = "" if max(ratio[:2]) <= MAX_GROWTH else f"  (> {MAX_GROWTH:.0f}x)"
            other = f"{small.instances:>5}{small.wall_s:>9.2f}{small.cpu_s:>9.2f}{small.peak_mib:>10.0f}  "
            ratios = f"{ratio[0]:>7.2f}{ratio[1]:>7.2f}{ratio[2]:>7.2f}"
        rows.append(
            f"{big.name:<8}{big.instances:>6}{big.wall_s:>9.2f}{big.cpu_s:>9.2f}{big.peak_mib:>10.0f}  "
            f"{other}{ratios}  {TARGETS[big.name]:<26}{big.note}{flag}"
        )
    return "\n".join(rows)


def steps_arg(value: str) -> tuple[str, ...]:
    """`--steps`: known names, in the benchmark's order (what each one needs is checked in `missing_steps`)."""
    names = {v.strip() for v in value.split(",") if v.strip()}
    if unknown := names - set(STEPS):
        raise argparse.ArgumentTypeError(
            f"unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}"
        )
    return tuple(s for s in STEPS if s in names)


def missing_steps(names: Collection[str], reuse: bool) -> str:
    """The steps `names` needs and lacks, as one line ('' if none); `--reuse` stands in for the batch step."""
    needs = {"replay": ("batch", "plan"), "report": ("batch",), "viewer": ("batch",)}
    needs |= {"report_small": ("imports",), "cards_small": ("imports",)}
    have = {*names, "batch"} if reuse else set(names)
    return "; ".join(sorted({f"{n} needs {m}" for n in names for m in needs.get(n, ()) if m not in have}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="share of RQ-Bench's 1,434 instances (default 1.0; 0.01 -> 14)",
    )
    parser.add_argument(
        "--out", type=Path, help="keep every run folder here (new or empty); default: a temp dir"
    )
    parser.add_argument(
        "--max-enqueued-tokens",
        type=int,
        help="the batch server's enqueued-token cap, also given to the study",
    )
    parser.add_argument(
        "--steps",
        type=steps_arg,
        default=STEPS,
        help=f"comma-separated subset of {','.join(STEPS)} (default: all); replay, report and viewer need batch "
        "(or --reuse), replay needs plan, report_small and cards_small need imports",
    )
    parser.add_argument(
        "--reuse",
        type=Path,
        help="an earlier run's --out folder whose batch step filled the caches: rerun the other steps on them "
        "(each replaces its own output folder; the record goes to rqbench_scale-<UTC time>.json)",
    )
    parser.add_argument(
        "--no-tenth", action="store_true", help="only the size, not its 1/10 (no growth ratios)"
    )
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1:
        print(f"error: --fraction {args.fraction}: must be in (0, 1]", file=sys.stderr)
        return 2
    if args.reuse is not None and "batch" in args.steps:
        # a second batch step would write its runs beside the first's in the reused sweep (claimed folders get a
        # `-2` sibling), and the report and viewer would read both runs' folders as one study
        if args.steps is not STEPS:
            print(
                "error: --steps batch with --reuse: the reused run's sweep already holds its batch runs; "
                "leave batch out",
                file=sys.stderr,
            )
            return 2
        args.steps = tuple(s for s in STEPS if s != "batch")  # --reuse's default: every step after it
    if missing := missing_steps(args.steps, reuse=args.reuse is not None):
        print(f"error: --steps: {missing}", file=sys.stderr)
        return 2
    if args.reuse and args.out:
        print("error: --reuse and --out: give one (a reused folder keeps its outputs)", file=sys.stderr)
        return 2
    if args.reuse and not args.reuse.is_dir():
        print(f"error: --reuse {args.reuse}: not a folder", file=sys.stderr)
        return 2
    if args.out and args.out.exists() and any(args.out.iterdir()):
        print(f"error: --out {args.out}: not empty; give a new or empty folder", file=sys.stderr)
        return 2
    instances = max(1, round(RQBENCH_INSTANCES * args.fraction))
    tenth = max(1, round(instances / 10))
    keep = args.out or args.reuse
    work = keep or Path(tempfile.mkdtemp(prefix="rqbench_scale_"))
    print(
        f"RQ-Bench-sized study at {instances} instances ({args.fraction:g} of {RQBENCH_INSTANCES:,}) and "
        f"{tenth} (1/10); {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"Python {platform.python_version()}",
        flush=True,
    )
    reuse = args.reuse is not None
    try:
        small, small_calls = (
            ([], 0)
            if args.no_tenth
            else run_size(tenth, work / f"n{tenth}", args.max_enqueued_tokens, args.steps, reuse)
        )
        big, big_calls = run_size(
            instances, work / f"n{instances}", args.max_enqueued_tokens, args.steps, reuse
        )
    except StepFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"calls: {big_calls:,} at n={instances}, {small_calls:,} at n={tenth}; "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(table(big, small))
    replay = [step.wall_s for steps in (big, small) for step in steps if step.name == "replay"]
    if (
        len(replay) == 2 and big_calls > small_calls and replay[0] > replay[1]
    ):  # start-up (imports, 4 jobs) cancels out
        print(
            f"replay, marginal: {(big_calls - small_calls) / (replay[0] - replay[1]):,.0f} judgments/s "
            f"(the extra calls over the extra wall time of the larger run)"
        )
    if keep:
        record = {
            "fraction": args.fraction,
            "size": [asdict(s) for s in big],
            "tenth": [asdict(s) for s in small],
            "calls": {"size": big_calls, "tenth": small_calls},
        }
        name = (
            f"rqbench_scale-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
            if reuse
            else "rqbench_scale.json"
        )
        (keep / name).write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
