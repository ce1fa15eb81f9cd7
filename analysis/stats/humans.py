"""Human labels as raters: the same outcome pipeline as judges, plus majority vote and inter-human reliability.

The labels file has one row per annotator × candidate × dimension (`annotator, instance_id, candidate_id,
source, dimension, score`). Each annotator becomes a rater ``human:<annotator>`` in mode ``human``.

Judges and humans are compared on the same pairs: a pair is one candidate the humans rated against the
instance's reference (in the RQ-Bench paper, one generator's best RQ vs the reference), and every rater's
outcome on it compares that candidate's score with the reference's, never a rater's own best-of-K over
candidates the humans did not see. The human majority is a strict majority of the annotators who rated the
pair; pairs without one are excluded and counted (NovBench's rule). Labels carry no direction: each
dimension takes the judges' `higher_is_better` (or the labels' own column, when the file has one).

The human consensus on a score (`consensus_scores`, glossary `human_consensus`) is defined here once: the
annotators' mean score per item (instance × candidate × dimension), each annotator counted once; compared
with a judge's candidate score on the rubric's integer scale, both rounded half up (`scores.half_up`). The
report, the card, the viewer and the leaderboard read it; the per-annotator labels stay available as raters
(`rater_outcomes`, `human_reliability`, the latent models, the viewer's score grid).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.stats.agreement import pair_agreement
from analysis.stats.reliability import alpha_with_ci, fleiss_with_ci
from analysis.stats.scores import (
    CONTEXT,
    CONTEXT_KEYS,
    DIRECTION,
    candidate_scores,
    dimension_directions,
    direction,
    group_ids,
    half_up,
    join_reference,
    text_columns,
    text_isin,
    with_directions,
)
from analysis.stats.spec import CardField, FigureSpec, Headline, Inputs, Section, Tables, TableSpec
from analysis.stats.winrate import ITEM_KEYS, TIE_TOL, instance_outcomes

HUMAN_COLUMNS: tuple[str, ...] = ("annotator", "instance_id", "candidate_id", "source", "dimension", "score")
#: The columns that are text whatever they look like (`007` is not `7`): every column but the score.
LABEL_TEXT: tuple[str, ...] = HUMAN_COLUMNS[:-1]
#: One label per annotator, item and dimension.
LABEL_KEYS: tuple[str, ...] = ("annotator", "instance_id", "candidate_id", "dimension")
#: Optional columns: how the labelled items were chosen (`analysis.annotate` export's design) and each
#: item's inclusion probability, read by `analysis.stats.corrected`.
DESIGN = "design"
INCLUSION = "inclusion_prob"
PREFIX = "human:"
MAJORITY = "human:majority"
HUMAN_MODE = "human"
#: A pair the humans rated: one candidate of one instance (compared with that instance's reference).
PAIR_KEYS: tuple[str, ...] = ("instance_id", "candidate_id", "source", "dimension")
#: An item of the human consensus: candidate ids are unique only within an instance.
CONSENSUS_KEYS: tuple[str, ...] = ("instance_id", "candidate_id", "dimension")
AGREEMENT_COLUMNS: tuple[str, ...] = (
    "judge",
    "mode",
    "dimension",
    "n",
    "kappa_w",
    "kappa_w_lo",
    "kappa_w_hi",
    "rho",
    "rho_lo",
    "rho_hi",
    "percent",
)


def check_humans(humans: pd.DataFrame) -> pd.DataFrame:
    """The labels with the required columns, a float score, and string ids; a clear error otherwise."""
    missing = [c for c in HUMAN_COLUMNS if c not in humans.columns]
    if missing:
        raise ValueError(f"human labels lack column(s) {missing}; need {list(HUMAN_COLUMNS)}")
    extra = [c for c in (DIRECTION, DESIGN, INCLUSION) if c in humans]
    out = humans.loc[:, [*HUMAN_COLUMNS, *extra]].copy()
    for col in LABEL_TEXT:
        out[col] = out[col].astype(str)
    out["score"] = pd.to_numeric(out["score"], errors="coerce")
    if DESIGN in out:
        out[DESIGN] = out[DESIGN].fillna("").astype(str)
    if INCLUSION in out:
        out[INCLUSION] = pd.to_numeric(out[INCLUSION], errors="coerce")
    return out


def first_duplicate(humans: pd.DataFrame, columns: Sequence[str] = LABEL_KEYS) -> tuple[int, int, str] | None:
    """(position, position of its first occurrence, the key as text) of the first row that repeats the
    `columns` of an earlier one (by default a label's annotator × instance × candidate × dimension), or None:
    one annotator's two labels for one item would be averaged or pivoted silently, so ingest refuses them."""
    keys = humans.loc[:, list(columns)].astype(str)
    repeated = keys.duplicated(keep="first").to_numpy()
    if not repeated.any():
        return None
    pos = int(repeated.argmax())
    first = int((keys == keys.iloc[pos]).all(axis=1).to_numpy().argmax())
    return pos, first, ", ".join(f"{k}={v}" for k, v in keys.iloc[pos].items())


def human_results(humans: pd.DataFrame, directions: Mapping[str, bool] | None = None) -> pd.DataFrame:
    """Human labels shaped like a results table (judge ``human:<annotator>``, mode ``human``, one sample).

    Each dimension's direction is the labels' own `higher_is_better` column where the file has one, else
    `directions[dimension]`; labels of a dimension with neither are dropped (no judge scored it, so there
    is nothing to compare them with)."""
    h = check_humans(humans)
    if DIRECTION not in h:
        known = dict(directions or {})
        check_dimensions(h, known)
        h = with_directions(h.loc[h["dimension"].isin(list(known)).to_numpy()], known, "human labels")
    out = pd.DataFrame(
        {
            "judge": PREFIX + h["annotator"],
            "model": "human",
            "mode": HUMAN_MODE,
            "instance_id": h["instance_id"],
            "candidate_id": h["candidate_id"],
            "source": h["source"],
            "dimension": h["dimension"],
            "sample_idx": 0,
            "score": h["score"],
            "parse_ok": h["score"].notna(),
            DIRECTION: h[DIRECTION],
        }
    )
    dimension_directions(out, "human labels")  # one clear error on an empty or two-way direction
    return out


def unmatched_labels(humans: pd.DataFrame, dimensions: Iterable[object]) -> pd.DataFrame:
    """Per human dimension no judge scored: `n_labels`, the labels that are compared with nothing (so the
    report can say how many were left out instead of dropping them unseen)."""
    dims = humans["dimension"].astype(str)
    counts = dims[~dims.isin({str(d) for d in dimensions}).to_numpy()].value_counts().sort_index()
    return pd.DataFrame({"dimension": counts.index.astype(str), "n_labels": counts.to_numpy(dtype=int)})


def check_dimensions(
    humans: pd.DataFrame, dimensions: Iterable[object], source: str = "human labels"
) -> None:
    """A ValueError naming `source` when labels were given but none is on a dimension the judges scored
    (e.g. ``Originality`` vs ``originality``): comparing nothing must not read as "no labels given"."""
    given = sorted(humans["dimension"].astype(str).unique())
    judged = sorted({str(d) for d in dimensions})
    if given and not set(given) & set(judged):
        raise ValueError(
            f"{source}: no human label is on a dimension the judges scored: human dimensions "
            f"{given}, judges' dimensions {judged}"
        )


def majority_vote(outcomes: pd.DataFrame, keys: Sequence[str] = PAIR_KEYS) -> pd.DataFrame:
    """Every item of `outcomes` (one outcome per rater and item): `n_raters`, and `outcome` where a strict
    majority (more than half of the raters who rated it) agrees, else missing."""
    counts = outcomes.groupby([*keys, "outcome"], observed=True).size().unstack("outcome", fill_value=0)
    counts = counts.reindex(columns=[1, 0, -1], fill_value=0)
    table = counts.to_numpy()
    n = table.sum(axis=1)
    strict = 2 * table.max(axis=1) > n
    out = counts.index.to_frame(index=False)
    out["n_raters"] = n
    out["outcome"] = pd.array(np.where(strict, np.array([1, 0, -1])[table.argmax(axis=1)], 0), dtype="Int8")
    out.loc[~strict, "outcome"] = pd.NA
    return out


def majority_outcomes(
    outcomes: pd.DataFrame, name: str = MAJORITY, keys: Sequence[str] = PAIR_KEYS
) -> pd.DataFrame:
    """The strict-majority outcome per item, as a rater `name` in mode ``human``; items without a strict
    majority are left out (`majority_coverage` counts them)."""
    keys = [k for k in keys if k in outcomes]
    votes = majority_vote(outcomes, keys)
    out = votes.loc[votes["outcome"].notna().to_numpy()].reset_index(drop=True)
    out["outcome"] = out["outcome"].astype(np.int8)
    out.insert(0, "mode", HUMAN_MODE)
    out.insert(0, "judge", name)
    return out


def majority_coverage(outcomes: pd.DataFrame, keys: Sequence[str] = PAIR_KEYS) -> pd.DataFrame:
    """Per generator × dimension: the pairs the annotators rated, how many have a strict majority, and how
    many are excluded for lack of one."""
    keys = [k for k in keys if k in outcomes]
    votes = majority_vote(outcomes, keys)
    frame = votes.assign(_m=votes["outcome"].notna().to_numpy())
    out = frame.groupby(["source", "dimension"], observed=True, sort=True)["_m"].agg(
        n_pairs="size", n_majority="sum"
    )
    out = out.reset_index()
    out["n_excluded"] = out["n_pairs"] - out["n_majority"]
    return out


def rater_label(judge: pd.Series, mode: pd.Series) -> pd.Series:
    """``judge [mode]`` for judges, the bare ``human:...`` name for humans."""
    pairs = pd.DataFrame({"judge": judge.to_numpy(), "mode": mode.to_numpy()})
    ids, first = group_ids(pairs, ["judge", "mode"])
    labels = [
        str(j) if m == HUMAN_MODE else f"{j} [{m}]" for j, m in pairs.iloc[first].itertuples(index=False)
    ]
    return pd.Series(np.asarray(labels, dtype=object)[ids], index=judge.index)


def pair_outcomes(cands: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """Per rater (judge × mode) and pair: the candidate's score vs the same rater's reference score on that
    instance and dimension, 1 (better), 0 (equal), -1 (worse); no best-of-K."""
    is_ref = (cands["source"] == reference).to_numpy()
    keys = ["judge", "mode", "instance_id", "dimension"]
    ref = cands.loc[is_ref, [*keys, *([CONTEXT] if CONTEXT in cands else []), "score"]]
    out = join_reference(cands.loc[~is_ref], ref.rename(columns={"score": "ref_score"}), keys)
    diff = (out["score"] - out["ref_score"]).to_numpy() * direction(out)
    out["outcome"] = np.select([diff > TIE_TOL, diff < -TIE_TOL], [1, -1], 0).astype(np.int8)
    return out


def _as_raters(frames: list[pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
    """Outcome frames stacked with string keys, a `rater` label and its `kind` (judge, expert, majority)."""
    cols = ["judge", "mode", *keys, "outcome"]
    out = pd.concat([text_columns(f[cols], cols[:-1]) for f in frames], ignore_index=True)
    out.insert(0, "rater", rater_label(out["judge"], out["mode"]))
    is_judge = (out["mode"] != HUMAN_MODE).to_numpy()
    kind = np.where(is_judge, "judge", np.where(out["judge"] == MAJORITY, "majority", "expert"))
    out.insert(1, "kind", kind)
    return out


def compared_items(outcomes: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """`outcomes` on the items every compared rater scored, per dimension: the items every judge rater of that
    dimension scored and, where experts labelled the dimension, at least one expert did. A table comparing
    raters must rest on the same items for each (a `limit`, a shard, a budget stop or an unscored answer
    leaves some human-rated pairs unjudged; issue 32 item 5). Dimensions no judge scored stay as they are."""
    keys = list(keys)
    is_judge = (outcomes["kind"] == "judge").to_numpy()
    judged = outcomes.loc[is_judge]
    if judged.empty:
        return outcomes
    per_item = judged.groupby(keys, observed=True)["rater"].nunique().rename("_raters").reset_index()
    need = judged.groupby("dimension", observed=True)["rater"].nunique().rename("_need").reset_index()
    per_item = per_item.merge(need, on="dimension")
    items = per_item.loc[per_item["_raters"].to_numpy() == per_item["_need"].to_numpy(), keys]
    experts = outcomes.loc[(outcomes["kind"] == "expert").to_numpy()]
    if len(experts):
        labelled = experts[keys].drop_duplicates()
        with_experts = items["dimension"].isin(set(labelled["dimension"])).to_numpy()
        items = pd.concat([items.loc[~with_experts], items.loc[with_experts].merge(labelled, on=keys)])
    unjudged = ~outcomes["dimension"].isin(set(judged["dimension"])).to_numpy()
    kept = outcomes.merge(items.assign(_keep=True), on=keys, how="left")["_keep"].notna().to_numpy()
    return outcomes.loc[kept | unjudged].reset_index(drop=True)


def rater_outcomes(
    results: pd.DataFrame, humans: pd.DataFrame | None = None, reference: str = "reference"
) -> pd.DataFrame:
    """Win/tie/loss outcomes per rater (judge × mode, each annotator, and the human majority) and item.

    With human labels an item is a pair the humans rated (`PAIR_KEYS`: each rater's candidate-vs-reference
    outcome on exactly that candidate); without, it is a generator's best-of-K on an instance (`ITEM_KEYS`).
    Every rater is kept to the items all compared raters scored (`compared_items`).
    """
    if humans is None or not len(humans):
        return compared_items(_as_raters([instance_outcomes(results, reference)], ITEM_KEYS), ITEM_KEYS)
    human = pair_outcomes(candidate_scores(human_results(humans, dimension_directions(results))), reference)
    seen = ["instance_id", "candidate_id", "source"]  # the candidates the humans rated, on every dimension
    rated = human[seen].astype(str).drop_duplicates()
    shown = results.loc[text_isin(results["instance_id"], set(rated["instance_id"]))]  # before any text
    judge = pair_outcomes(candidate_scores(shown, CONTEXT_KEYS, reference), reference)
    judge = text_columns(judge, PAIR_KEYS).merge(rated, on=seen, how="inner")
    return compared_items(_as_raters([judge, human, majority_outcomes(human)], PAIR_KEYS), PAIR_KEYS)


def consensus_scores(humans: pd.DataFrame | None) -> pd.DataFrame:
    """The human consensus per item (`CONSENSUS_KEYS`, as text): `human`, the annotators' mean score (the
    project's one definition, glossary `human_consensus`), and `n_annotators` who scored it. Unscored labels
    are left out; empty (typed) without labels."""
    keys = list(CONSENSUS_KEYS)
    if humans is None or humans.empty:
        empty = {k: pd.Series(dtype=str) for k in keys}
        return pd.DataFrame(empty | {"human": pd.Series(dtype=float), "n_annotators": pd.Series(dtype=int)})
    h = check_humans(humans)
    h = h.loc[h["score"].notna().to_numpy()]
    per_annotator = h.groupby([*keys, "annotator"], sort=True)["score"].mean().reset_index()
    out = per_annotator.groupby(keys, sort=True)["score"].agg(human="mean", n_annotators="size")
    return out.reset_index()


def human_agreement(
    cands: pd.DataFrame, humans: pd.DataFrame | None, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Per judge × mode × dimension: quadratic-weighted κ (bootstrap CI), Spearman ρ and percent agreement
    between the judge's candidate scores and the human consensus (`consensus_scores`), both rounded half up
    to the rubric's integer scale. Each expert item counts once per judge and mode (pooling the modes would
    pair it twice and bootstrap the copies as independent); a reference scored in several generators'
    comparative prompts is one item, its score the mean over them (as in best-of-K). Every judge × mode of a
    dimension rests on the same items, those all of them scored (`n` says how many). The report, its
    leaderboard and the judge card all read this table."""
    cols = list(AGREEMENT_COLUMNS)
    if humans is None or humans.empty:
        return pd.DataFrame(columns=cols)
    if CONTEXT in cands:  # one row per prompt context: the reference would be counted once per prompt
        cands = candidate_scores(cands)
    keys = list(CONSENSUS_KEYS)
    expert = consensus_scores(humans)[[*keys, "human"]]
    judged = text_columns(cands[["judge", "mode", *keys, "score"]], ["judge", "mode", *keys])
    paired = judged.merge(expert, on=keys, how="inner")
    paired = paired.loc[paired["score"].notna().to_numpy() & paired["human"].notna().to_numpy()]
    # every judge × mode of a dimension on the same items (those all of them scored): the rows compare
    raters = paired["judge"] + "\x00" + paired["mode"]
    count = raters.groupby([paired[k] for k in keys]).transform("nunique")
    need = raters.groupby(paired["dimension"]).transform("nunique")
    paired = paired.loc[count.to_numpy() == need.to_numpy()]
    rows = []
    for (judge, mode, dim), part in paired.groupby(["judge", "mode", "dimension"], sort=True):
        got = pair_agreement(half_up(part["score"]), half_up(part["human"]), n_boot, seed)
        rows.append({"judge": judge, "mode": mode, "dimension": dim, **{c: got[c] for c in cols[3:]}})
    return pd.DataFrame(rows, columns=cols)


def human_reliability(humans: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Inter-annotator reliability per dimension: Fleiss' κ (items all annotators scored) and ordinal α."""
    h = check_humans(humans)
    rows = []
    for dim, part in h.groupby("dimension", sort=True):
        wide = part.groupby(["instance_id", "candidate_id", "annotator"])["score"].mean().unstack("annotator")
        kappa, k_lo, k_hi, n_items = fleiss_with_ci(wide.to_numpy(), n_boot, seed)
        alpha, a_lo, a_hi = alpha_with_ci(wide.to_numpy().T, "ordinal", n_boot, seed)
        rows.append(
            {
                "dimension": dim,
                "n_annotators": wide.shape[1],
                "n_items_all": n_items,
                "fleiss_kappa": kappa,
                "fleiss_lo": k_lo,
                "fleiss_hi": k_hi,
                "n_items": int((wide.notna().sum(axis=1) >= 2).sum()),
                "alpha_ordinal": alpha,
                "alpha_lo": a_lo,
                "alpha_hi": a_hi,
            }
        )
    return pd.DataFrame(rows)


NO_HUMANS_CARD = "no human labels (--humans)"


def _human_unmatched(s: Inputs, _: Tables) -> pd.DataFrame | None:
    if not s.has_humans:
        return None
    assert s.humans is not None
    table = unmatched_labels(s.humans, s.cands["dimension"].dropna().unique())
    return table if len(table) else None


def _kappa_columns(tables: Tables) -> pd.DataFrame:
    """The leaderboard's κ_w with the experts, one column per dimension and mode (``kappa_w:<dimension>
    [<mode>]``: each mode its own, never averaged)."""
    agree = HUMAN_AGREEMENT.of(tables)
    if agree is None or not len(agree):
        return pd.DataFrame(columns=["judge"])
    wide = agree.pivot_table(index="judge", columns=["dimension", "mode"], values="kappa_w", aggfunc="first")
    wide.columns = [f"kappa_w:{d} [{m}]" for d, m in wide.columns]
    return wide.reset_index()


HUMAN_MAJORITY: TableSpec = TableSpec(
    "human_majority",
    lambda s, _: majority_coverage(s.outcomes.loc[s.outcomes["kind"] == "expert"]) if s.has_humans else None,
    ("source", "dimension", "n_pairs", "n_majority", "n_excluded"),
    meanings={
        "n_pairs": "(instance, generator, dimension) pairs",
        "n_majority": "pairs with a strict human majority",
    },
)
HUMAN_RELIABILITY: TableSpec = TableSpec(
    "human_reliability",
    lambda s, _: (
        human_reliability(s.humans, s.n_boot, s.seed) if s.has_humans and s.humans is not None else None
    ),
    ("dimension", "n_annotators", "fleiss_kappa", "alpha_ordinal"),
    section=Section.human_reliability,
    headline=Headline("alpha_ordinal", "min", "lowest α among annotators"),
    meanings={
        "n_items": "items rated by ≥ 2 raters",
        "n_items_all": "items every annotator rated",
        "n_annotators": "annotators",
        "alpha_ordinal": "Krippendorff's α (ordinal) among annotators",
        "fleiss_kappa": "Fleiss' κ among annotators",
        "fleiss": "Fleiss' κ",
    },
)
HUMAN_AGREEMENT: TableSpec = TableSpec(
    "human_agreement",
    lambda s, _: human_agreement(s.cands, s.humans, s.n_boot, s.seed) if s.has_humans else None,
    ("judge", "mode", "dimension", "n", "kappa_w", "rho", "percent"),
    section=Section.humans,
    figure=FigureSpec("human_agreement", "human_agreement_matrix", lambda t, _: (HUMAN_AGREEMENT.need(t),)),
    headline=Headline("kappa_w", "max", "highest κ_w with the experts"),
    card=CardField(
        "Agreement with the human consensus (quadratic-weighted κ, Spearman ρ)",
        ("mode", "dimension", "n", "kappa_w", "kappa_w_lo", "kappa_w_hi", "rho", "percent"),
        NO_HUMANS_CARD,
        order=10,
    ),
    leaderboard=_kappa_columns,
    meanings={
        "human_consensus": "the annotators' mean score on an item (instance × candidate × dimension), each annotator once; compared with a judge after rounding both half up to the rubric's scale",
        "human": "the human consensus on the item (human_consensus)",
    },
)
HUMAN_UNMATCHED: TableSpec = TableSpec("human_unmatched", _human_unmatched, ("dimension", "n_labels"))
