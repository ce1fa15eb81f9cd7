"""`python -m analysis.novbench_report <run-or-multirun-dir> [--clarity released|paper] [--out DIR]`

Collects every `novelty_evaluations.jsonl` that `experiments.generate task=novelty` wrote below the folder,
scores each generated evaluation with the four NovBench metrics, and writes NovBench's Table 2 (Rel., Cov.,
Clarity, DistAcc per model and prompting strategy, with 95% bootstrap CIs) as CSV and Markdown, stating
which embedding and perplexity models produced the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.novbench import score_frame, summary_table


def load_evaluations(root: Path) -> pd.DataFrame:
    """All generated evaluations below `root`, one row per (item, model, strategy, run)."""
    rows = []
    for path in sorted(root.rglob("novelty_evaluations.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append({**json.loads(line), "run": str(path.parent.relative_to(root))})
    if not rows:
        raise FileNotFoundError(f"{root}: no novelty_evaluations.jsonl below this folder")
    return pd.DataFrame(rows)


def table_markdown(table: pd.DataFrame, scores: pd.DataFrame) -> str:
    """NovBench Table 2 as Markdown: mean [95% CI] per metric, with the models that produced them."""
    lines = ["| model | strategy | n | in format | Rel. | Cov. | Clarity | DistAcc |", "|---|---|---|---|---|---|---|---|"]
    parsed = scores.groupby(["model", "strategy"])["generated_parsed"].sum()
    for _, r in table.iterrows():
        cells = [f"{r[m]:.3f} [{r[f'{m}_lo']:.3f}, {r[f'{m}_hi']:.3f}]" for m in ("Rel.", "Cov.", "Clarity", "DistAcc")]
        fmt = int(parsed.get((r["model"], r["strategy"]), 0))
        lines.append(f"| {r['model']} | {r['strategy']} | {r['n']} | {fmt} | " + " | ".join(cells) + " |")
    lines.append("\n`in format`: generated texts with Positive/Neutral/Negative sections; the metrics are undefined "
                 "(NaN, never 0) for the others.")
    models = {c: sorted(set(scores[c].dropna().astype(str))) for c in scores.columns if c.endswith("_model")}
    notes = "; ".join(f"{k}: {', '.join(v)}" for k, v in models.items() if v)
    return "\n".join(lines) + f"\n\nModels: {notes}.\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--clarity", choices=("released", "paper"), default="released")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        evals = load_evaluations(args.root)
    except (FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    scores = score_frame(evals, "generated", "paper_novelty", "output_format", clarity=args.clarity)
    table = summary_table(scores, by=("model", "strategy"))
    out = args.out or args.root
    out.mkdir(parents=True, exist_ok=True)
    scores.to_csv(out / "novbench_scores.csv", index=False)
    table.to_csv(out / "novbench_table.csv", index=False)
    markdown = table_markdown(table, scores)
    (out / "novbench_table.md").write_text(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
