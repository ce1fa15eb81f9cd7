"""Throughput of the judge call path against a local OpenAI-compatible server with a fixed latency.

    python benchmarks/throughput.py                 # both live settings + cached replay + per-call overhead
    python benchmarks/throughput.py --quick         # a smaller, faster pass (for a smoke check)
    python benchmarks/throughput.py --only replay --against /tmp/base --repeat 5 --profile-replay
                                                    # replay: this checkout vs another, alternated, profiled

Run by hand; it prints a table and ratios and asserts nothing. Every variant runs in its own fresh Python
process (so one variant's imports and global switches never speed up or slow down another), against one
aiohttp server process that answers a valid novelty-rubric JSON after `latency` seconds:

- live, per setting (latency L at concurrency C over N calls):
  * framework : `experiments.study.run_study` on a generated dataset with an empty cache (render -> cache
    miss -> retry wrapper -> litellm -> parse -> rows -> parquet/csv/manifest), wall time end to end;
  * raw openai: an `openai.AsyncOpenAI` loop (semaphore C) over the same rendered prompts;
  * bare litellm: a `litellm.acompletion` loop (litellm's defaults) over the same prompts;
  * limit     : C / L calls/s.
  client CPU per call = (user+sys CPU of the client process and its children) / N.
- cached replay: `run_study` again on the warm cache (2,000 and 10,000 calls), judgments (calls) per second,
  next to a raw `diskcache.Cache.get` loop over the same keys;
- per-call overhead of render + cache key + parse (+ rows), in microseconds.

Goals (issue 6): live framework >= 0.8x raw openai in both settings; replay >= 3,000 judgments/s;
render + key + parse < 1 ms per call. Client CPU, not the network, is the bottleneck on a 2-core machine,
so run it when the machine is otherwise idle and read the ratios (measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import datetime as dt
import json
import os
import platform
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai/bench-judge"
ANSWER = '{"originality": 2, "gap_addressing": 1, "non_obviousness": 3}'
N_SAMPLES = 2
PER_INSTANCE = 8  # reference + 7 generated candidates -> 8 independent prompts per instance


# --- the server ------------------------------------------------------------------------------------------


def serve(latency: float) -> None:
    """An aiohttp OpenAI-compatible chat endpoint: a valid judge answer after `latency` s; prints its port."""
    from aiohttp import web  # noqa: PLC0415

    body = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "bench-judge",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 600, "completion_tokens": 20, "total_tokens": 620},
        }
    ).encode()
    count = {"n": 0}

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        count["n"] += 1
        await asyncio.sleep(latency)
        return web.Response(body=body, content_type="application/json")

    async def counter(_: web.Request) -> web.Response:
        return web.json_response(count)

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/count", counter)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Server:
    """The server in its own process, stopped on exit."""

    def __init__(self, latency: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(latency)], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    def count(self) -> int:
        import urllib.request  # noqa: PLC0415

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/count", timeout=10) as r:
            return int(json.loads(r.read())["n"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# --- inputs ----------------------------------------------------------------------------------------------


def make_dataset(path: Path, n_calls: int, seed: int = 0) -> int:
    """A dataset with n_calls / (PER_INSTANCE * N_SAMPLES) instances of unique, realistic-length texts."""
    rng = random.Random(seed)
    words = (
        "retrieval gating entropy calibration reader passage conflict memory popularity entity benchmark "
        "latency accuracy transformer attention sparse dense graph protein folding causal estimator "
        "variance bias robustness shift domain adaptation synthetic counterfactual"
    ).split()

    def text(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."

    n_inst = max(1, n_calls // (PER_INSTANCE * N_SAMPLES))
    with path.open("w") as fh:
        for i in range(n_inst):
            iid = f"bench-{i}"
            fh.write(
                json.dumps(
                    {
                        "instance_id": iid,
                        "field": "nlp",
                        "background": [{"title": text(8), "text": text(110)} for _ in range(2)],
                        "reference": {"candidate_id": f"{iid}:ref", "text": text(35) + f" ({i})"},
                        "candidates": [
                            {
                                "candidate_id": f"{iid}:g:{k}",
                                "source": "gen",
                                "text": text(30) + f" ({i}.{k})",
                            }
                            for k in range(PER_INSTANCE - 1)
                        ],
                    }
                )
                + "\n"
            )
    return n_inst * PER_INSTANCE * N_SAMPLES


def study_config(data: Path, api_base: str, concurrency: int, cache_dir: Path) -> dict[str, Any]:
    """The resolved Hydra config of `python -m experiments.run judge=qwen ...` for this benchmark."""
    from hydra import compose, initialize_config_module  # noqa: PLC0415
    from omegaconf import OmegaConf  # noqa: PLC0415

    overrides = [
        "judge=qwen",
        f"judge.model={MODEL}",
        f"judge.api_base={api_base}",
        f"judge.concurrency={concurrency}",
        "judge.timeout_s=60",
        f"dataset.path={data}",
        f"n_samples={N_SAMPLES}",
        f"cache_dir={cache_dir}",
        "progress=false",
    ]
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert isinstance(plain, dict)
    return plain


def dump_config(cfg: dict[str, Any]) -> str:
    """The resolved config as YAML text for a worker: JSON would turn a rubric's integer anchor keys
    (`anchors: {0: ...}`) into strings, which the typed config refuses."""
    return yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False)


def dump_messages(cfg: dict[str, Any], path: Path) -> None:
    """The rendered messages of every call (prompt x sample), for the raw loops."""
    from experiments.config import load  # noqa: PLC0415
    from experiments.inputs import load_study_inputs  # noqa: PLC0415
    from experiments.modes import build_prompts  # noqa: PLC0415
    from experiments.modes.independent import Independent  # noqa: PLC0415

    inputs = load_study_inputs(load(cfg))
    rubric, instances = inputs.rubric, inputs.instances
    prompts = build_prompts(instances, rubric, Independent(), seed=0)
    calls = [{"messages": p.messages, "seed": s} for p in prompts for s in range(N_SAMPLES)]
    path.write_text(json.dumps(calls))


# --- workers (each in its own process) -------------------------------------------------------------------


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def _loop(call: Any, calls: list[dict[str, Any]], concurrency: int) -> int:
    sem = asyncio.Semaphore(concurrency)
    ok = 0

    async def one(c: dict[str, Any]) -> None:
        nonlocal ok
        async with sem:
            text = await call(c)
        ok += text == ANSWER

    await asyncio.gather(*(one(c) for c in calls))
    return ok


def worker(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one variant and return its measurements (the process is fresh: imports are not timed)."""
    calls = json.loads(Path(args.messages).read_text()) if args.messages else []
    params = {"temperature": 0.1, "max_tokens": 160}
    if kind == "raw":
        import openai  # noqa: PLC0415

        client = openai.AsyncOpenAI(base_url=args.api_base, api_key="sk-bench", max_retries=0, timeout=60)

        async def call(c: dict[str, Any]) -> str:
            r = await client.chat.completions.create(
                model="bench-judge", messages=c["messages"], seed=c["seed"], **params
            )
            return r.choices[0].message.content or ""

        cpu, t0 = _cpu(), time.perf_counter()
        ok = asyncio.run(_loop(call, calls, args.concurrency))
        return {"calls": len(calls), "ok": ok, "wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - cpu}
    if kind == "litellm":
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # noqa: PLC0415

        async def call(c: dict[str, Any]) -> str:
            r = await litellm.acompletion(
                model=MODEL,
                messages=c["messages"],
                api_base=args.api_base,
                api_key="sk-bench",
                seed=c["seed"],
                timeout=60,
                num_retries=0,
                max_retries=0,
                **params,
            )
            return r.choices[0].message.content or ""

        cpu, t0 = _cpu(), time.perf_counter()
        ok = asyncio.run(_loop(call, calls, args.concurrency))
        return {"calls": len(calls), "ok": ok, "wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - cpu}
    if kind in ("framework", "replay"):
        cfg = yaml.safe_load(Path(args.config).read_text())
        os.environ["OPENAI_API_KEY"] = "sk-bench"
        import litellm  # noqa: F401, PLC0415  (imported before timing, as in any run)

        from experiments.config import load  # noqa: PLC0415
        from judge import speedups  # noqa: PLC0415  (installed once, as experiments.run does)

        speedups.install()
        from core.schema import MANIFEST_NAME, read_manifest  # noqa: PLC0415
        from experiments.inputs import load_study_inputs  # noqa: PLC0415
        from experiments.study import run_study  # noqa: PLC0415

        out = Path(tempfile.mkdtemp(prefix="judgescope-bench-out-"))
        profiler = cProfile.Profile(time.process_time) if args.profile else None
        cpu, t0 = _cpu(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        frame = run_study(load(cfg), load_study_inputs(load(cfg)), out, run_id=kind)
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu
        manifest = read_manifest(out / MANIFEST_NAME)
        from experiments.judges import make_judge  # noqa: PLC0415
        from experiments.study import plan_workers  # noqa: PLC0415

        made = manifest.calls_made or 0
        workers = plan_workers(load(cfg), make_judge(load(cfg)), made) if made else 0
        shutil.rmtree(out, ignore_errors=True)
        n = manifest.calls_total or 0
        return {
            "calls": n,
            "ok": int(frame["parse_ok"].sum()) // 3,
            "wall_s": wall,
            "cpu_s": cpu,
            "made": made,
            "cached": manifest.calls_cached,
            "rows": len(frame),
            "workers": workers,
            **({"profile": profile_shares(profiler)} if profiler is not None else {}),
        }
    if kind == "diskcache":
        import diskcache  # noqa: PLC0415

        cache = diskcache.Cache(args.cache_dir)
        keys = list(cache.iterkeys())
        cpu, t0 = _cpu(), time.perf_counter()
        hits = sum(cache.get(k) is not None for k in keys)
        return {"calls": len(keys), "ok": hits, "wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - cpu}
    if kind == "overhead":
        return overhead(Path(args.config))
    raise SystemExit(f"unknown worker {kind}")


def overhead(config: Path) -> dict[str, Any]:
    """Microseconds per call for render, cache key, parse and rows (single thread, no I/O)."""
    cfg = yaml.safe_load(config.read_text())
    from experiments.config import load  # noqa: PLC0415
    from experiments.inputs import load_study_inputs  # noqa: PLC0415
    from experiments.modes import build_prompts  # noqa: PLC0415
    from experiments.modes.independent import Independent  # noqa: PLC0415
    from experiments.rows import rows_for  # noqa: PLC0415
    from judge.cache.store import cache_key  # noqa: PLC0415
    from judge.client import CallResult, Judge  # noqa: PLC0415
    from judge.completer import Completion, LiteLLMCompleter  # noqa: PLC0415
    from judge.parse import parse_object  # noqa: PLC0415

    inputs = load_study_inputs(load(cfg))
    rubric, instances = inputs.rubric, inputs.instances
    build_prompts(instances[:2], rubric, Independent(), seed=0)  # warm the template cache
    t0 = time.perf_counter()
    prompts = build_prompts(instances, rubric, Independent(), seed=0)
    render = (time.perf_counter() - t0) / len(prompts)
    judge = Judge(LiteLLMCompleter(MODEL, api_base="http://127.0.0.1:1/v1"), cache=None)  # type: ignore[arg-type]
    sample = judge.sample({"temperature": 0.1, "max_tokens": 160, "seed": 0}, 0)  # as run_study builds it
    version = rubric.version
    t0 = time.perf_counter()
    for (
        p
    ) in prompts:  # the first sample of each prompt: it serialises the messages (later samples reuse them)
        cache_key(
            MODEL,
            p.messages,
            sample.params,
            0,
            version,
            "http://127.0.0.1:1/v1",
            params_json=sample.params_json,
        )
    key = (time.perf_counter() - t0) / len(prompts)
    t0 = time.perf_counter()
    for _ in prompts:
        parse_object(ANSWER, rubric.fields)
    parse = (time.perf_counter() - t0) / len(prompts)
    result = CallResult(Completion(ANSWER, "stop", 600, 20, None, 0.1), cached=False, retries=0)
    meta = {
        "run_id": "r",
        "judge": "j",
        "model": MODEL,
        "mode": "independent",
        "rubric": rubric.name,
        "rubric_version": version,
        "temperature": 0.1,
    }
    t0 = time.perf_counter()
    for p in prompts:
        rows_for(p, 0, result, rubric, meta)
    rows = (time.perf_counter() - t0) / len(prompts)
    return {
        "calls": len(prompts),
        "render_us": render * 1e6,
        "key_us": key * 1e6,
        "parse_us": parse * 1e6,
        "rows_us": rows * 1e6,
    }


def run_worker(kind: str, tree: Path = ROOT, **kw: Any) -> dict[str, Any]:
    """One worker in a fresh process, importing the code of `tree` (this checkout, or `--against`'s):
    without PYTHONPATH a script under benchmarks/ imports whatever checkout is installed, not its own."""
    argv = [sys.executable, __file__, "--worker", kind]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}", str(v)]
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": path}
    load = os.getloadavg()[0]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=tree, env=env, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"worker {kind} failed:\n{out.stderr[-3000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": load}


# the parts of a replay's `run_study` in its profile, by the functions (file, name) whose cumulative time they
# are (disjoint: `as_dict`, the config as a dict, is inside make_judge and, before it was kept, build_manifest
# and the rest); both the per-call code (lookup, to_frame) and the bulk code (lookup_many, RowColumns.frame) are named,
# so the same table reads a checkout from before the change (--against)
PROFILE_PARTS = {
    "cache reads (key + entry)": [("client.py", "lookup"), ("client.py", "lookup_many")],
    "table writes (DataFrame + files)": [
        ("rows.py", "to_frame"),
        ("rows.py", "frame"),
        ("outputs.py", "write_outputs"),
    ],
    "rows (parse or stored scores, row building, tally)": [("study.py", "finish")],
    "prompts (build_prompts)": [("__init__.py", "build_prompts")],
    "judge set-up (make_judge, with the config's dict)": [("judges.py", "make_judge")],
    "manifest (build_manifest)": [("manifest.py", "build_manifest")],
}


def profile_shares(profile: Any) -> dict[str, float]:
    """Seconds of `run_study` (profiled, CPU clock) per part, with `run_study` itself and the rest."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]

    def cum(where: list[tuple[str, str]]) -> float:
        return sum(
            row[3]
            for (path, _, name), row in stats.items()
            if any(path.endswith(f) and name == n for f, n in where)
        )

    total = cum([("study.py", "run_study")])
    parts = {name: cum(where) for name, where in PROFILE_PARTS.items()}
    return {"run_study": total, **parts, "rest": total - sum(parts.values())}


# --- orchestration ---------------------------------------------------------------------------------------


def live(latency: float, concurrency: int, n_calls: int, tmp: Path, rows: list[list[str]]) -> None:
    data = tmp / f"live-{latency}-{concurrency}.jsonl"
    n = make_dataset(data, n_calls)
    server = Server(latency)
    try:
        cfg = study_config(data, server.api_base, concurrency, tmp / f"cache-live-{latency}")
        (tmp / "cfg.json").write_text(dump_config(cfg))
        one = {**cfg, "workers": 1, "cache_dir": str(tmp / f"cache-live1-{latency}")}
        (tmp / "cfg1.json").write_text(dump_config(one))
        dump_messages(cfg, tmp / "messages.json")
        common: dict[str, Any] = {"api_base": server.api_base, "concurrency": concurrency}
        res = {
            "raw openai": run_worker("raw", messages=tmp / "messages.json", **common),
            "bare litellm": run_worker("litellm", messages=tmp / "messages.json", **common),
            "framework": run_worker("framework", config=tmp / "cfg.json", **common),
            "framework, 1 process": run_worker("framework", config=tmp / "cfg1.json", **common),
        }
        requests = server.count()
    finally:
        server.stop()
    limit = concurrency / latency
    raw = res["raw openai"]["calls"] / res["raw openai"]["wall_s"]
    label = f"{latency * 1000:g} ms / c={concurrency} / {n} calls"
    for name, r in res.items():
        rate = r["calls"] / r["wall_s"]
        name = f"{name} ({r['workers']} workers)" if name == "framework" else name
        rows.append(
            [
                label,
                name,
                f"{rate:.1f}",
                f"{rate / limit:.2f}",
                f"{rate / raw:.2f}",
                f"{1000 * r['cpu_s'] / r['calls']:.2f}",
                f"{r['ok']}/{r['calls']}",
                f"{r['load']:.2f}",
            ]
        )
    rows.append([label, "limit C/L", f"{limit:.1f}", "1.00", f"{limit / raw:.2f}", "", "", ""])
    expected = len(res) * n
    print(f"  [{label}] server saw {requests} requests (expected {expected})", file=sys.stderr)


def replay(
    n_calls: int,
    tmp: Path,
    rows: list[list[str]],
    against: Path | None = None,
    repeats: int = 1,
    profiles: dict[str, dict[str, float]] | None = None,
) -> None:
    """The cache warmed by one live run, then the replay `repeats` times (with `against`: alternately in this
    checkout and that one, on the same cache, the order switched each round), a raw diskcache loop, and with
    `profiles` one profiled replay per checkout."""
    data = tmp / f"replay-{n_calls}.jsonl"
    n = make_dataset(data, n_calls)
    cache = tmp / f"cache-replay-{n_calls}"
    server = Server(0.0)
    try:
        cfg = study_config(data, server.api_base, 64, cache)
        (tmp / "cfg.json").write_text(dump_config(cfg))
        warm = run_worker("framework", config=tmp / "cfg.json")
    finally:
        server.stop()
    assert warm["made"] == n, warm
    # the first replay after a live run reads the parsed scores the live run kept: a steady-state replay
    run_worker("replay", config=tmp / "cfg.json")
    trees = {"this checkout": ROOT, **({f"{against}": against} if against else {})}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for r in range(repeats):
        for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
            runs[name].append(run_worker("replay", tree=trees[name], config=tmp / "cfg.json"))
    raw = run_worker("diskcache", cache_dir=cache)
    base = raw["calls"] / raw["wall_s"]
    for name, results in [
        *((f"framework replay ({k})", v) for k, v in runs.items()),
        ("raw diskcache get", [raw]),
    ]:
        rates = sorted(r["calls"] / r["wall_s"] for r in results)
        cpus = sorted(1000 * r["cpu_s"] / r["calls"] for r in results)
        rate, cpu = rates[len(rates) // 2], cpus[len(cpus) // 2]
        spread = f" ({rates[0]:.0f}-{rates[-1]:.0f})" if len(rates) > 1 else ""
        rows.append(
            [
                f"replay / {n} calls",
                name,
                f"{rate:.0f}{spread}",
                f"{rate / base:.3f}",
                f"{cpu:.3f}",
                f"{1000 / cpu:.0f}",
                f"{results[0]['ok']}/{results[0]['calls']}",
                " ".join(f"{r['load']:.1f}" for r in results),
            ]
        )
    if profiles is not None:
        for name, tree in trees.items():
            profiles[f"{name}, {n} calls"] = run_worker(
                "replay", tree=tree, config=tmp / "cfg.json", profile=1
            )["profile"]


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller runs (a smoke check, not a measurement)")
    ap.add_argument("--only", choices=["live", "replay", "overhead"], action="append")
    ap.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    for name in ("api-base", "messages", "config", "cache-dir"):
        ap.add_argument(f"--{name}", help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=int, default=32, help=argparse.SUPPRESS)
    ap.add_argument("--profile", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument(
        "--against",
        type=Path,
        help="replay: also time this copy of the code (`git archive main | tar -x -C DIR`), alternated on one cache",
    )
    ap.add_argument(
        "--repeat", type=int, default=1, help="replay: timed replays per checkout (median reported)"
    )
    ap.add_argument(
        "--profile-replay", action="store_true", help="replay: one cProfile run per checkout, time per part"
    )
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return

    only = set(args.only or ["live", "replay", "overhead"])
    settings = [(0.1, 32, 400), (1.0, 64, 128)] if args.quick else [(0.1, 32, 2000), (1.0, 64, 640)]
    replays = [2000] if args.quick else [2000, 10000]
    print(
        f"judgescope throughput - {dt.datetime.now():%Y-%m-%d %H:%M} - {platform.node()} - "
        f"{os.cpu_count()} CPUs - python {platform.python_version()} - load average at start "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    tmp = Path(tempfile.mkdtemp(prefix="judgescope-bench-"))
    try:
        if "live" in only:
            rows: list[list[str]] = []
            for latency, concurrency, n in settings:
                live(latency, concurrency, n, tmp, rows)
            print(
                "\nLive (calls/s; ratios measured in the same run; CPU = client processes' CPU per call; load = 1-min "
                "load average when the variant started)"
            )
            print(
                table(
                    ["setting", "variant", "calls/s", "x limit", "x raw openai", "CPU ms/call", "ok", "load"],
                    rows,
                )
            )
        if "replay" in only:
            rows = []
            profiles: dict[str, dict[str, float]] | None = {} if args.profile_replay else None
            for n in replays:
                replay(n, tmp, rows, args.against, args.repeat, profiles)
            print(
                "\nCached replay (judgments = calls per second, wall, median of the repeats (min-max); the "
                "framework's run includes parquet/csv writing; /s on CPU = 1000 / CPU ms per call)"
            )
            header = [
                "setting",
                "variant",
                "calls/s",
                "x raw diskcache",
                "CPU ms/call",
                "/s on CPU",
                "ok",
                "load",
            ]
            print(table(header, rows))
            if profiles:
                print("\nWhere a replay's `run_study` goes (cProfile, CPU clock; s and share of run_study)")
                names = list(next(iter(profiles.values())))
                print(
                    table(
                        ["part", *profiles],
                        [
                            [
                                name,
                                *(
                                    f"{p[name]:.2f} ({100 * p[name] / p['run_study']:.0f}%)"
                                    for p in profiles.values()
                                ),
                            ]
                            for name in names
                        ],
                    )
                )
        if "overhead" in only:
            data = tmp / "overhead.jsonl"
            make_dataset(data, 4000)
            cfg = study_config(data, "http://127.0.0.1:1/v1", 8, tmp / "cache-overhead")
            (tmp / "cfg.json").write_text(dump_config(cfg))
            r = run_worker("overhead", config=tmp / "cfg.json")
            total = r["render_us"] + r["key_us"] + r["parse_us"]
            print(
                f"\nPer-call overhead over {r['calls']} prompts (us): render {r['render_us']:.0f}, "
                f"key {r['key_us']:.0f}, parse {r['parse_us']:.0f} -> render+key+parse {total:.0f} us "
                f"(+ rows {r['rows_us']:.0f} us)"
            )
        print(f"\nload average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
