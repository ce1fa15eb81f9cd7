"""`python -m analysis.card <run-or-multirun-dir> [--humans FILE] [--out DIR]`: one reliability card per judge
(and rubric: `cards/<judge>.md`, or `cards/<rubric>/<judge>.md` in a study of several rubrics).

Every card has the same fields (`card_fields()`: the card's own and the tables' declared `CardField`s), so
cards compare across judges and across versions of one judge; a field that does not apply is an empty list or
null with the reason in `notes`, never left out.
Cost stays null ("unknown") when any run of the judge could not price its calls.
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
import pyarrow.parquet as pq

from analysis import latent
from analysis.card import cli
from analysis.card.markdown import card_markdown
from analysis.latent import LATENT_DUPLICATES
from analysis.load.checks import LabelCoverage
from analysis.load.collect import find_results, load_results, split_rubric
from analysis.load.completeness import checked_humans, provider_failures, run_status
from analysis.report.summary import banner_lines, parse_rate
from analysis.robustness import note_perturbed, unperturbed
from analysis.stats import null_ranges
from analysis.stats.multiplicity import family_of
from analysis.tables import registry
from analysis.tables.declarations import card_specs, p_columns, p_families
from analysis.tables.registry import StudyInputs
from core.cells import unescape_text
from core.schema import Manifest, run_manifest
from experiments.duplicates import duplicate_raters

#: The card's own fields before and after the table fields (`analysis.tables.declarations`: each table's `CardField`).
HEAD_FIELDS: tuple[str, ...] = (
    "judge",
    "completeness",
    "models",
    "rubric_versions",
    "dataset_hashes",
    "modes",
    "rows",
    "parse_rate",
    "provider_failed",
    "cost_usd",
    "latency_s",
)


def card_fields() -> tuple[str, ...]:
    """Every field of a card, in order: the card's own, the declared tables' (`CardField.order`), notes."""
    return (*HEAD_FIELDS, *(s.key for s in card_specs()), "notes")


CARD_FIELDS: tuple[str, ...] = card_fields()


def _records(frame: pd.DataFrame | None, cols: Sequence[str]) -> list[dict[str, Any]]:
    if frame is None or frame.empty:
        return []
    out = frame[[c for c in cols if c in frame]].astype(object)
    return [{k: _plain(v) for k, v in row.items()} for row in out.to_dict("records")]


def _plain(value: Any) -> Any:
    """JSON-safe scalars: numpy numbers to Python, NaN to None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def run_facts(root: str | Path) -> pd.DataFrame:
    """Per run folder: judge, model, mode, rubric versions, dataset hash, cost (None = unknown), and the
    latencies of the calls actually made and of the cached replays that record their original call's (older
    results recorded 0 s for a replay: left out)."""
    rows = []
    for path in find_results(root):
        man = run_manifest(path.parent)  # None: a run without one; a damaged one: a ManifestError
        cols = ["judge", "run_id", "latency_s", "cached", "prompt_id", "sample_idx"]
        if path.suffix == ".parquet":
            frame = pq.read_table(
                path, columns=[c for c in cols if c in pq.read_schema(path).names]
            ).to_pandas()
        else:
            frame = pd.read_csv(
                path,
                usecols=lambda c, wanted=frozenset(cols): c in wanted,
                dtype=dict.fromkeys(("judge", "run_id", "prompt_id"), str),
            )  # text: 01 is not 1
            frame = unescape_text(frame)  # names as the run wrote them (results.csv is formula-safe)
        calls = frame.drop_duplicates([c for c in ("prompt_id", "sample_idx") if c in frame])
        if "cached" in calls:  # a replay counts with its original call's latency where the results record it
            cached = calls["cached"].astype(str).str.lower().isin(["true", "1"])
            timed = (
                pd.to_numeric(calls["latency_s"], errors="coerce").gt(0)
                if "latency_s" in calls
                else cached & False
            )
            calls = calls.loc[(~cached | timed).to_numpy()]
        known = man if man is not None else Manifest()  # no manifest: every entry unknown
        rows.append(
            {
                "judge": known.judge or (str(frame["judge"].iloc[0]) if len(frame) else None),
                "run_id": str(frame["run_id"].iloc[0]) if "run_id" in frame and len(frame) else None,
                "model": known.model,
                "mode": known.mode,
                "rubric_versions": known.rubric_versions or {},
                "dataset_hash": known.dataset_hash,
                "cost_usd": known.cost_usd,
                "has_manifest": man is not None,
                "latency": calls["latency_s"].dropna().to_numpy(float)
                if "latency_s" in calls
                else np.array([]),
            }
        )
    return pd.DataFrame(rows)


def card_tables() -> set[str]:
    """The declared tables a card reads, and only those: its fields' (`card_specs`), the latent model's duplicate
    pairs (the notes), every table whose p-values are corrected in one family with a field's (`p_families`: a
    q-value depends on the whole family) and the tables that read all the others (the multiple-testing family
    that adds the q-values). Each table is computed from the study alone (only the `reads_all` ones read other
    tables), so a card shows the report's value without the report-only tables (the cross-dimension alignment,
    the combined judges, the score agreement, …), about half of what the cards computed before."""
    fields = {s.key for s in card_specs()} | {LATENT_DUPLICATES.key}
    columns, families = p_columns(), p_families()
    tested = {family_of(key, families) for key in fields if key in columns}
    together = {key for key in columns if family_of(key, families) in tested}
    return fields | together | {s.key for s in registry.REGISTRY if s.reads_all}


def study_tables(
    results: pd.DataFrame,
    humans: pd.DataFrame | None,
    n_boot: int,
    seed: int,
    reference: str = "reference",
    n_null: int = null_ranges.N_REPS,
) -> dict[str, pd.DataFrame]:
    """Every table a card draws from, keyed by field: the report's own tables (`registry.compute_tables`, so a
    card and the report show one value) and the card-only ones (`robustness`, the `flags` of
    `analysis.stats.null_ranges`), each as its declaration's `CardField.read` reads it; and `latent_duplicates`,
    one row per rater of a pair, for the cards' notes."""
    inputs = StudyInputs(results, humans, reference, n_boot, seed, n_null=n_null)
    computed = registry.compute_tables(inputs, report_only=False, keys=card_tables())
    tables = {}
    for spec in card_specs():
        assert spec.card is not None
        table = computed.get(spec.key, pd.DataFrame())
        tables[spec.key] = spec.card.read(table) if spec.card.read else table
    dup = LATENT_DUPLICATES.of(computed)
    tables[LATENT_DUPLICATES.key] = pd.DataFrame() if dup is None else dup
    if dup is not None:  # one row per rater of a pair, so each judge's card can say so
        each = [dup.assign(judge=_rater_judge(dup[a]), rater=dup[a]) for a in ("rater_a", "rater_b")]
        tables[LATENT_DUPLICATES.key] = pd.concat(each, ignore_index=True)
    return tables


def _rater_judge(rater: pd.Series) -> pd.Series:
    """The judge of a latent rater label ``judge [mode]`` (a ``human:`` name stays as it is)."""
    return rater.astype(str).str.replace(r" \[[^\]]*\]$", "", regex=True)


def make_card(
    judge: str,
    results: pd.DataFrame,
    facts: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    banner: list[str] | None = None,
) -> dict:
    """One judge's card: every field of `card_fields()`, in that order; `banner`: its completeness lines
    (`judge_banner`)."""
    mine = results.loc[results["judge"].astype(str) == judge]
    runs = facts.loc[facts["judge"] == judge]
    if "run_id" in facts and "run_id" in mine:  # and the runs behind a split label (`judge@run`)
        runs = facts.loc[(facts["judge"] == judge) | facts["run_id"].isin(set(mine["run_id"].astype(str)))]
    costs = runs["cost_usd"].tolist()
    latency = np.concatenate(runs["latency"].tolist()) if len(runs) else np.array([])
    versions: dict[str, set[str]] = {}
    for rv in runs["rubric_versions"]:
        for name, ver in rv.items():
            versions.setdefault(name, set()).add(ver)
    parsed = parse_rate(mine)  # per call, as the manifest and the leaderboard count it
    card: dict[str, Any] = {
        "judge": judge,
        "completeness": banner or [],
        "models": sorted(
            {str(m) for m in runs["model"].dropna()}
            | {str(m) for m in mine.get("model", pd.Series()).dropna().unique()}
        ),
        "rubric_versions": {k: sorted(v) for k, v in sorted(versions.items())},
        "dataset_hashes": sorted({str(h) for h in runs["dataset_hash"].dropna()}),
        "modes": sorted(map(str, mine["mode"].dropna().unique())),
        "rows": len(mine),
        "parse_rate": _plain(float(parsed)) if parsed is not None else None,  # of the answered calls
        "provider_failed": int(provider_failures(mine)["provider_failed"].sum()),
        "cost_usd": None if (not costs or any(pd.isna(c) for c in costs)) else round(float(sum(costs)), 6),
        "latency_s": {
            "calls": len(latency),
            "median": _plain(float(np.median(latency))) if len(latency) else None,
            "p90": _plain(float(np.quantile(latency, 0.9))) if len(latency) else None,
        },
    }
    notes = []
    if card["cost_usd"] is None:
        notes.append("cost unknown: a run could not price its calls (or has no manifest)")
    for spec in card_specs():
        assert spec.card is not None
        table = tables.get(spec.key, pd.DataFrame())
        part = table.loc[table["judge"].astype(str) == judge] if len(table) else table
        card[spec.key] = _records(part, spec.card.columns)
        if not card[spec.key]:
            notes.append(f"{spec.key}: {spec.card.why_empty}")
    notes += _duplicate_notes(judge, tables.get(LATENT_DUPLICATES.key, pd.DataFrame()))
    card["notes"] = notes
    return {k: card[k] for k in card_fields()}


def _pairs(dup: pd.DataFrame | None) -> pd.DataFrame:
    """The duplicate pairs once each (the card's table lists a pair under both judges)."""
    if dup is None or dup.empty:
        return pd.DataFrame()
    return dup.drop_duplicates(["rater_a", "rater_b", "mode"])


def _duplicate_notes(judge: str, dup: pd.DataFrame) -> list[str]:
    """The latent model's duplicate-rater warnings that name `judge`."""
    if dup.empty or "judge" not in dup:
        return []
    mine = dup.loc[dup["judge"].astype(str) == judge].drop_duplicates(["rater_a", "rater_b", "mode"])
    return [f"latent_competence: {line}" for line in latent.duplicate_lines({"latent_duplicates": mine})]


def write_cards(
    root: str | Path,
    out: str | Path,
    humans: pd.DataFrame | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    extra: dict[str, pd.DataFrame] | None = None,
    n_null: int = null_ranges.N_REPS,
    humans_file: str | None = None,
) -> list[dict]:
    """Compute and write <out>/<judge>.md and <out>/<judge>.json for every judge below `root`; a study of several
    rubrics: <out>/<rubric>/<judge>.md (and .json), one card per judge and rubric. `humans_file`: the labels
    file, read and checked against the results (in place of `humans`); a run with no answer gets a card with
    its banner and nothing measured."""

    results = load_results(root)
    facts = run_facts(root)
    status = run_status(root)
    coverage = None
    if humans_file is not None:  # checked as judge answers are: the rubric's scale, a judged candidate
        humans, coverage = checked_humans(humans_file, results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if results.empty:  # nothing was answered (a budget stop before the first answer): the banner only
        tables: dict[str, pd.DataFrame] = {}
        duplicates = pd.DataFrame(columns=["judge_a", "judge_b", "reason"])
        judges = sorted(map(str, status["judge"].dropna().unique()))
    else:
        tables = study_tables(results, humans, n_boot, seed, n_null=n_null) | (extra or {})
        note_perturbed(results, unperturbed(results))
        latent.note_duplicates({LATENT_DUPLICATES.key: _pairs(LATENT_DUPLICATES.of(tables))})
        duplicates = duplicate_raters(results, status)
        judges = sorted(map(str, results["judge"].dropna().unique()))
    cards = []
    for judge in judges:
        banner = judge_banner(judge, status, coverage, duplicates)
        card = make_card(judge, results, facts, tables, banner)
        name, rubric = split_rubric(judge)  # several rubrics: one folder of cards per rubric
        folder = out / _file_name(rubric) if rubric else out
        folder.mkdir(exist_ok=True)
        (folder / f"{_file_name(name)}.json").write_text(json.dumps(card, indent=2))
        (folder / f"{_file_name(name)}.md").write_text(card_markdown(card))
        cards.append(card)
    return cards


def judge_banner(
    judge: str, status: pd.DataFrame, coverage: LabelCoverage | None, duplicates: pd.DataFrame
) -> list[str]:
    """The report's completeness banner (`summary.banner_lines`) over this judge's runs, with the
    duplicate-rater pairs that name it."""
    name = split_rubric(judge)[0].split("@", 1)[0]
    mine = status.loc[status["judge"].astype(str) == name] if len(status) else status
    pairs = duplicates.loc[(duplicates["judge_a"] == judge) | (duplicates["judge_b"] == judge)]
    return banner_lines(mine if len(mine) else status, coverage, pairs)


def _file_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: the arguments (`analysis.card.cli`), then `run`."""
    return run(cli.parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """The command on parsed arguments: one card per judge; a bad input is one line and exit 2."""
    n_null = null_ranges.N_REPS if args.n_null is None else args.n_null
    try:
        out = Path(args.out) if args.out else Path(args.root) / "cards"
        cards = write_cards(
            args.root, out, None, args.n_boot, args.seed, n_null=n_null, humans_file=args.humans
        )
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cards and not any(card["rows"] for card in cards):  # one line: nothing was answered
        print(
            f"nothing was answered below {args.root}: {len(cards)} cards with the banner only -> {out}",
            file=sys.stderr,
        )
        return 0
    print(f"{len(cards)} cards -> {out}", file=sys.stderr)
    verdicts = {card["completeness"][0] for card in cards if card["completeness"]}
    for verdict in sorted(v for v in verdicts if not v.startswith("**Complete**")):
        print(f"note: {verdict.replace('**', '')} (each card's first lines say why)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
