"""The study's tables, each declared once (`analysis.tables.registry.TableSpec`): its key, computation, columns,
report section, figure, folded-table headline and judge-card field. `analysis.report.build.compute_tables` runs
these declarations, `analysis.report.render` lays the report out from them and `analysis.card.build` reads its fields
from them; a new statistic is its own module plus one `register(TableSpec(...))` here (or in its module).

The computations shared by several tables (the combined-judge tables, the raters' scores) live here too.

What each table's statistics are, their formulas, assumptions and references: see docs/statistics.md (a new
table is described there too; tests/test_statistics_doc.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis import latent
from analysis.card import null_ranges
from analysis.load.modes import modes_of, shift_pairs
from analysis.report import costs, summary
from analysis.report.provider_params import request_changes
from analysis.robustness import robustness_table
from analysis.stats import calibration, consistency, corrected, illusion, multiplicity, scores, winrate
from analysis.stats import humans as human_mod
from analysis.stats.agreement import agreement_table
from analysis.stats.winrate import CombineMethod
from analysis.tables.registry import (
    CardField,
    FigureSpec,
    StudyInputs,
    Tables,
    TableSpec,
    card_specs,
    headlines,
    leaderboard_parts,
    p_columns,
    register,
    section_figure,
    section_tables,
    spec,
)
from core.modes import ModeKind

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the registry's readers, from here so that importing them loads the declarations below
__all__ = ["BUILTIN", "card_specs", "headlines", "section_figure", "section_tables", "spec", "winrate_tables"]


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
    """``mean of 2 judges (a+b)``, with `` / rubric`` when the study has several: judges, not judge ×
    rubric."""
    names = summary.judge_names(judges)
    return f"{combine} of {len(names)} judges ({'+'.join(names)})" + (f" / {rubric}" if rubric else "")


def _judge_sets(
    cands: pd.DataFrame, pairs: Sequence[tuple[str, str]] = (), both_only: bool = False
) -> list[tuple[list[str], list[str]]]:
    """(judges, modes) to combine: the judges that ran each mode, and those that ran both modes of a mode-shift
    pair (`pairs`, analysis.load.modes.shift_pairs: whose shift then sits beside their rates). A combination
    is labelled by its judges, so every rate it shows is over the judges it names, never over fewer in one
    mode (review 7 F2)."""
    ran = cands.groupby("mode", observed=True)["judge"].agg(lambda j: frozenset(map(str, j.unique())))
    ran.index = ran.index.astype(str)
    sets: dict[frozenset[str], list[str]] = {}
    if not both_only:
        for mode, judges in ran.items():
            sets.setdefault(judges, []).append(str(mode))
    for pair in pairs:
        if set(pair) <= set(ran.index):
            modes = sets.setdefault(ran[pair[0]] & ran[pair[1]], [])
            modes += [m for m in pair if m not in modes]
    return [(sorted(judges), modes) for judges, modes in sets.items() if len(judges) > 1]


def _combined(
    cands: pd.DataFrame,
    compute: Callable[[pd.DataFrame, CombineMethod], pd.DataFrame],
    combines: Sequence[CombineMethod],
    pairs: Sequence[tuple[str, str]] = (),
    both_only: bool = False,
) -> pd.DataFrame:
    """`compute(rows, combine)` per rubric group and judge set of more than one judge (`_judge_sets`),
    relabelled by `combined_label`."""
    frames = []
    for rubric, part in _rubric_groups(cands):
        judge, mode = part["judge"].astype(str), part["mode"].astype(str)
        for judges, modes in _judge_sets(part, pairs, both_only):
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


def _shift_pairs(s: StudyInputs) -> list[tuple[str, str]]:
    """The mode-shift pairs (analysis.load.modes.shift_pairs) whose two modes both have candidate scores."""
    ran = _modes(_cands(s))
    return [p for p in shift_pairs(s.mode_kinds) if set(p) <= ran]


def _present(table: pd.DataFrame) -> pd.DataFrame | None:
    """The table, or None (absent from the report) when it has no row."""
    return table if len(table) else None


def winrate_combined(
    cands: pd.DataFrame, reference: str, n_boot: int, seed: int, pairs: Sequence[tuple[str, str]] = ()
) -> pd.DataFrame:
    """Win / tie / loss of each judge set combined by mean score, unanimous and majority verdicts; with the
    judges that ran both modes of a mode-shift pair (`pairs`) as a set of their own, whose shift sits beside
    their rates."""

    def compute(part: pd.DataFrame, combine: CombineMethod) -> pd.DataFrame:
        return winrate.win_tie_loss(part, reference, combine=combine, n_boot=n_boot, seed=seed)

    return _combined(cands, compute, ("mean", "unanimous", "majority"), pairs)


def mode_shift(
    cands: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    reference: str,
    n_boot: int,
    seed: int,
    combine: winrate.Combine = None,
) -> pd.DataFrame:
    """`illusion.mode_shift` for every (one-candidate mode, several-candidates mode) pair the judge ran, the
    several-candidates mode in `mode` (the mode the win rate moved to)."""
    frames = []
    for pair in pairs:
        shift = illusion.mode_shift(cands, reference, pair, combine=combine, n_boot=n_boot, seed=seed)
        frames.append(shift.assign(mode=pair[1]))
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["judge", "mode", *[c for c in out.columns if c not in ("judge", "mode")]]]


def mode_shift_combined(
    cands: pd.DataFrame, pairs: Sequence[tuple[str, str]], reference: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """The mode shift of the judges (mean-combined) that ran both modes of a pair."""

    def compute(part: pd.DataFrame, combine: CombineMethod) -> pd.DataFrame:
        present = [p for p in pairs if set(p) <= _modes(part)]
        return mode_shift(part, present, reference, n_boot, seed, combine=combine)

    return _combined(cands, compute, ("mean",), pairs, both_only=True)


def winrate_tables(cands: pd.DataFrame, reference: str, n_boot: int, seed: int) -> Tables:
    """The win-rate and mode-shift tables of a candidate table (the declarations below, on their own)."""
    inputs = StudyInputs(cands, reference=reference, n_boot=n_boot, seed=seed)
    inputs.shared("cands", lambda: cands)
    tables: Tables = {}
    for key in ("winrate", "winrate_combined", "mode_shift", "mode_shift_combined"):
        table = next(s for s in BUILTIN if s.key == key).compute(inputs, tables)
        if table is not None:
            tables[key] = table
    return tables


def _cands(s: StudyInputs) -> pd.DataFrame:
    """The study's candidate scores (`StudyInputs.cands`, or the table `winrate_tables` was given)."""
    return s.shared("cands", lambda: s.cands)


def _score_agreement(s: StudyInputs, _: Tables) -> pd.DataFrame | None:
    raters = score_raters(_cands(s), s.humans)
    if raters["rater"].nunique() < 2:
        return None
    raters["score"] = np.floor(raters["score"] + 0.5)  # the rubric's integer scale, half up
    keys = ["instance_id", "candidate_id", "dimension"]
    return agreement_table(raters, "rater", keys, "score", "ordinal", s.n_boot, s.seed)


def _latent(key: str) -> Callable[[StudyInputs, Tables], pd.DataFrame | None]:
    """One table of the latent fits (one fit per study, shared by the latent tables)."""

    def compute(s: StudyInputs, _: Tables) -> pd.DataFrame | None:
        fits = s.shared(
            "latent", lambda: latent.latent_tables(s.cands, s.humans, s.reference, s.n_boot, s.seed)
        )
        return fits.get(key)

    return compute


def _calibration(s: StudyInputs) -> tuple[pd.DataFrame, pd.DataFrame]:
    return s.shared("calibration", lambda: calibration.calibration_table(s.cands, s.humans, s.reference))


def _alignment(s: StudyInputs, _: Tables) -> pd.DataFrame | None:
    pairs = illusion.default_alignment_pairs(s.outcomes) if s.has_humans else None
    return illusion.cross_dimension_alignment(s.outcomes, pairs, s.n_boot, s.seed) if pairs else None


def _human_unmatched(s: StudyInputs, _: Tables) -> pd.DataFrame | None:
    if not s.has_humans:
        return None
    assert s.humans is not None
    return _present(human_mod.unmatched_labels(s.humans, s.cands["dimension"].dropna().unique()))


def _leaderboard(s: StudyInputs, tables: Tables) -> pd.DataFrame:
    """Parse rate, cost and latency over every call (perturbed ones too), then the tables' columns."""
    return summary.leaderboard(s.results, tables, extra=leaderboard_parts())


def _request_changes(s: StudyInputs, _: Tables) -> pd.DataFrame | None:
    """Parameters a provider did not get as asked (judge.quirks), read from the run folder's files."""
    return _present(request_changes(s.root)) if s.root is not None else None


def _flags(s: StudyInputs, _: Tables) -> pd.DataFrame:
    return null_ranges.null_ranges(s.study, s.cands, s.humans, s.reference, s.n_null, s.seed)


def _rater_judge(table: pd.DataFrame) -> pd.DataFrame:
    """A latent table with the judge of each rater label ``judge [mode]`` (a ``human:`` name stays)."""
    if "rater" not in table:
        return table
    return table.assign(judge=table["rater"].astype(str).str.replace(r" \[[^\]]*\]$", "", regex=True))


def _lower_is_better(s: StudyInputs) -> list[str]:
    """The study's lower-is-better dimensions (a figure says what a win means there); none where the results
    do not say (`scores.dimension_directions` refuses them elsewhere, in one line)."""
    try:
        directions = scores.dimension_directions(s.results)
    except ValueError:
        return []
    return sorted(d for d, higher in directions.items() if not higher)


def _plot(name: str) -> Callable[..., Figure | None]:
    """`analysis.report.plots.<name>` (matplotlib is imported only when a figure is drawn)."""

    def draw(*args: object) -> Figure | None:
        # matplotlib: only when a figure is drawn
        from analysis.report import plots

        figure: Figure | None = getattr(plots, name)(*args)
        return figure

    return draw


def _heatmap(key: str, value: str, title: str) -> FigureSpec:
    return FigureSpec(key, lambda t, _: _plot("agreement_heatmap")(t[key], value, title))


HUMANS = "Agreement with the experts"
CORRECTED = "Corrected estimates (prediction-powered)"
WINRATE = "Win / tie / loss against the reference"
EXPERTS = "Experts vs judges"
WINNERS = "Agreement on winners"
POSITION = "Position and order bias"
NO_HUMANS_CARD = "no human labels (--humans)"

#: The study's tables in the order they are computed (the leaderboard and the multiple-testing family read
#: the tables before them; `register` puts a new table before the leaderboard).
BUILTIN: tuple[TableSpec, ...] = (
    TableSpec(
        "overview",
        lambda s, _: overview(s.results),  # every row, perturbed too: their calls were made and paid
        ("judge", "mode", "rows", "scored", "cost_usd", "cached"),
        section="Runs",
        headline=("rows", "max", "most rows"),
    ),
    TableSpec(
        "score_summary",
        lambda s, _: scores.score_summary(scores.candidate_scores(_cands(s))),
        ("judge", "mode", "source", "dimension", "n", "mean", "sd"),
        section="Score summaries",
        figure=FigureSpec(
            "score_distributions",
            lambda _, s: _plot("score_distributions")(score_raters(s.study, s.humans)),
        ),
        headline=("mean", "max", "highest mean score"),
    ),
    TableSpec(
        "best_of_k_scores",
        lambda s, _: _best_of_k_scores(_cands(s), s.reference),
        ("judge", "mode", "source", "dimension", "n", "n_judges_min", "mean", "sd"),
        headline=("mean", "max", "highest best-of-K mean"),
    ),
    TableSpec(
        "winrate",
        lambda s, _: winrate.win_tie_loss(_cands(s), s.reference, n_boot=s.n_boot, seed=s.seed),
        ("judge", "mode", "source", "dimension", "n", "win", "tie", "loss"),
        section=WINRATE,
        figure=FigureSpec("winrate", lambda t, s: _plot("winrate_bars")(t["winrate"], _lower_is_better(s))),
        headline=("win", "max", "highest win rate"),
    ),
    TableSpec(
        "winrate_combined",
        lambda s, _: _present(winrate_combined(_cands(s), s.reference, s.n_boot, s.seed, _shift_pairs(s))),
        ("judge", "mode", "source", "dimension", "n", "win", "n_judges_min", "n_excluded", "combine"),
        section="Judges combined",
        headline=("win", "max", "highest combined win rate"),
    ),
    TableSpec(
        "mode_shift",
        lambda s, _: (
            mode_shift(_cands(s), _shift_pairs(s), s.reference, s.n_boot, s.seed) if _shift_pairs(s) else None
        ),
        ("judge", "mode", "source", "dimension", "n", "win_before", "win_after", "delta_win", "mcnemar_p"),
        section="Mode shift (the novelty illusion)",
        figure=FigureSpec(
            "mode_shift", lambda t, s: _plot("mode_shift_plot")(t["mode_shift"], _lower_is_better(s))
        ),
        headline=("delta_win", "absmax", "largest |Δwin|"),
        card=CardField(
            "Mode shift (one candidate per prompt → several: the win rate; McNemar p and its BH q-value)",
            (
                "mode",
                "source",
                "dimension",
                "n",
                "win_before",
                "win_after",
                "delta_win",
                "delta_win_lo",
                "delta_win_hi",
                "mcnemar_p",
                "mcnemar_p_q",
            ),
            "needs the judge in a one-candidate mode (independent) and a several-candidates mode (comparative)",
            order=60,
        ),
    ),
    TableSpec(
        "mode_shift_combined",
        lambda s, _: (
            _present(mode_shift_combined(_cands(s), _shift_pairs(s), s.reference, s.n_boot, s.seed))
            if _shift_pairs(s)
            else None
        ),
        ("judge", "mode", "source", "dimension", "n", "delta_win", "mcnemar_p", "combine"),
        headline=("delta_win", "absmax", "largest |Δwin|"),
    ),
    TableSpec(
        "score_agreement",
        _score_agreement,
        ("rater_a", "rater_b", "n", "kappa_w", "alpha"),
        section="Agreement on candidate scores",
        figure=_heatmap("score_agreement", "kappa_w", "quadratic-weighted κ on candidate scores (95% CI)"),
        headline=("kappa_w", "max", "highest κ_w"),
    ),
    TableSpec(
        "winner_agreement",
        lambda s, _: (
            illusion.agreement_matrix(s.outcomes, s.n_boot, s.seed)
            if s.outcomes["rater"].nunique() > 1
            else None
        ),
        ("rater_a", "rater_b", "kind", "n", "kappa"),
        section=WINNERS,
        place=1,
        figure=_heatmap("winner_agreement", "kappa", "Cohen's κ on win / tie / loss (95% CI)"),
        headline=("kappa", "max", "highest κ"),
    ),
    TableSpec(
        "winner_agreement_by_kind",
        lambda _, t: illusion.agreement_by_kind(t["winner_agreement"]) if "winner_agreement" in t else None,
        ("kind", "pairs", "items", "kappa"),
        section=WINNERS,
        headline=("kappa", "max", "highest κ"),
    ),
    TableSpec(
        "human_majority",
        lambda s, _: (
            human_mod.majority_coverage(s.outcomes.loc[s.outcomes["kind"] == "expert"])
            if s.has_humans
            else None
        ),
        ("source", "dimension", "n_pairs", "n_majority", "n_excluded"),
    ),
    TableSpec(
        "expert_vs_judge",
        lambda s, _: illusion.rater_rates(s.outcomes) if s.has_humans else None,
        ("rater", "kind", "dimension", "n", "gt_win", "gen_win", "tie"),
        section=EXPERTS,
    ),
    TableSpec(
        "preference_gap",
        lambda s, _: illusion.preference_gap(s.outcomes, s.n_boot, s.seed) if s.has_humans else None,
        ("judge", "mode", "source", "dimension", "n", "gap_win", "mcnemar_p"),
        section=EXPERTS,
        headline=("gap_win", "absmax", "largest |judge − experts| win-rate gap"),
        figure=FigureSpec("preference_gap", lambda t, _: _plot("preference_gap_plot")(t["preference_gap"])),
    ),
    TableSpec(
        "human_reliability",
        lambda s, _: (
            human_mod.human_reliability(s.humans, s.n_boot, s.seed)
            if s.has_humans and s.humans is not None
            else None
        ),
        ("dimension", "n_annotators", "fleiss_kappa", "alpha_ordinal"),
        section="Human reliability",
        headline=("alpha_ordinal", "min", "lowest α among annotators"),
    ),
    TableSpec(
        "alignment",
        _alignment,
        ("rater_a", "dimension_a", "rater_b", "dimension_b", "n", "percent"),
        section="Cross-dimension alignment",
        headline=("percent", "max", "highest agreement"),
    ),
    TableSpec(
        "latent_competence",
        _latent("latent_competence"),
        ("method", "mode", "rater", "accuracy", "accuracy_lo", "accuracy_hi"),
        section=latent.SECTION_TITLE,
        headline=("accuracy", "max", "highest accuracy"),
        card=CardField(
            "Latent-model competence (accuracy vs the latent label)",
            ("method", "mode", "rater", "accuracy", "accuracy_lo", "accuracy_hi"),
            "fewer than 3 raters (judges of one mode and annotators)",
            order=80,
            read=_rater_judge,
        ),
    ),
    TableSpec(
        "latent_confusion",
        _latent("latent_confusion"),
        ("mode", "rater", "observed"),
        section=latent.SECTION_TITLE,
    ),
    TableSpec(
        "latent_posteriors",
        _latent("latent_posteriors"),
        ("mode", "latent", "entropy_bits"),
        section=latent.SECTION_TITLE,
    ),
    TableSpec(
        "latent_winrate",
        _latent("latent_winrate"),
        ("method", "mode", "rater", "source", "dimension", "n", "win", "delta_win"),
        section=latent.SECTION_TITLE,
        headline=("win", "max", "highest win rate"),
    ),
    TableSpec(
        "latent_duplicates",
        _latent("latent_duplicates"),
        ("rater_a", "rater_b", "mode"),
        section=latent.SECTION_TITLE,
    ),
    TableSpec(
        "self_consistency",
        lambda s, _: consistency.self_consistency(s.study, n_boot=s.n_boot, seed=s.seed),
        ("judge", "mode", "dimension", "n_prompts", "mean_sd", "disagree", "alpha"),
        section="Self-consistency",
        figure=FigureSpec(
            "self_consistency", lambda t, _: _plot("self_consistency_plot")(t["self_consistency"])
        ),
        headline=("alpha", "min", "lowest α across samples"),
        card=CardField(
            "Self-consistency across samples",
            ("mode", "dimension", "n_prompts", "mean_sd", "disagree", "alpha", "alpha_lo", "alpha_hi"),
            "fewer than 2 scored samples per prompt",
            order=20,
        ),
    ),
    TableSpec(
        "position_bias",
        lambda s, _: (
            consistency.position_bias(s.study, modes_of(s.mode_kinds, ModeKind.multi))
            if modes_of(s.mode_kinds, ModeKind.multi) and "position" in s.study
            else None
        ),
        ("judge", "mode", "dimension", "position", "n", "win_rate", "expected"),
        section=POSITION,
        figure=FigureSpec("position_bias", lambda t, _: _plot("position_bias_plot")(t["position_bias"])),
        headline=("win_rate", "max", "highest win rate by position"),
        card=CardField(
            "Position bias (several candidates per prompt: the position furthest from the unbiased win rate)",
            ("mode", "dimension", "position", "n", "win_rate", "expected", "win_lo", "win_hi"),
            "no run of a several-candidates mode (comparative)",
            order=30,
            read=null_ranges.furthest_position,
        ),
    ),
    TableSpec(
        "pairwise_bias",
        lambda s, _: (
            consistency.pairwise_bias(s.study, modes_of(s.mode_kinds, ModeKind.pair))
            if modes_of(s.mode_kinds, ModeKind.pair) and "order" in s.study
            else None
        ),
        ("judge", "dimension", "first_rate", "tie_rate", "flip_rate", "first_p"),
        section=POSITION,
        headline=("first_rate", "absmax", "largest first-shown preference"),
    ),
    TableSpec(
        "length_bias",
        lambda s, _: consistency.length_bias(s.study) if "candidate_text" in s.study else None,
        ("judge", "mode", "dimension", "n", "rho", "rho_better"),
        section="Length bias",
        headline=("rho_better", "absmax", "largest |ρ| of score vs length"),
        card=CardField(
            "Length bias (Spearman ρ of score vs length in words)",
            ("mode", "dimension", "n", "rho", "rho_lo", "rho_hi", "rho_better"),
            "results carry no candidate_text",
            order=40,
        ),
    ),
    TableSpec(
        "self_preference",
        lambda s, _: consistency.self_preference(s.study, s.families, s.reference),
        ("judge", "mode", "dimension", "family", "diff", "p", "favours_own"),
        section="Self-preference",
        headline=("diff", "absmax", "largest own-family difference"),
        card=CardField(
            "Self-preference (own model family vs others; p Welch, p_q its BH q-value)",
            ("mode", "dimension", "family", "diff", "diff_lo", "diff_hi", "p", "p_q", "favours_own"),
            "no generator of the judge's own model family",
            order=50,
        ),
    ),
    TableSpec(
        "human_agreement",
        lambda s, _: human_mod.human_agreement(s.cands, s.humans, s.n_boot, s.seed) if s.has_humans else None,
        ("judge", "mode", "dimension", "n", "kappa_w", "rho", "percent"),
        section=HUMANS,
        figure=FigureSpec(
            "human_agreement", lambda t, _: _plot("human_agreement_matrix")(t["human_agreement"])
        ),
        headline=("kappa_w", "max", "highest κ_w with the experts"),
        card=CardField(
            "Agreement with the human consensus (quadratic-weighted κ, Spearman ρ)",
            ("mode", "dimension", "n", "kappa_w", "kappa_w_lo", "kappa_w_hi", "rho", "percent"),
            NO_HUMANS_CARD,
            order=10,
        ),
    ),
    TableSpec(
        "corrected_design",
        lambda s, _: corrected.design_table(s.cands, s.humans, s.reference) if s.has_humans else None,
        tuple(corrected.DESIGN_TABLE_COLUMNS),
        section=CORRECTED,
        meanings=corrected.MEANINGS,
    ),
    TableSpec(
        "corrected_estimates",
        lambda s, _: corrected.corrected_estimates(s.cands, s.humans, s.reference) if s.has_humans else None,
        tuple(corrected.COLUMNS),
        section=CORRECTED,
        place=1,
        card=CardField(
            "Corrected estimates (judge-only, human-only and corrected under the labels' design, 95% CIs)",
            tuple(corrected.COLUMNS[1:]),
            "no human labels (--humans), or labels whose design allows no corrected estimate (the report's "
            "corrected_design table says why)",
            order=90,
        ),
        meanings=corrected.MEANINGS,
    ),
    TableSpec(
        "calibration",
        lambda s, _: _calibration(s)[0] if s.has_humans else None,
        tuple(calibration.COLUMNS),
        section="Calibration to the experts' scale",
        figure=FigureSpec(
            "calibration",
            lambda t, _: (
                _plot("reliability_diagram")(t["calibration_bins"])
                if len(t.get("calibration_bins", ()))
                else None
            ),
        ),
        card=CardField(
            "Calibration to the human scale (error before / after a cross-fitted isotonic map)",
            tuple(calibration.COLUMNS[1:]),
            NO_HUMANS_CARD,
            order=100,
        ),
    ),
    TableSpec(
        "calibration_bins",
        lambda s, _: _calibration(s)[1] if s.has_humans else None,
        ("bin", "n", "mean_predicted", "observed_rate"),
    ),
    TableSpec("human_unmatched", _human_unmatched, ("dimension", "n_labels")),
    TableSpec(
        "leaderboard",
        _leaderboard,
        ("judge", "judgments", "parse_rate", "cost_per_1k", "median_latency_s"),
        section="Judge leaderboard",
    ),
    TableSpec(
        "multiple_testing",  # last of the computed tables: every p-value is in by now
        lambda _, t: multiplicity.add_q_values(t, {**multiplicity.P_COLUMNS, **p_columns()}),
        ("table", "test_family", "p_column", "n_tests", "method"),
        section="Multiple testing",
    ),
    TableSpec(
        "request_changes",
        _request_changes,
        ("run_id", "judge", "model", "parameter", "asked", "sent", "note"),
        section="Runs",
    ),
    TableSpec(  # card-only: the perturbed rows (experiment=robustness)
        "robustness",
        lambda s, _: robustness_table(s.results, n_boot=s.n_boot, seed=s.seed),
        ("judge", "mode", "perturbation", "dimension", "n", "shift", "flip_rate"),
        card=CardField(
            "Robustness (score shift under perturbation, flip rate)",
            ("mode", "perturbation", "dimension", "n", "shift", "shift_lo", "shift_hi", "flip_rate"),
            "no experiment=robustness run",
            order=70,
        ),
        report=False,
    ),
    TableSpec(  # card-only: the null ranges of an unbiased judge (analysis.card.null_ranges)
        "flags",
        _flags,
        tuple(null_ranges.COLUMNS),
        card=CardField(
            "Flags (against a judge without the effect: permutations, the other judges on the same items, the "
            "human ceiling; Holm across the card, q < 0.05)",
            tuple(c for c in null_ranges.COLUMNS if c != "judge"),
            "no field with a null range (position, length, self-preference, mode shift, human agreement)",
            order=110,
        ),
        report=False,
    ),
)

for _spec in BUILTIN:
    register(_spec, before=None)
