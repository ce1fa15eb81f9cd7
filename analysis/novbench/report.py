"""NovBench tables: `python -m analysis.novbench_report RUN_DIR` or `... --human-pairs FILE`.

* ``RUN_DIR``: collects every `novelty_evaluations.jsonl` that `experiments.stages.generate task=novelty` wrote below
  the folder, scores each generated evaluation with the four NovBench metrics and writes NovBench's Table 2
  (Rel., Cov., Clarity, DistAcc per model and prompting strategy, 95% bootstrap CIs, failed generations
  counted) as CSV and Markdown.
* ``--human-pairs FILE``: the human validation of App. D (``analysis.novbench.human``): Agreement with the
  annotators' strict majority (Eq. 8, metric ties counted beside it), Spearman ρ with its p-value and Fleiss
  κ, with bootstrap CIs, for the declared combination (``--combine``) and for each metric alone.

Every output states the definitions that produced it: clarity variant, sentence or item units, the failed-
generation policy, and the embedding and perplexity models.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.novbench.human import Combination, default_combinations, validation_table
from analysis.novbench.metrics import score_frame, summary_table
from analysis.report.paper_tables import novbench_quality, novbench_validation, to_latex
from core.cells import md_cell, write_csv
from core.intervals import positive_int
from experiments.datasets.fetch import data_or_path
from experiments.datasets.novbench import load_human_pairs
from judge.local.mpnet import ModelUnavailable

DEFINITION_COLUMNS = (
    "clarity_variant",
    "unit",
    "failed_policy",
    "relevance_model",
    "coverage_model",
    "ppl_model",
)


def load_evaluations(root: Path) -> pd.DataFrame:
    """All generated evaluations below `root`, one row per (item, model, strategy, run)."""
    rows = []
    for path in sorted(root.rglob("novelty_evaluations.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    rows.append({**json.loads(line), "run": str(path.parent.relative_to(root))})
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
    if not rows:
        raise FileNotFoundError(f"{root}: no novelty_evaluations.jsonl below this folder")
    return pd.DataFrame(rows)


def definitions(scores: pd.DataFrame) -> str:
    """One line naming every definition and model behind the numbers."""
    parts = []
    for col in DEFINITION_COLUMNS:
        if col in scores.columns:
            vals = sorted({str(v) for v in scores[col] if v is not None and v == v})
            parts.append(f"{col}: {', '.join(vals) or 'none'}")
    return "Definitions: " + "; ".join(parts) + "."


def table_markdown(table: pd.DataFrame, scores: pd.DataFrame) -> str:
    """NovBench Table 2 as Markdown: mean [95% CI] per metric, failed generations, definitions and models."""
    lines = [
        "| model | strategy | n | failed | in format | Rel. | Cov. | Clarity | DistAcc |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    groups = scores.groupby(["model", "strategy"])
    parsed, failed = groups["generated_parsed"].sum(), groups["failed"].sum()
    for _, r in table.iterrows():
        cells = [
            f"{r[m]:.3f} [{r[f'{m}_lo']:.3f}, {r[f'{m}_hi']:.3f}]"
            for m in ("Rel.", "Cov.", "Clarity", "DistAcc")
        ]
        key = (r["model"], r["strategy"])
        lines.append(
            f"| {md_cell(r['model'])} | {md_cell(r['strategy'])} | {r['n']} | {int(failed.get(key, 0))} | "
            f"{int(parsed.get(key, 0))} | " + " | ".join(cells) + " |"
        )
    policy = str(scores["failed_policy"].iloc[0]) if len(scores) else "zero"
    lines.append(
        "\n`failed`: generations with no usable sentence (error, refusal, empty sections); "
        + (
            "they score 0 on every metric, as in the paper's Table 2."
            if policy == "zero"
            else "their metrics are undefined and left out of the means."
        )
        + " `in format`: texts with Positive/Neutral/Negative sections."
    )
    return "\n".join(lines) + f"\n\n{definitions(scores)}\n"


def human_markdown(table: pd.DataFrame, scores: pd.DataFrame) -> str:
    """The App. D validation table as Markdown."""
    lines = [
        "| metric | combination | Agreement [95% CI] | n | metric ties | Spearman ρ [95% CI] | ρ p-value "
        "| Fleiss κ [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        ci = {
            k: f"{r[k]:.3f} [{r[f'{k}_lo']:.3f}, {r[f'{k}_hi']:.3f}]" for k in ("agreement", "rho", "kappa")
        }
        ties = f"{r['n_metric_tie']}" + (f" (+{r['n_undefined']} undefined)" if r["n_undefined"] else "")
        lines.append(
            f"| {r['metric']} | `{r['combination']}` | {ci['agreement']} | {r['n_agreement']} | {ties} | "
            f"{ci['rho']} | {r['rho_p']:.2g} | {ci['kappa']} |"
        )
    r = table.iloc[0]
    lines.append(
        f"\n{r['n_pairs']} pairs; {r['n_no_majority']} without a strict human majority (excluded). "
        "Agreement per Eq. 8: over the `n` pairs with a strict majority, a metric tie (or an undefined "
        "metric) counting as a disagreement. Each metric is rescaled to [0, 1] by its range before "
        "combining (Relevance (IMS-1)/4)."
    )
    return "\n".join(lines) + f"\n\n{definitions(scores)}\n"


def score_pairs(pairs: Sequence[dict[str, Any]], **score_kw: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metric scores of side A and side B of every pair (rows in pair order)."""
    frame = pd.DataFrame(
        [
            {"id": p["id"], "side": side, "g": p[f"text_{side.lower()}"], "n": p["source"], "h": p["human"]}
            for p in pairs
            for side in ("A", "B")
        ]
    )
    scores = score_frame(frame, "g", "n", "h", **score_kw)
    return (
        scores[scores["side"] == "A"].reset_index(drop=True),
        scores[scores["side"] == "B"].reset_index(drop=True),
    )


def run_human(path: Path, out: Path, combination: Combination, n_boot: int, **score_kw: Any) -> str:
    """Score both sides of every pair, validate, write the tables; returns the Markdown."""
    pairs = load_human_pairs(path)
    side_a, side_b = score_pairs(pairs, **score_kw)
    votes = np.array([[p["votes"][k] for k in sorted(p["votes"])] for p in pairs], dtype=object)
    table = validation_table(side_a, side_b, votes, default_combinations(combination), n_boot=n_boot)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(pd.concat([side_a, side_b]), out / "novbench_human_scores.csv")
    write_csv(table, out / "novbench_human.csv")
    markdown = human_markdown(table, side_a)
    (out / "novbench_human.md").write_text(markdown, encoding="utf-8")
    (out / "novbench_human.tex").write_text(to_latex([novbench_validation(table)]), encoding="utf-8")
    return markdown


def run_table(root: Path, out: Path, **score_kw: Any) -> str:
    """Table 2 of the generations below `root`; returns the Markdown."""
    scores = score_frame(load_evaluations(root), "generated", "paper_novelty", "output_format", **score_kw)
    table = summary_table(scores, by=("model", "strategy"))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(scores, out / "novbench_scores.csv")
    write_csv(table, out / "novbench_table.csv")
    markdown = table_markdown(table, scores)
    (out / "novbench_table.md").write_text(markdown, encoding="utf-8")
    (out / "novbench_table.tex").write_text(to_latex([novbench_quality(table)]), encoding="utf-8")
    return markdown


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, nargs="?", help="folder with novelty_evaluations.jsonl files")
    parser.add_argument(
        "--human-pairs",
        default=None,
        help="NovBench human-study pairs (JSONL; data:novbench_human_pairs_dev.jsonl: the fetched file)",
    )
    parser.add_argument(
        "--clarity",
        choices=("paper", "released"),
        default="paper",
        help="paper: (KC+LS+FS)/3 (default); released: 0.5*KC + 0.5*LS",
    )
    parser.add_argument("--unit", choices=("sentence", "item"), default="sentence")
    parser.add_argument(
        "--failed",
        choices=("zero", "nan"),
        default="zero",
        help="failed/empty generations: 0 on every metric (paper, default) or undefined",
    )
    parser.add_argument("--keyword-match", choices=("token", "substring"), default="token")
    parser.add_argument(
        "--relevance-model",
        choices=("mpnet", "minilm"),
        default="mpnet",
        help="Relevance encoder: all-mpnet-base-v2, SPICED's base model (default), or MiniLM",
    )
    parser.add_argument(
        "--combine",
        default="relevance+correctness+coverage+clarity",
        help="metric combination for --human-pairs, e.g. 'relevance=2,clarity=1'",
    )
    parser.add_argument("--n-boot", type=positive_int, default=2000)
    parser.add_argument("--out", type=Path, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.root is None) == (args.human_pairs is None):
        parser.error("give either a run folder or --human-pairs FILE")
    score_kw = {
        "clarity": args.clarity,
        "unit": args.unit,
        "failed": args.failed,
        "keyword_match": args.keyword_match,
        "relevance_model": args.relevance_model,
    }
    try:
        if args.human_pairs is not None:
            pairs = data_or_path(args.human_pairs)
            out = args.out or Path("novbench_human")
            markdown = run_human(pairs, out, Combination.parse(args.combine), args.n_boot, **score_kw)
        else:
            markdown = run_table(args.root, args.out or args.root, **score_kw)
    except (
        OSError,
        ValueError,
        ModelUnavailable,
    ) as exc:  # DatasetError is a ValueError; a full disk is an OSError
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
