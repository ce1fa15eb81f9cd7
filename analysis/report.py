"""`python -m analysis.report <run-or-multirun-dir> [--humans FILE] [--out DIR]`

Collects every results table below the folder, computes the study's tables (DESIGN.md "Statistics") and
writes report.md, report.html (tables and embedded figures) and one CSV per table. `compute_tables` is
the whole computation without plotting, which is what benchmarks/analysis_bench.py times.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import (
    calibration,
    consistency,
    corrected,
    costs,
    illusion,
    latent,
    multiplicity,
    scores,
    summary,
    winrate,
)
from analysis import humans as human_mod
from analysis.agreement import agreement_table
from analysis.collect import expected_as_score, expected_missing_note, load_humans, load_results
from analysis.intervals import positive_int
from analysis.paper_tables import write_paper_tables
from analysis.requests import request_changes
from analysis.robustness import note_perturbed, unperturbed
from analysis.study import study_candidates
from analysis.winrate import CombineMethod

Tables = dict[str, pd.DataFrame]


def overview(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run: judge, model, mode, rubric, rows, prompts, scored share, cost, cached share."""
    keys = [c for c in ("run_id", "judge", "model", "mode", "rubric") if c in results]
    frame = results[keys].assign(
        _scored=results["score"].notna().to_numpy()
        | (results["preference"].notna().to_numpy() if "preference" in results else False),
        _cost=costs.call_costs(results).to_numpy(),  # a call that got no completion: 0
        _cached=results["cached"].astype(float) if "cached" in results else np.nan,
    )
    out = frame.groupby(keys, observed=True, dropna=False).agg(
        rows=("_scored", "size"), scored=("_scored", "mean"), cached=("_cached", "mean")
    )
    out.insert(2, "cost_usd", _call_cost(frame, results, keys).reindex(out.index))
    if "prompt_id" in results:
        out.insert(1, "prompts", results.groupby(keys, observed=True, dropna=False)["prompt_id"].nunique())
    out["cost_usd"] = out["cost_usd"].astype(object).where(out["cost_usd"].notna(), UNKNOWN)
    return out.reset_index()


UNKNOWN = "unknown"  # a cost the provider's price list does not give (never shown as 0)


def _call_cost(frame: pd.DataFrame, results: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Cost per run, each call counted once: every row of a call (its candidates × dimensions) carries the
    call's whole cost, so summing rows would count a comparative prompt's cost once per row. A call is one
    sample of one prompt (`summary.CALL_KEYS`); a table without those columns can only be summed by row."""
    if not set(summary.CALL_KEYS) <= set(results):
        return frame.groupby(keys, observed=True, dropna=False)["_cost"].agg(known_sum)
    call = [f"_{c}" for c in summary.CALL_KEYS]
    rows = frame.assign(**{f"_{c}": results[c].to_numpy() for c in summary.CALL_KEYS})
    per_call = rows.groupby([*keys, *call], observed=True, dropna=False)["_cost"].agg(
        ["max", "count", "size"]
    )
    cost = per_call["max"].where(per_call["count"] == per_call["size"])  # a row of unknown cost: call unknown
    return cost.groupby(level=list(range(len(keys))), dropna=False).agg(known_sum)


def known_sum(values: pd.Series) -> float:
    """The sum, or NaN when any value is unknown (a total over unknown costs is not known either)."""
    return float(values.sum()) if values.notna().all() else float("nan")


def score_raters(results: pd.DataFrame, humans: pd.DataFrame | None) -> pd.DataFrame:
    """Candidate scores per rater (judge [mode], human:<annotator>) for agreement and distributions."""
    frames = [scores.candidate_scores(results)]
    if humans is not None and len(humans):
        directions = scores.dimension_directions(results)
        frames.append(scores.candidate_scores(human_mod.human_results(humans, directions)))
    cols = ["judge", "mode", "instance_id", "candidate_id", "source", "dimension", "score"]
    out = pd.concat([f[cols].astype({c: str for c in cols[:-1]}) for f in frames], ignore_index=True)
    out.insert(0, "rater", human_mod.rater_label(out["judge"], out["mode"]))
    return out


def _modes(results: pd.DataFrame) -> set[str]:
    return {str(m) for m in results["mode"].dropna().unique()}


def _rubric_groups(cands: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """Judges are combined within one rubric only: with several rubrics (judges labelled ``judge/rubric``
    by the loader) one group per rubric, else the whole table."""
    judge = cands["judge"].astype(str)
    rubric = judge.str.split("/", n=1).str[1]
    if rubric.isna().all():
        return [(None, cands)]
    return [(str(r), cands.loc[(rubric == r).to_numpy()]) for r in sorted(rubric.dropna().unique())]


def combined_label(judges: Sequence[str], combine: str, rubric: str | None) -> str:
    """``mean of 2 judges (a+b)``, with `` / rubric`` when the study has several: judges, not judge × rubric."""
    names = summary.judge_names(judges)
    return f"{combine} of {len(names)} judges ({'+'.join(names)})" + (f" / {rubric}" if rubric else "")


def _judge_sets(cands: pd.DataFrame, both_only: bool = False) -> list[tuple[list[str], list[str]]]:
    """(judges, modes) to combine: the judges that ran each mode, and those that ran both independent and
    comparative (whose shift then sits beside their rates). A combination is labelled by its judges, so every
    rate it shows is over the judges it names, never over fewer in one mode (review 7 F2)."""
    ran = cands.groupby("mode", observed=True)["judge"].agg(lambda j: frozenset(map(str, j.unique())))
    ran.index = ran.index.astype(str)
    sets: dict[frozenset[str], list[str]] = {}
    if not both_only:
        for mode, judges in ran.items():
            sets.setdefault(judges, []).append(str(mode))
    if {"independent", "comparative"} <= set(ran.index):
        modes = sets.setdefault(ran["independent"] & ran["comparative"], [])
        modes += [m for m in ("independent", "comparative") if m not in modes]
    return [(sorted(judges), modes) for judges, modes in sets.items() if len(judges) > 1]


def _combined(cands: pd.DataFrame, compute: Callable[[pd.DataFrame, CombineMethod], pd.DataFrame],
              combines: Sequence[CombineMethod], both_only: bool = False) -> pd.DataFrame:  # fmt: skip
    """`compute(rows, combine)` per rubric group and judge set of more than one judge (`_judge_sets`),
    relabelled by `combined_label`."""
    frames = []
    for rubric, part in _rubric_groups(cands):
        judge, mode = part["judge"].astype(str), part["mode"].astype(str)
        for judges, modes in _judge_sets(part, both_only):
            rows = part.loc[(judge.isin(judges) & mode.isin(modes)).to_numpy()]
            frames += [
                compute(rows, c).assign(judge=combined_label(judges, c, rubric), combine=c) for c in combines
            ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _best_of_k_scores(cands: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per judge, then the judges' mean within each rubric, labelled like the other combined tables."""
    combined = _combined(cands, lambda part, _: scores.combined_best_of_k_scores(part, reference), ("mean",))
    per_judge = scores.best_of_k_scores(cands, reference, combined=False)
    return pd.concat([per_judge, combined.drop(columns="combine", errors="ignore")], ignore_index=True)


def _winrate_tables(cands: pd.DataFrame, reference: str, n_boot: int, seed: int) -> Tables:
    tables = {"winrate": winrate.win_tie_loss(cands, reference, n_boot=n_boot, seed=seed)}
    combined = _combined(cands, lambda part, c: winrate.win_tie_loss(part, reference, combine=c, n_boot=n_boot,
                                                                     seed=seed), ("mean", "unanimous", "majority"))  # fmt: skip
    if len(combined):
        tables["winrate_combined"] = combined
    if {"independent", "comparative"} <= _modes(cands):
        tables["mode_shift"] = illusion.mode_shift(cands, reference, n_boot=n_boot, seed=seed)
        shift = _combined(cands, lambda part, c: illusion.mode_shift(part, reference, combine=c, n_boot=n_boot,
                                                                     seed=seed), ("mean",), both_only=True)  # fmt: skip
        if len(shift):
            tables["mode_shift_combined"] = shift
    return tables


def _agreement_tables(cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str, n_boot: int,
                      seed: int) -> Tables:  # fmt: skip
    tables: Tables = {}
    raters = score_raters(cands, humans)
    if raters["rater"].nunique() > 1:
        raters["score"] = np.floor(raters["score"] + 0.5)  # the rubric's integer scale, half up
        tables["score_agreement"] = agreement_table(
            raters, "rater", ["instance_id", "candidate_id", "dimension"], "score", "ordinal", n_boot, seed
        )
    outcomes = human_mod.rater_outcomes(cands, humans, reference)
    if outcomes["rater"].nunique() > 1:
        tables["winner_agreement"] = illusion.agreement_matrix(outcomes, n_boot, seed)
        tables["winner_agreement_by_kind"] = illusion.agreement_by_kind(tables["winner_agreement"])
    if humans is not None and len(humans):
        tables["human_majority"] = human_mod.majority_coverage(outcomes.loc[outcomes["kind"] == "expert"])
        tables["expert_vs_judge"] = illusion.rater_rates(outcomes)
        tables["preference_gap"] = illusion.preference_gap(outcomes, n_boot, seed)
        tables["human_reliability"] = human_mod.human_reliability(humans, n_boot, seed)
        pairs = illusion.default_alignment_pairs(outcomes)
        if pairs:
            tables["alignment"] = illusion.cross_dimension_alignment(outcomes, pairs, n_boot, seed)
    return tables


def _bias_tables(results: pd.DataFrame, n_boot: int, seed: int, families: Mapping[str, str] | None,
                 reference: str) -> Tables:  # fmt: skip
    modes = _modes(results)
    tables = {"self_consistency": consistency.self_consistency(results, n_boot=n_boot, seed=seed)}
    if "comparative" in modes and "position" in results:
        tables["position_bias"] = consistency.position_bias(results)
    if "pairwise" in modes and "order" in results:
        tables["pairwise_bias"] = consistency.pairwise_bias(results)
    if "candidate_text" in results:
        tables["length_bias"] = consistency.length_bias(results)
    tables["self_preference"] = consistency.self_preference(results, families, reference)
    return tables


def compute_tables(
    results: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    n_boot: int = 1000,
    seed: int = 0,
    families: Mapping[str, str] | None = None,
) -> Tables:
    """Every table of the report, keyed by name; tables that do not apply (one judge, no humans, no
    comparative mode, …) are absent.

    Candidate scores are computed once: the outcome and agreement functions accept a candidate-level
    table in place of the results, since the mean of one "sample" is the candidate score itself.
    """
    study = unperturbed(results)  # perturbed rows: analysis.robustness; the overview still counts their calls
    cands = study_candidates(results, reference)  # reference per prompt context, as the card reads it
    tables: Tables = {"overview": overview(results),
                      "score_summary": scores.score_summary(scores.candidate_scores(cands)),
                      "best_of_k_scores": _best_of_k_scores(cands, reference)}  # fmt: skip
    tables |= _winrate_tables(cands, reference, n_boot, seed)
    tables |= _agreement_tables(cands, humans, reference, n_boot, seed)
    tables |= latent.latent_tables(cands, humans, reference, n_boot, seed)  # empty under 3 raters
    tables |= _bias_tables(study, n_boot, seed, families, reference)
    if humans is not None and len(humans):
        tables["human_agreement"] = human_mod.human_agreement(cands, humans, n_boot, seed)
        tables["corrected_estimates"] = corrected.corrected_estimates(cands, humans, reference)
        tables["calibration"], tables["calibration_bins"] = calibration.calibration_table(cands, humans, reference)
        unmatched = human_mod.unmatched_labels(humans, cands["dimension"].dropna().unique())
        if len(unmatched):
            tables["human_unmatched"] = unmatched
    tables["leaderboard"] = summary.leaderboard(results, tables)  # parse rate, cost, latency: every call
    tables["multiple_testing"] = multiplicity.add_q_values(tables)  # last: every p-value is in by now
    return tables


def build_figures(results: pd.DataFrame, tables: Tables, humans: pd.DataFrame | None = None,
                  reference: str = "reference") -> dict:  # fmt: skip
    """Figures keyed by name (None where there is nothing to draw)."""
    from analysis import plots  # matplotlib only when drawing

    figures = {
        "winrate": plots.winrate_bars(tables["winrate"]),
        "mode_shift": plots.mode_shift_plot(tables["mode_shift"]) if "mode_shift" in tables else None,
        "score_distributions": plots.score_distributions(score_raters(unperturbed(results), humans)),
        "self_consistency": plots.self_consistency_plot(tables["self_consistency"]),
    }
    if "position_bias" in tables:
        figures["position_bias"] = plots.position_bias_plot(tables["position_bias"])
    if len(tables.get("calibration_bins", ())):
        figures["calibration"] = plots.reliability_diagram(tables["calibration_bins"])
    if "human_agreement" in tables:
        figures["human_agreement"] = plots.human_agreement_matrix(tables["human_agreement"])
    if "score_agreement" in tables:
        figures["score_agreement"] = plots.agreement_heatmap(
            tables["score_agreement"], "kappa_w", "quadratic-weighted κ on candidate scores (95% CI)"
        )
    if "winner_agreement" in tables:
        figures["winner_agreement"] = plots.agreement_heatmap(
            tables["winner_agreement"], "kappa", "Cohen's κ on win / tie / loss (95% CI)"
        )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.report",
        description="Collect every results table below a run or multirun folder and write report.md, report.html, "
        "figures and one CSV per table.",
    )
    parser.add_argument("root", help="a run folder or a multirun folder (searched recursively)")
    parser.add_argument("--humans", help="human labels CSV: annotator, instance_id, candidate_id, source, "
                                         "dimension, score")  # fmt: skip
    parser.add_argument("--out", help="output folder (default: <root>/report)")
    parser.add_argument(
        "--reference",
        help="source name of the reference candidate (default: reference; a name given must occur)",
    )
    parser.add_argument(
        "--n-boot", type=positive_int, default=1000, help="bootstrap replicates (default 1000)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--expected", action="store_true", help="analyse score_expected (G-Eval) for score")
    parser.add_argument(
        "--latest",
        action="store_true",
        help="of two results files holding the same run (a sweep and its continuation in one folder), keep the newer",
    )
    args = parser.parse_args(argv)
    from analysis.render import write_report  # matplotlib output only when writing

    try:  # none, shards that cannot be merged, a damaged or hand-edited file: one line (analysis.validate)
        results = load_results(args.root, latest=args.latest)
        results = expected_as_score(results) if args.expected else results
        if args.reference is not None:  # the default may be absent (a review_quality study has no reference)
            winrate.check_reference(results, args.reference, args.root)
        reference = args.reference or "reference"
        humans = load_humans(args.humans) if args.humans else None
        if humans is not None:
            human_mod.check_dimensions(humans, results["dimension"].dropna().unique(), args.humans)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:  # a direction the tables cannot use (e.g. higher_is_better "maybe"): one line
        tables = compute_tables(results, humans, reference, args.n_boot, args.seed)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    changed = request_changes(args.root)  # parameters a provider did not get as asked (judge.quirks)
    if len(changed):
        tables["request_changes"] = changed
    figures = build_figures(results, tables, humans, reference)
    out = Path(args.out) if args.out else Path(args.root) / "report"
    md, html = write_report(tables, figures, out, source=str(args.root))
    paper_md, paper_tex = write_paper_tables(tables, out)
    print(f"{len(results)} rows, {len(tables)} tables -> {md} and {html} (paper tables: {paper_md}, {paper_tex})",
          file=sys.stderr)  # fmt: skip
    note_perturbed(results, unperturbed(results))
    latent.note_duplicates(tables)
    missing = expected_missing_note(results)
    if missing:
        print(missing, file=sys.stderr)
    if results.attrs.get("duplicate_judgments"):
        print(f"note: {results.attrs['duplicate_judgments']} judgments repeated by reruns of the same study were "
              "counted once", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
