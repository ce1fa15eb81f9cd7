"""What the RQ-Bench-sized novelty-illusion study would cost: `plan=true` on a dataset of RQ-Bench's size.

    python benchmarks/plan_rqbench.py                          # 4 generators, gpt-4o and gemini-2.5-pro
    python benchmarks/plan_rqbench.py --generators 6 --judges gpt-4o,gpt-5,claude-sonnet

RQ-Bench itself is not shipped, so this writes a synthetic dataset of its shape into a temporary folder:
1,434 instances, each with `--refs` cited-paper passages of ~1,500 characters (the loader's cap), one
reference research question and 5 questions per generator (~35 words each), then runs the preset exactly as a
user would, with `plan=true` (no provider call, no key):

    python -m experiments.run -m experiment=rq_novelty_illusion judge=<judges> plan=true dataset.path=<synthetic>

The preset is novelty + narrowness x independent + comparative, 3 samples at temperature 0.1. It prints the
sweep's summed plan and one line per job (live vs batch, expected and at most). Synthetic English-like text
tokenises like real prose to within a few per cent; real passages (formulas, names) run somewhat longer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "we propose method model language retrieval evaluation benchmark results show that the of and a in to "
    "for with on by dataset learning neural performance task tasks improve accuracy baseline approach "
    "question answering generation large models training data analysis experiments robust"
).split()


def write_dataset(path: Path, instances: int, generators: int, refs: int, seed: int = 0) -> None:
    rng = random.Random(seed)

    def text(chars: int) -> str:
        out: list[str] = []
        while sum(len(w) + 1 for w in out) < chars:
            out.append(rng.choice(WORDS))
        return " ".join(out).capitalize() + "."

    with path.open("w", encoding="utf-8") as fh:
        for i in range(instances):
            iid = f"rq-{i}"
            cands = [
                {"candidate_id": f"{iid}:gen{g}:{k}", "source": f"gen{g}", "text": text(230) + "?"}
                for g in range(generators)
                for k in range(5)
            ]
            fh.write(
                json.dumps(
                    {
                        "instance_id": iid,
                        "field": "cs.CL",
                        "background": [{"title": text(70), "text": text(1500)} for _ in range(refs)],
                        "reference": {"candidate_id": f"{iid}:ref", "text": text(230) + "?"},
                        "candidates": cands,
                    }
                )
                + "\n"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=1434)
    ap.add_argument("--generators", type=int, default=4)
    ap.add_argument("--refs", type=int, default=3, help="cited-paper passages per instance")
    ap.add_argument("--judges", default="gpt-4o,gemini-2.5-pro")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "rqbench_sized.jsonl"
        write_dataset(data, args.instances, args.generators, args.refs)
        env = {**os.environ, "JUDGESCOPE_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(ROOT)}
        cmd = [
            sys.executable,
            "-m",
            "experiments.run",
            "-m",
            "experiment=rq_novelty_illusion",
            f"judge={args.judges}",
            "plan=true",
            "progress=false",
            f"dataset.path={data}",
            f"hydra.sweep.dir={Path(tmp) / 'sweep'}",
        ]
        subprocess.run(cmd, env=env, cwd=tmp, check=True, capture_output=True, text=True)
        summed = json.loads((Path(tmp) / "sweep" / "plan.json").read_text())
        jobs = [json.loads(p.read_text()) for p in sorted((Path(tmp) / "sweep").glob("*/plan.json"))]
    print(
        f"{args.instances} instances x (1 reference + 5 x {args.generators} generators), {args.refs} passages each;"
        f" experiment=rq_novelty_illusion (novelty+narrowness x independent+comparative, 3 samples)"
    )
    head = f"{'judge':<16}{'rubric':<12}{'mode':<13}{'calls':>9}{'prompt tok':>14}{'<= compl tok':>14}"
    print(head + f"{'live $':>12}{'batch $':>12}")

    def usd(value: float | None) -> str:
        return "unknown" if value is None else f"{value:,.0f}"

    for job in jobs:
        cost = job["cost_usd"]
        print(
            f"{job['judge']:<16}{job['rubric']:<12}{job['mode']:<13}{job['calls_to_make']:>9,}"
            f"{job['prompt_tokens']:>14,}{job['completion_tokens_bound']:>14,}"
            f"{usd(cost['live']['bound']):>12}{usd(cost['batch']['bound']):>12}"
        )
    for judge in args.judges.split(","):
        mine = [j for j in jobs if j["judge"] == judge]
        live = [j["cost_usd"]["live"]["bound"] for j in mine]
        batch = [j["cost_usd"]["batch"]["bound"] for j in mine]
        print(
            f"{judge}: {sum(j['calls_to_make'] for j in mine):,} calls; at most "
            f"${usd(None if None in live else sum(live))} live, ${usd(None if None in batch else sum(batch))} batch"
        )
    print(
        f"sweep: {summed['calls_to_make']:,} calls, {summed['prompt_tokens']:,} prompt tokens, <= "
        f"{summed['completion_tokens_bound']:,} completion tokens; at most ${usd(summed['cost_usd']['live']['bound'])}"
        f" live, ${usd(summed['cost_usd']['batch']['bound'])} batch"
    )


if __name__ == "__main__":
    main()
