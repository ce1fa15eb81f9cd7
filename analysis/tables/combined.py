"""The tables computed from several statistics at once: the runs' overview, best-of-K scores, and the judges
combined (mean score, unanimous and majority verdicts) with their mode shift, each declared beside the
function that computes it. `winrate_tables` computes the win-rate and mode-shift tables of a candidate table on
their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.stats import illusion, scores, winrate
from analysis.stats.costs import call_costs
from analysis.stats.modes import shift_pairs
from analysis.stats.scores import group_ids, lower_is_better, text_isin
from analysis.stats.spec import CardField, FigureSpec, Headline, Inputs, Section, Tables, TableSpec
from analysis.stats.winrate import WINRATE, CombineMethod
from analysis.tables.leaderboard import CALL_KEYS, judge_names
from analysis.tables.registry import StudyInputs


def overview(results: pd.DataFrame) -> pd.DataFrame:
    """One row per run: judge, model, mode, rubric, rows, prompts, scored share, cost, cached share."""
    keys = [c for c in ("run_id", "judge", "model", "mode", "rubric") if c in results]
    frame = results[keys].assign(
        _scored=results["score"].notna().to_numpy()
        | (results["preference"].notna().to_numpy() if "preference" in results else False),
        _cost=call_costs(results).to_numpy(),  # a call that got no completion: 0
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
    sample of one prompt (`CALL_KEYS`); a table without those columns can only be summed by row."""
    if not set(CALL_KEYS) <= set(results):
        return frame.groupby(keys, observed=True, dropna=False)["_cost"].agg(known_sum)
    ids, first = group_ids(results, [*keys, *CALL_KEYS])  # calls numbered from key codes, no group-by
    cost = frame["_cost"].to_numpy(dtype=float)
    known = ~np.isnan(cost)
    top = np.full(len(first), -np.inf)
    np.maximum.at(top, ids[known], cost[known])
    every = np.bincount(ids, weights=known, minlength=len(first)) == np.bincount(ids, minlength=len(first))
    per_call = frame[keys].iloc[first].assign(_cost=np.where(every, top, np.nan))  # unknown row: call unknown
    return per_call.groupby(keys, observed=True, dropna=False)["_cost"].agg(known_sum)


def known_sum(values: pd.Series) -> float:
    """The sum, or NaN when any value is unknown (a total over unknown costs is not known either)."""
    return float(values.sum()) if values.notna().all() else float("nan")


def _modes(results: pd.DataFrame) -> set[str]:
    return {str(m) for m in results["mode"].dropna().unique()}


def _rubric_groups(cands: pd.DataFrame) -> list[tuple[str | None, pd.DataFrame]]:
    """Judges are combined within one rubric only: with several rubrics (judges labelled ``judge/rubric``
    by the loader) one group per rubric, else the whole table."""
    codes, judges = pd.factorize(cands["judge"])  # each judge's rubric once, not per row
    rubrics = [str(j).split("/", 1)[1] if "/" in str(j) else None for j in judges]
    rubric = np.array([*rubrics, None], dtype=object)[codes]
    found = sorted({r for r in rubrics if r is not None})
    if not found:
        return [(None, cands)]
    return [(r, cands.loc[rubric == r]) for r in found]


def combined_label(judges: Sequence[str], combine: str, rubric: str | None) -> str:
    """``mean of 2 judges (a+b)``, with `` / rubric`` when the study has several: judges, not judge ×
    rubric."""
    names = judge_names(judges)
    return f"{combine} of {len(names)} judges ({'+'.join(names)})" + (f" / {rubric}" if rubric else "")


def _judge_sets(
    cands: pd.DataFrame, pairs: Sequence[tuple[str, str]] = (), both_only: bool = False
) -> list[tuple[list[str], list[str]]]:
    """(judges, modes) to combine: the judges that ran each mode, and those that ran both modes of a mode-shift
    pair (`pairs`, analysis.stats.modes.shift_pairs: whose shift then sits beside their rates). A combination
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
        for judges, modes in _judge_sets(part, pairs, both_only):
            rows = part.loc[text_isin(part["judge"], judges) & text_isin(part["mode"], modes)]
            frames += [
                compute(rows, c).assign(judge=combined_label(judges, c, rubric), combine=c) for c in combines
            ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _best_of_k_scores(cands: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Per judge, then the judges' mean within each rubric, labelled like the other combined tables."""
    combined = _combined(cands, lambda part, _: scores.combined_best_of_k_scores(part, reference), ("mean",))
    per_judge = scores.best_of_k_scores(cands, reference, combined=False)
    return pd.concat([per_judge, combined.drop(columns="combine", errors="ignore")], ignore_index=True)


def _shift_pairs(s: Inputs) -> list[tuple[str, str]]:
    """The mode-shift pairs (analysis.stats.modes.shift_pairs) whose two modes both have candidate scores."""
    ran = _modes(s.cands)
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
    for spec in (WINRATE, WINRATE_COMBINED, MODE_SHIFT, MODE_SHIFT_COMBINED):
        table = spec.compute(inputs, tables)
        if table is not None:
            tables[spec.key] = table
    return tables


OVERVIEW: TableSpec = TableSpec(
    "overview",
    lambda s, _: overview(s.results),  # every row, perturbed too: their calls were made and paid
    ("judge", "mode", "rows", "scored", "cost_usd", "cached"),
    section=Section.runs,
    headline=Headline("rows", "max", "most rows"),
    meanings={
        "run_id": "the run (one judge × mode × rubric folder)",
        "judge": "judge name (judge/rubric when the study ran several rubrics)",
        "model": "the judge's litellm model",
        "mode": "independent, comparative or pairwise",
        "rubric": "rubric name",
        "rows": "results rows",
        "prompts": "distinct prompts",
        "scored": "share of rows with a verdict",
        "cost_usd": "provider cost in USD (empty: unknown); a failed call and a twin (a duplicate request answered once in the run) cost 0, a cached replay the price of the answer it replays, as the manifest counts it",
        "cached": "share of calls replayed from the cache",
    },
)
BEST_OF_K_SCORES: TableSpec = TableSpec(
    "best_of_k_scores",
    lambda s, _: _best_of_k_scores(s.cands, s.reference),
    ("judge", "mode", "source", "dimension", "n", "n_judges_min", "mean", "sd"),
    headline=Headline("mean", "max", "highest best-of-K mean"),
    meanings={
        "n_judges_min": "the fewest judges behind any item of the row (a `mean` combination keeps only candidates every judge of it scored)",
    },
)
WINRATE_COMBINED: TableSpec = TableSpec(
    "winrate_combined",
    lambda s, _: _present(winrate_combined(s.cands, s.reference, s.n_boot, s.seed, _shift_pairs(s))),
    ("judge", "mode", "source", "dimension", "n", "win", "n_judges_min", "n_excluded", "combine"),
    section=Section.combined,
    headline=Headline("win", "max", "highest combined win rate"),
    meanings={
        "combine": "how judges are combined: mean score, unanimous or majority verdict",
        "n_excluded": "items left out: pairs without a strict human majority (human_majority), instances some judge left unscored (unanimous / majority combinations)",
    },
)
MODE_SHIFT: TableSpec = TableSpec(
    "mode_shift",
    lambda s, _: (
        mode_shift(s.cands, _shift_pairs(s), s.reference, s.n_boot, s.seed) if _shift_pairs(s) else None
    ),
    ("judge", "mode", "source", "dimension", "n", "win_before", "win_after", "delta_win", "mcnemar_p"),
    section=Section.mode_shift,
    figure=FigureSpec("mode_shift", "mode_shift_plot", lambda t, s: (MODE_SHIFT.need(t), lower_is_better(s))),
    headline=Headline("delta_win", "absmax", "largest |Δwin|"),
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
    p_column="mcnemar_p",
    p_family="mode_shift",
    meanings={
        "win_before": "win rate in the first setting (independent), on the n paired items",
        "win_after": "win rate in the second (comparative), on the same n items",
        "tie_before": "tie rate in the first setting",
        "tie_after": "tie rate in the second",
        "delta_win": "Δwin = after − before (paired)",
        "delta_tie": "Δtie = after − before",
        "mcnemar_p": "McNemar's exact p on win / not-win",
        "significant": "Benjamini–Hochberg q < 0.05 (p < 0.05 where no q is beside it)",
        "mcnemar_p_q": "Benjamini–Hochberg q-value of mcnemar_p (within its test family, fixed by the design)",
        "discordance": "share of instances whose win / not-win verdict differs between the two settings (the power computation's ψ)",
    },
)
MODE_SHIFT_COMBINED: TableSpec = TableSpec(
    "mode_shift_combined",
    lambda s, _: (
        _present(mode_shift_combined(s.cands, _shift_pairs(s), s.reference, s.n_boot, s.seed))
        if _shift_pairs(s)
        else None
    ),
    ("judge", "mode", "source", "dimension", "n", "delta_win", "mcnemar_p", "combine"),
    headline=Headline("delta_win", "absmax", "largest |Δwin|"),
    p_column="mcnemar_p",
    p_family="mode_shift_combined",
)
