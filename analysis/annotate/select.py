"""Disagreement-driven human annotation: send experts the items whose labels are most uncertain.

`python -m analysis.annotate export <run-or-multirun-dir> --out DIR --n 50 [--by entropy|disagreement|flip]
[--humans FILE] [--rubric NAME]` ranks every (instance, candidate, dimension) that a judge scored and no
expert in `--humans` has labelled yet (the others are left out and counted) by one uncertainty column —
`entropy`: Dawid–Skene posterior entropy of the raters' rounded scores; `disagreement`: the largest range of
the judges' candidate scores within one mode; `flip`: the largest change of one judge's score between
independent and comparative mode — and writes a blinded set of one rubric's items (`--rubric` picks it in a study of several):
`sheet.csv` (what annotators see: background, text, the rubric's own wording for the dimension, its scale;
no judge, generator or reference names), `labelstudio_tasks.json` + `labelstudio_config.xml` (Label Studio
import), and `key.csv` (for the study only: item → instance, candidate, source, dimension, and the
randomised position each item was shown at).

`python -m analysis.annotate ingest <sheet.csv | labelstudio-export.json> --key DIR/key.csv --out FILE`
turns completed annotations into the human-labels format (annotator, instance_id, candidate_id, source,
dimension, score); with `--root DIR` it then recomputes inter-annotator reliability and the latent model.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import latent
from analysis.annotate import files as io
from analysis.latent import LATENT_COMPETENCE
from analysis.load.checks import csv_line
from analysis.load.collect import load_humans, load_results
from analysis.robustness import note_perturbed, unperturbed
from analysis.stats import latent_models, modes
from analysis.stats.corrected import RULE
from analysis.stats.humans import (
    DESIGN,
    HUMAN_COLUMNS,
    HUMAN_MODE,
    INCLUSION,
    first_duplicate,
    human_reliability,
)
from analysis.stats.scores import candidate_scores
from core.cells import write_csv
from core.intervals import positive_int
from core.rubric import RubricSpec

UNCERTAINTY = ("entropy", "disagreement", "flip")
#: Designs with known inclusion probabilities (`sample`): their labels can give corrected estimates.
DESIGNED = ("random", "stratified")
#: The stratified design's default sampling rates per stratum of judge disagreement, lowest first.
DEFAULT_RATES = (0.2, 0.6)


def uncertainty(results: pd.DataFrame, humans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (instance, candidate, dimension): source, entropy (bits), disagreement, flip (NaN if n/a), from the
    unperturbed rows (perturbed ones are analysis.robustness's), and what `select` needs to send experts only
    new items: `judged` (some judge scored it) and `n_expert` (labels already given in `humans`). The experts'
    labels still inform the Dawid–Skene model behind the entropy (they calibrate each judge)."""
    results = unperturbed(results)
    labels = latent_models.score_labels(results, humans)
    keys = ["task", "instance_id", "candidate_id", "source", "dimension"]
    out = labels.drop_duplicates("task")[keys].set_index("task")
    out["judged"] = out.index.isin(labels.loc[labels["kind"] == "judge", "task"])
    expert = labels.loc[labels["kind"] == "expert"].groupby("task").size()
    out["n_expert"] = expert.reindex(out.index, fill_value=0).astype(int)
    out["entropy"] = _entropy(labels).reindex(out.index)
    cands = candidate_scores(results).astype({"candidate_id": str, "dimension": str, "mode": str})
    cands["task"] = latent_models.score_task(cands)
    judged = cands.loc[cands["mode"] != HUMAN_MODE]
    out["disagreement"] = _judge_range(judged).reindex(out.index)
    by_mode = judged.pivot_table(index=["task", "judge"], columns="mode", values="score", observed=True)
    pairs = [p for p in modes.shift_pairs(modes.kinds_by_mode(results)) if set(p) <= set(by_mode.columns)]
    if pairs:  # the largest score change between a one-candidate mode and a several-candidates mode
        flips = [(by_mode[a] - by_mode[b]).abs().groupby(level="task").max() for a, b in pairs]
        out["flip"] = pd.concat(flips, axis=1).max(axis=1).reindex(out.index)
    else:
        out["flip"] = np.nan
    return out.reset_index()


def _entropy(labels: pd.DataFrame) -> pd.Series:
    """Per task: the Dawid–Skene posterior entropy (bits), the largest over the fits of `mode_groups` (one
    per judge mode, each judge one rater in it, with every expert): a judge run in two modes is not two
    raters whose agreement with each other makes its label look certain. NaN where no fit has two raters."""
    parts = []
    for _, group in latent_models.mode_groups(labels):
        if group["worker"].nunique() < 2:
            continue
        post = latent_models.dawid_skene(group).posteriors.fillna(0.0)
        p = post.to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            parts.append(pd.Series(-np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1), index=post.index))
    if not parts:
        return pd.Series(np.nan, index=pd.Index(labels["task"].unique(), name="task"))
    return pd.concat(parts).groupby(level=0).max()


def _judge_range(judged: pd.DataFrame) -> pd.Series:
    """Per task: the largest range of the judges' scores within one mode (NaN where no mode has two judges).
    One judge's change between modes is `flip`, not a disagreement between judges."""
    by_mode = judged.groupby(["task", "mode"], observed=True)["score"]
    spread = (by_mode.max() - by_mode.min()).where(by_mode.count() >= 2)
    return spread.groupby(level="task").max()


def eligible(table: pd.DataFrame) -> pd.Series:
    """Items an expert should be sent: a judge scored it (else there is nothing to check the judges against)
    and no expert has labelled it yet (else the label exists and the round is wasted on it)."""
    return table["judged"].astype(bool) & (table["n_expert"] == 0)


def select(table: pd.DataFrame, n: int, by: str, seed: int = 0) -> pd.DataFrame:
    """The `n` most uncertain `eligible` items by column `by` (ties broken by the other columns, then at
    random)."""
    if n < 1:
        raise ValueError(f"--n {n}: n must be at least 1")
    if by not in UNCERTAINTY:
        raise ValueError(f"--by must be one of {', '.join(UNCERTAINTY)}, not {by!r}")
    table = table.loc[eligible(table)]
    if table.empty:
        raise ValueError("no item left to export: every item a judge scored is already labelled in --humans")
    if table[by].isna().all():
        raise ValueError(f"--by {by}: no item has this measure (e.g. flip needs a judge in both modes)")
    others = [c for c in UNCERTAINTY if c != by]
    shuffled = table.sample(frac=1.0, random_state=seed)
    ranked = shuffled.sort_values([by, *others], ascending=False, na_position="last", kind="stable")
    return ranked.head(n).assign(selected_by=by, design=RULE + by, inclusion_prob=np.nan)


def unit_disagreement(table: pd.DataFrame) -> pd.Series:
    """Per unit (instance × dimension): the largest judge disagreement of its items (`disagreement`, else the
    entropy where no mode has two judges; 0 where neither is known), the stratified design's strata key."""
    spread = table["disagreement"].fillna(table["entropy"]).fillna(0.0)
    return spread.groupby([table["instance_id"], table["dimension"]]).max()


def sample(
    table: pd.DataFrame, n: int, by: str, seed: int = 0, rates: Sequence[float] = DEFAULT_RATES
) -> pd.DataFrame:
    """The `eligible` items of units (instance × dimension: every candidate of an instance on one dimension,
    the unit a best-of-K win rests on) drawn with known inclusion probabilities, recorded per item:
    `random`: `n` units, a simple random sample (π = n / N); `stratified`: the units cut by judge
    disagreement into `len(rates)` strata of near-equal size (lowest first), in stratum h a simple random
    sample of round(rate_h · N_h) units, at least 1 (π = n_h / N_h)."""
    if by not in DESIGNED:
        raise ValueError(f"--by must be one of {', '.join(DESIGNED)}, not {by!r}")
    table = table.loc[eligible(table)]
    if table.empty:
        raise ValueError("no item left to export: every item a judge scored is already labelled in --humans")
    spread = unit_disagreement(table)
    units = spread.index.to_frame(index=False).assign(spread=spread.to_numpy())
    rng = np.random.default_rng(seed)
    if by == "random":
        units["stratum"] = 0
        plan = {0: min(n, len(units))}
    else:
        if not rates or any(not 0 < r <= 1 for r in rates):
            raise ValueError(f"--rates {','.join(map(str, rates))}: each stratum's rate must be in (0, 1]")
        order = units["spread"].rank(method="first").to_numpy() - 1
        units["stratum"] = (order * len(rates) // len(units)).astype(int)
        sizes = units["stratum"].value_counts()
        plan = {h: min(int(sizes[h]), max(1, round(rates[h] * int(sizes[h])))) for h in sizes.index}
    picked = []
    for h, take in sorted(plan.items()):
        members = units.loc[units["stratum"] == h]
        chosen = members.iloc[np.sort(rng.choice(len(members), size=take, replace=False))]
        picked.append(chosen.assign(inclusion_prob=take / len(members)))
    drawn = pd.concat(picked)[["instance_id", "dimension", "stratum", "inclusion_prob"]]
    items = table.merge(drawn, on=["instance_id", "dimension"], how="inner")
    return items.assign(selected_by=by, design=by)


def blind(
    chosen: pd.DataFrame,
    rubrics: dict[str, RubricSpec],
    texts: dict[tuple[str, str], io.ItemText],
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(sheet, key): items in a seeded random order under neutral ids; the key records the order."""
    order = np.random.default_rng(seed).permutation(len(chosen))
    key = chosen.iloc[order].reset_index(drop=True)
    key.insert(0, "position", np.arange(1, len(key) + 1))
    key.insert(0, "item", [f"item-{p:03d}" for p in key["position"]])
    rubric = next(iter(rubrics.values()))
    key["rubric"] = rubric.name
    ranges = io.score_ranges(rubric)
    key["low"] = [ranges[d][0] for d in key["dimension"]]
    key["high"] = [ranges[d][1] for d in key["dimension"]]
    key["text_sha"] = [
        io.text_digest(texts[(str(i), str(c))].text)
        for i, c in zip(key["instance_id"], key["candidate_id"], strict=True)
    ]
    rows = []
    for r in key.itertuples(index=False):
        text = texts[(str(r.instance_id), str(r.candidate_id))]
        rows.append(
            {
                "item": r.item,
                "position": r.position,
                "background": text.background,
                "text": text.text,
                "dimension": r.dimension,
                "question": io.wording(rubric, r.dimension),
                "scale": io.scale(rubric, r.dimension),
                "annotator": "",
                "score": "",
                "comment": "",
            }
        )
    return pd.DataFrame(rows), key


def export(
    root: str | Path,
    out: str | Path,
    n: int = 50,
    by: str = "entropy",
    humans: pd.DataFrame | None = None,
    dataset: str | Path | None = None,
    seed: int = 0,
    rubric: str | None = None,
    rates: Sequence[float] = DEFAULT_RATES,
) -> pd.DataFrame:
    """Write the blinded annotation set of one rubric: the `n` most uncertain items (a rule: `UNCERTAINTY`),
    or a design with known inclusion probabilities (`DESIGNED`, `sample`); returns the key, which records the
    design and each item's inclusion probability. Refuses a folder that holds an earlier export's key."""
    rubrics, data_path = io.study_inputs(root, rubric)
    results = load_results(root)
    results = results.loc[results["rubric"].astype(str).isin(rubrics)]  # other rubrics' runs: not asked
    note_perturbed(results, unperturbed(results))
    if humans is not None:  # a label on another rubric's dimension is no label of these items
        humans = humans.loc[humans["dimension"].astype(str).isin(set(results["dimension"].astype(str)))]
    out = Path(out)
    if (out / "key.csv").exists():  # a sheet of the earlier export would ingest onto other items
        raise ValueError(
            f"{out / 'key.csv'} exists: the sheets of that export are tied to it; export into a new --out folder"
        )
    texts = io.item_texts(Path(dataset) if dataset else data_path)
    table = uncertainty(results, humans)
    note_left_out(table)
    chosen = sample(table, n, by, seed, rates) if by in DESIGNED else select(table, n, by, seed)
    sheet, key = blind(chosen, rubrics, texts, seed)
    out.mkdir(parents=True, exist_ok=True)
    io.write_sheet(sheet, out / "sheet.csv")
    io.write_key(key, out / "key.csv")
    (out / "labelstudio_tasks.json").write_text(
        json.dumps(io.labelstudio_tasks(sheet), indent=1, ensure_ascii=False)
    )
    (out / "labelstudio_config.xml").write_text(io.labelstudio_config(next(iter(rubrics.values()))))
    return key


def note_left_out(table: pd.DataFrame) -> None:
    """One `note:` line counting the items that are not sent (what `eligible` leaves out), when any."""
    unjudged = int((~table["judged"].astype(bool)).sum())
    labelled = int((table["judged"].astype(bool) & (table["n_expert"] > 0)).sum())
    if unjudged or labelled:
        print(
            f"note: left out {unjudged} item(s) no judge scored (labelled in --humans only) and {labelled} "
            "item(s) already labelled in --humans",
            file=sys.stderr,
        )


def ingest(path: str | Path, key_path: str | Path, annotator: str | None = None) -> pd.DataFrame:
    """Completed annotations (sheet CSV or Label Studio JSON export) as human labels, checked against the key
    (each row's item, and its text and dimension as the key recorded them: a sheet of another export is
    refused), with the key's design and inclusion probability per label; `line` says where each came from
    ("row N" of the sheet, "task N" of the export) for later errors."""
    path, key = Path(path), io.read_key(Path(key_path))
    raw = io.read_labelstudio(path) if path.suffix.lower() == ".json" else io.read_sheet(path, annotator)
    merged = raw.merge(key, on="item", how="left", validate="many_to_one")
    unknown = merged.loc[merged["candidate_id"].isna()]
    if len(unknown):
        first = unknown.iloc[0]
        raise io.AnnotationError(f"{path}: {first['line']}: item: {first['item']!r} is not in {key_path}")
    io.check_against_key(merged, path, Path(key_path))
    io.check_scores(merged, path)
    for col in (DESIGN, INCLUSION):
        if col not in merged:
            merged[col] = ""
    return merged[[*HUMAN_COLUMNS, DESIGN, INCLUSION, "line"]].reset_index(drop=True)


def _recompute(root: str, labels: pd.DataFrame) -> None:
    print(human_reliability(labels, n_boot=200).round(3).to_string(index=False))
    results = load_results(root)
    note_perturbed(results, unperturbed(results))
    tables = latent.latent_tables(results, labels, n_boot=200)  # unperturbed rows only
    if tables:
        comp = LATENT_COMPETENCE.need(tables)
        print(comp.loc[comp["method"] == "Dawid-Skene"].round(3).to_string(index=False))


def check_new_labels(kept: pd.DataFrame, labels: pd.DataFrame, new: str, kept_path: str | None) -> None:
    """A ValueError (one line) when an ingested label (`labels`, from `ingest`) repeats an annotator × item ×
    dimension already given, in the file or in the --humans file `kept_path` (read as `kept`): the report and
    the viewer refuse such a file. It names the sheet row or export task (rows without a score are not
    labels, so a label's number is not its row) and the kept file's line."""
    both = pd.concat([kept, labels], ignore_index=True)
    repeated = first_duplicate(both)
    if repeated is None:
        return
    pos, first, key = repeated  # the kept file has no repeat (load_humans refused it), so pos is a new label
    n_kept = len(kept)
    if first < n_kept:
        where = f"{kept_path}:{csv_line(Path(str(kept_path)), first)}"
    else:
        where = labels["line"].iloc[first - n_kept]
    raise ValueError(f"{new}: {labels['line'].iloc[pos - n_kept]}: label ({key}) already given in {where}")


def rates_list(text: str) -> tuple[float, ...]:
    """`--rates 0.2,0.6`: one sampling rate in (0, 1] per stratum (an argparse type: a bad one is one line)."""
    try:
        rates = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated numbers, e.g. 0.2,0.6") from None
    if not rates or any(not 0 < r <= 1 for r in rates):
        raise argparse.ArgumentTypeError(f"{text!r}: each stratum's rate must be in (0, 1]")
    return rates


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `export` or `ingest` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m analysis.annotate", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a blinded annotation set of the most uncertain items")
    ex.add_argument("root")
    ex.add_argument("--out", required=True)
    ex.add_argument("--n", type=positive_int, default=50, help="how many items (at least 1)")
    ex.add_argument(
        "--by",
        choices=[*UNCERTAINTY, *DESIGNED],
        default="entropy",
        help="a rule (entropy, disagreement, flip: the top n; no corrected estimate from these labels) or a "
        "design with known inclusion probabilities (random: n instance × dimension units; stratified: by judge "
        "disagreement, at --rates)",
    )
    ex.add_argument(
        "--rates",
        type=rates_list,
        default=DEFAULT_RATES,
        help="--by stratified: the sampling rate of each stratum of judge disagreement, lowest first "
        f"(default {','.join(map(str, DEFAULT_RATES))})",
    )
    ex.add_argument(
        "--humans",
        help="existing human labels: their items are not sent again, and they count as raters for the entropy",
    )
    ex.add_argument("--rubric", help="the rubric whose items to export, in a study run with several")
    ex.add_argument("--dataset", help="the instances JSONL (default: the runs' own dataset_path)")
    ex.add_argument("--seed", type=int, default=0)
    ing = sub.add_parser("ingest", help="completed sheet CSV or Label Studio JSON -> human labels CSV")
    ing.add_argument("file")
    ing.add_argument("--key", required=True, help="key.csv written by export")
    ing.add_argument("--out", required=True, help="human labels CSV to write")
    ing.add_argument("--annotator", help="annotator name for a sheet without an annotator column")
    ing.add_argument("--humans", help="existing labels to keep (written together with the new ones)")
    ing.add_argument("--root", help="results folder: recompute reliability and the latent model")
    args = parser.parse_args(argv)

    try:
        if args.command == "export":
            humans = load_humans(args.humans) if args.humans else None
            key = export(
                args.root, args.out, args.n, args.by, humans, args.dataset, args.seed, args.rubric, args.rates
            )
            print(
                f"{len(key)} items by {args.by} (design {key[DESIGN].iloc[0]}) -> {args.out} (sheet.csv, "
                "labelstudio_*, key.csv)",
                file=sys.stderr,
            )
            return 0
        labels = ingest(args.file, args.key, args.annotator)
        kept = load_humans(args.humans) if args.humans else labels.iloc[:0, : len(HUMAN_COLUMNS)]
        check_new_labels(kept, labels, args.file, args.humans)
        labels = pd.concat([kept, labels.drop(columns="line")], ignore_index=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_csv(labels, args.out)  # opened in spreadsheets: an annotator `=HYPERLINK(...)` runs nothing
        print(f"{len(labels)} labels -> {args.out}", file=sys.stderr)
        if args.root:
            _recompute(args.root, labels)
    except (OSError, ValueError, KeyError, io.AnnotationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
