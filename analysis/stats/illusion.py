"""The novelty illusion: how the verdict on generated vs reference moves with the judging setup.

- mode shift: same judge and instances, independent → comparative; Δwin and Δtie with a paired bootstrap
  CI over instances and McNemar's test on win / not-win;
- preference gap: the judge's win rate minus the humans' (majority) on the same pairs, same tests;
- agreement matrix on winners between experts and judges, and cross-dimension alignment of winners.

The human-facing functions take the per-rater outcomes of `analysis.stats.humans.rater_outcomes(results,
humans)`, computed once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import mcnemar

from analysis.stats.agreement import agreement_table, pair_agreement
from analysis.stats.humans import MAJORITY, PAIR_KEYS
from analysis.stats.scores import group_ids, split_groups
from analysis.stats.spec import FigureSpec, Headline, Inputs, Section, Tables, TableSpec
from analysis.stats.winrate import ITEM_KEYS, Combine, instance_outcomes
from core.intervals import BOOT_MIN_N, percentile_ci, resample_counts


def item_keys(raters: pd.DataFrame) -> list[str]:
    """What one rated item is: a pair the humans rated (with `candidate_id`) or a generator's best-of-K."""
    return list(PAIR_KEYS) if "candidate_id" in raters else list(ITEM_KEYS)


def _mcnemar_p(table: np.ndarray) -> float:
    """Exact McNemar p on a 2 × 2 win / not-win table (1.0 when no pair is discordant)."""
    if table[0, 1] + table[1, 0] == 0:
        return 1.0
    return float(mcnemar(table, exact=True).pvalue)


def paired_shift(
    paired: pd.DataFrame, keys: Sequence[str], n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Change from outcome `before` to outcome `after` on the same instances, per `keys` group.

    Columns: n, win/tie before and after, delta_win and delta_tie with paired bootstrap CIs (instances
    resampled, both outcomes kept together; NaN below `core.intervals.BOOT_MIN_N` instances), McNemar p on win / not-win, and `significant` (p < alpha).
    """
    joint = (1 - paired["before"].to_numpy().astype(np.int64)) * 3 + (1 - paired["after"].to_numpy())
    frame = paired[list(keys)].assign(_j=joint)
    counts = frame.groupby([*keys, "_j"], observed=True).size().unstack("_j", fill_value=0)
    counts = counts.reindex(columns=range(9), fill_value=0)
    table = counts.to_numpy().reshape(-1, 3, 3)  # [group, before (win, tie, loss), after]
    out = counts.index.to_frame(index=False)
    n = table.sum(axis=(1, 2))
    out["n"] = n
    boot = resample_counts(table.reshape(len(out), 9), n_boot, seed).reshape(n_boot, len(out), 3, 3)
    for j, name in ((0, "win"), (1, "tie")):
        before, after = table[:, j, :].sum(axis=1) / n, table[:, :, j].sum(axis=1) / n
        out[f"{name}_before"], out[f"{name}_after"] = before, after
        out[f"delta_{name}"] = after - before
        delta_boot = (boot[:, :, :, j].sum(axis=2) - boot[:, :, j, :].sum(axis=2)) / n
        lo, hi = percentile_ci(delta_boot)
        few = n < BOOT_MIN_N  # a handful of instances: the replicates' spread is no sampling error
        out[f"delta_{name}_lo"], out[f"delta_{name}_hi"] = (
            np.where(few, np.nan, lo),
            np.where(few, np.nan, hi),
        )
    win_tables = [np.array([[t[0, 0], t[0, 1:].sum()], [t[1:, 0].sum(), t[1:, 1:].sum()]]) for t in table]
    # the share of instances whose win / not-win verdict differs between the two (the power's ψ)
    out["discordance"] = [(t[0, 1] + t[1, 0]) / max(int(t.sum()), 1) for t in win_tables]
    out["mcnemar_p"] = [_mcnemar_p(t) for t in win_tables]
    out["significant"] = out["mcnemar_p"] < alpha
    return out


def mode_shift(
    results: pd.DataFrame,
    reference: str = "reference",
    modes: tuple[str, str] = ("independent", "comparative"),
    combine: Combine = None,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Independent → comparative shift per judge × generator × dimension (`*_before` is modes[0]); with
    `combine` the judges' combination (e.g. ``mean(a+b)``) is the one judge."""
    paired = mode_pairs(results, reference, modes, combine)
    return paired_shift(paired, MODE_SHIFT_KEYS, n_boot, seed, alpha)


MODE_SHIFT_KEYS = ["judge", "source", "dimension"]


def mode_pairs(
    results: pd.DataFrame,
    reference: str = "reference",
    modes: tuple[str, str] = ("independent", "comparative"),
    combine: Combine = None,
) -> pd.DataFrame:
    """Each item's outcome in both modes (`before` in modes[0], `after` in modes[1]): what `mode_shift`
    tests, and what `analysis.stats.null_ranges` swaps to simulate a judge without a mode shift."""
    out = instance_outcomes(results, reference, combine)
    keys = ["judge", *ITEM_KEYS]
    before = out.loc[out["mode"] == modes[0], [*keys, "outcome"]].rename(columns={"outcome": "before"})
    after = out.loc[out["mode"] == modes[1], [*keys, "outcome"]].rename(columns={"outcome": "after"})
    return before.merge(after, on=keys, how="inner")


def preference_gap(
    raters: pd.DataFrame, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Judge vs human majority on the same (instance, generator, dimension), per judge × mode × generator ×
    dimension; `raters` from `analysis.stats.humans.rater_outcomes` (with human labels).

    `human_win` / `judge_win` are the two win rates on the shared pairs (the candidates the humans rated,
    each against the reference); `gap_win` = judge − human, the judge's excess preference for generated
    over reference, with a paired bootstrap CI and McNemar p.
    """
    keys = item_keys(raters)
    human = raters.loc[raters["rater"] == MAJORITY, [*keys, "outcome"]].rename(columns={"outcome": "before"})
    judge = raters.loc[raters["kind"] == "judge", ["judge", "mode", *keys, "outcome"]]
    paired = judge.rename(columns={"outcome": "after"}).merge(human, on=keys, how="inner")
    out = paired_shift(paired, ["judge", "mode", "source", "dimension"], n_boot, seed, alpha)
    names = {
        "win_before": "human_win",
        "win_after": "judge_win",
        "tie_before": "human_tie",
        "tie_after": "judge_tie",
    }
    names.update({c: c.replace("delta_", "gap_") for c in out.columns if c.startswith("delta_")})
    return out.rename(columns=names)


#: Kinds of a pair of judge raters (``judge [mode]``) other than two different judges in one mode, the
#: only pairs that are judge–judge agreement (docs/statistics.md: a judge across modes is consistency).
SAME_JUDGE = "judge-self"  # one judge in two modes: its consistency, not agreement
CROSS_MODE = "judge-other-mode"  # two judges in different modes


def _pair_kind(kind_a: pd.Series, kind_b: pd.Series) -> pd.Series:
    order = {"expert": 0, "majority": 1, "judge": 2}
    first = np.where(kind_a.map(order) <= kind_b.map(order), kind_a, kind_b)
    second = np.where(kind_a.map(order) <= kind_b.map(order), kind_b, kind_a)
    return pd.Series(first, index=kind_a.index) + "-" + second


def agreement_matrix(raters: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Agreement on winners (win/tie/loss per instance × generator × dimension) between every two raters
    of `raters` (from `analysis.stats.humans.rater_outcomes`), with `kind` expert-expert, expert-judge,
    judge-judge (and expert-majority / majority-judge for the human majority). Judge–judge is between
    different judges in the same mode only: one judge in two modes is `judge-self` (its consistency across
    modes), two judges in two modes `judge-other-mode`."""
    table = agreement_table(raters, "rater", item_keys(raters), "outcome", "ordinal", n_boot, seed)
    first = raters.drop_duplicates("rater").set_index("rater")
    pair = table["rater_a"] != "(all)"
    table.insert(2, "kind", "all")
    a, b = table.loc[pair, "rater_a"], table.loc[pair, "rater_b"]
    kind = _pair_kind(a.map(first["kind"]), b.map(first["kind"]))
    same_judge = (a.map(first["judge"]) == b.map(first["judge"])).to_numpy()
    same_mode = (a.map(first["mode"]) == b.map(first["mode"])).to_numpy()
    both = (kind == "judge-judge").to_numpy()
    kind[both & same_judge] = SAME_JUDGE
    kind[both & ~same_judge & ~same_mode] = CROSS_MODE
    table.loc[pair, "kind"] = kind
    return table


def agreement_by_kind(matrix: pd.DataFrame) -> pd.DataFrame:
    """Mean percent agreement and κ over the rater pairs of each kind (the expert/judge summary; the paper's
    expert–expert / LLM–LLM / expert–LLM table)."""
    pairs = matrix.loc[matrix["kind"] != "all"]
    grouped = pairs.groupby("kind", sort=True)
    return grouped.agg(
        pairs=("n", "size"),
        items=("n", "sum"),
        percent=("percent", "mean"),
        kappa=("kappa", "mean"),
        kappa_w=("kappa_w", "mean"),
    ).reset_index()


def cross_dimension_alignment(
    outcomes: pd.DataFrame,
    pairs: Iterable[tuple[str, str, str, str]],
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Agreement between rater A's winner on dimension A and rater B's winner on dimension B, on the same
    (instance, generator), or on the same candidate when the outcomes are per pair the humans rated;
    `outcomes` as from `rater_outcomes`, `pairs` as (rater_a, dim_a, rater_b, dim_b)."""
    pair = [k for k in item_keys(outcomes) if k != "dimension"]
    item, first = group_ids(outcomes, pair)  # items numbered once; each rater × dimension a dense column
    value = outcomes["outcome"].to_numpy(dtype=float)
    columns: dict[tuple[str, str], np.ndarray] = {}
    for (rater, dimension), rows_of in split_groups(outcomes, ["rater", "dimension"]):
        column = np.full(len(first), np.nan)
        column[item[rows_of]] = value[rows_of]
        columns[(str(rater), str(dimension))] = column
    missing = np.full(len(first), np.nan)
    rows = []
    for rater_a, dim_a, rater_b, dim_b in pairs:
        # the items both rated (pair_agreement drops the others); its statistics read only the confusion
        # table, so the items' order does not matter
        a, b = columns.get((rater_a, dim_a), missing), columns.get((rater_b, dim_b), missing)
        stats_ab = pair_agreement(a, b, n_boot, seed)
        rows.append(
            {"rater_a": rater_a, "dimension_a": dim_a, "rater_b": rater_b, "dimension_b": dim_b, **stats_ab}
        )
    return pd.DataFrame(rows)


def default_alignment_pairs(outcomes: pd.DataFrame) -> list[tuple[str, str, str, str]]:
    """Each expert and the human majority, on each dimension, vs every judge rater on every dimension (the
    paper reports the alignment per expert)."""
    dims_of = outcomes.groupby("rater")["dimension"].unique()
    if MAJORITY not in dims_of:
        return []
    experts = sorted(outcomes.loc[outcomes["kind"] == "expert", "rater"].unique())
    judges = sorted(outcomes.loc[outcomes["kind"] == "judge", "rater"].unique())
    return [
        (h, dh, j, dj)
        for h in [*experts, MAJORITY]
        for dh in sorted(dims_of[h])
        for j in judges
        for dj in sorted(dims_of[j])
    ]


RATER_KINDS: tuple[str, ...] = ("expert", "judge", "majority")


def rater_rates(outcomes: pd.DataFrame) -> pd.DataFrame:
    """The paper's experts-vs-judges layout: per rater (each expert, each judge × mode, the strict human
    majority last) and dimension, on the pairs every compared rater scored (`humans.compared_items`: an
    expert's extra pairs no judge saw are left out), `n` and the shares where the reference
    (ground truth) is preferred (`gt_win`), the generated candidate is (`gen_win`), or neither (`tie`).
    Each expert keeps every pair, so a disagreement between experts is in both their rows, not dropped as
    the majority row drops it; `outcomes` from `analysis.stats.humans.rater_outcomes` with human labels."""
    o = outcomes["outcome"].to_numpy()
    frame = outcomes[["rater", "kind", "dimension"]].astype(str)
    frame = frame.assign(
        gt_win=(o == -1).astype(float), gen_win=(o == 1).astype(float), tie=(o == 0).astype(float)
    )
    out = frame.groupby(["rater", "kind", "dimension"], sort=True).agg(
        n=("tie", "size"), gt_win=("gt_win", "mean"), gen_win=("gen_win", "mean"), tie=("tie", "mean")
    )
    out = out.reset_index()
    order = out["kind"].map({k: i for i, k in enumerate(RATER_KINDS)}).to_numpy()
    out = out.iloc[np.lexsort([out["dimension"].to_numpy(), out["rater"].to_numpy(), order])]
    return out.reset_index(drop=True)


def _alignment(s: Inputs, _: Tables) -> pd.DataFrame | None:
    pairs = default_alignment_pairs(s.outcomes) if s.has_humans else None
    return cross_dimension_alignment(s.outcomes, pairs, s.n_boot, s.seed) if pairs else None


def _by_kind(_: Inputs, t: Tables) -> pd.DataFrame | None:
    matrix = WINNER_AGREEMENT.of(t)
    return agreement_by_kind(matrix) if matrix is not None else None


WINNER_AGREEMENT: TableSpec = TableSpec(
    "winner_agreement",
    lambda s, _: (
        agreement_matrix(s.outcomes, s.n_boot, s.seed) if s.outcomes["rater"].nunique() > 1 else None
    ),
    ("rater_a", "rater_b", "kind", "n", "kappa"),
    section=Section.winners,
    place=1,
    figure=FigureSpec(
        "winner_agreement",
        "agreement_heatmap",
        lambda t, _: (WINNER_AGREEMENT.need(t), "kappa", "Cohen's κ on win / tie / loss (95% CI)"),
    ),
    headline=Headline("kappa", "max", "highest κ"),
    meanings={
        "kind": "rater kind (expert, judge, majority) or pair kind (expert-expert, expert-judge, judge-judge: two different judges in one mode, judge-self: one judge across modes, i.e. consistency, judge-other-mode: two judges in different modes, all)",
    },
)
WINNER_AGREEMENT_BY_KIND: TableSpec = TableSpec(
    "winner_agreement_by_kind",
    _by_kind,
    ("kind", "pairs", "items", "kappa"),
    section=Section.winners,
    headline=Headline("kappa", "max", "highest κ"),
    meanings={
        "pairs": "rater pairs of this kind",
        "items": "items over all pairs of this kind",
    },
)
EXPERT_VS_JUDGE: TableSpec = TableSpec(
    "expert_vs_judge",
    lambda s, _: rater_rates(s.outcomes) if s.has_humans else None,
    ("rater", "kind", "dimension", "n", "gt_win", "gen_win", "tie"),
    section=Section.experts,
    meanings={
        "rater": "a judge [mode] or an annotator (human:<name>)",
        "gt_win": "share of pairs where the reference (ground truth) is preferred",
        "gen_win": "share of pairs where the generated candidate is preferred",
    },
)
PREFERENCE_GAP: TableSpec = TableSpec(
    "preference_gap",
    lambda s, _: preference_gap(s.outcomes, s.n_boot, s.seed) if s.has_humans else None,
    ("judge", "mode", "source", "dimension", "n", "gap_win", "mcnemar_p"),
    section=Section.experts,
    headline=Headline("gap_win", "absmax", "largest |judge − experts| win-rate gap"),
    figure=FigureSpec("preference_gap", "preference_gap_plot", lambda t, _: (PREFERENCE_GAP.need(t),)),
    p_column="mcnemar_p",
    p_family="human_agreement",
    meanings={
        "human_win": "human majority's win rate",
        "human_tie": "human majority's tie rate",
        "judge_win": "judge's win rate on the same pairs",
        "judge_tie": "judge's tie rate",
        "gap_win": "judge win − human win",
        "gap_tie": "judge tie − human tie",
    },
)
ALIGNMENT: TableSpec = TableSpec(
    "alignment",
    _alignment,
    ("rater_a", "dimension_a", "rater_b", "dimension_b", "n", "percent"),
    section=Section.alignment,
    headline=Headline("percent", "max", "highest agreement"),
    meanings={
        "dimension_a": "rater A's dimension",
        "dimension_b": "rater B's dimension",
    },
)
