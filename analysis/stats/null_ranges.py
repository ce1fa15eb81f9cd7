"""Null ranges for the judge card's bias and agreement fields, each compared with what a judge of the same
quality would show (never an oracle), and flags that form one family per card.

A card value alone cannot say whether a position excess of 0.04 or a length ρ of 0.2 is a bias or the
judge's own noise. Each field has a null that keeps everything but the effect:

- `position_bias`: the positions shown in each comparative prompt are permuted (the scores stay),
  statistic: the excess win rate (win rate − expected) of the position furthest from the unbiased rate;
- `length_bias`: the candidates' texts (so their lengths) are permuted across candidates, statistic ρ;
- `mode_shift`: each item's two mode outcomes are swapped with probability ½, statistic `delta_win`;
- `self_preference`: the other judges' preference for the judge's family on the same items (so a family whose
  texts are truly better is not a bias): `favours_own` of this judge minus the other judges' mean
  `favours_own` for that family, bootstrapped over instances; no other judge: not tested;
- `human_agreement`: the human ceiling. Each expert against the consensus of the others (κ_w), and the judge
  against the same leave-one-out consensus on the same items; the judge is flagged only when it agrees
  clearly less than the experts agree with each other (one-sided, bootstrapped over items); one expert per
  item: not tested.

`null_lo`–`null_hi` is the 95% range of the judge's value under the null; `p` a Wald p from the replicates'
spread (continuous, so a card of many fields can still reach its corrected level). The card's tests are one
family: `q` is Holm's adjustment of the judge's p-values across every row of its card (family-wise error
`ALPHA`), and `flag` is q < `ALPHA`. A null with no spread (a judge with identical samples at low temperature, a
few items) is degenerate: the row says so in `note` and is neither tested nor flagged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats import consistency, illusion
from analysis.stats.consistency import furthest_position
from analysis.stats.humans import CONSENSUS_KEYS, check_humans
from analysis.stats.modes import kinds_by_mode, modes_of, shift_pairs
from analysis.stats.scores import candidate_scores, direction, half_up
from analysis.stats.spec import CardField, TableSpec
from core.modes import ModeKind

N_REPS = 200
LEVEL = 0.95
#: The card's family-wise error rate (Holm across the card's tests).
ALPHA = 0.05
CARD_METHOD = "holm"
TOL = 1e-9
COLUMNS = [
    "field",
    "judge",
    "mode",
    "dimension",
    "group",
    "statistic",
    "value",
    "null_lo",
    "null_hi",
    "p",
    "q",
    "flag",
    "note",
]
DEGENERATE = "null range degenerate (no spread in the null: identical samples or too few items): not tested"
#: field -> (keys of one value, the column naming its group, the statistic)
FIELDS: dict[str, tuple[list[str], str | None, str]] = {
    "position_bias": (["judge", "mode", "dimension"], "position", "excess"),
    "length_bias": (["judge", "mode", "dimension"], None, "rho"),
    "mode_shift": (["judge", "mode", "source", "dimension"], "source", "delta_win"),
}
#: The fields compared with other raters on the same items (bootstrapped comparisons, not permutations).
COMPARED = ("self_preference", "human_agreement")

#: A permutation field: (n_reps, generator) -> (the judge's values, their null replicates: one row per key
#: of `FIELDS`, one column per replicate).
Statistic = Callable[[int, np.random.Generator], tuple[pd.DataFrame, pd.DataFrame]]


def permute_within(groups: np.ndarray, n_reps: int, rng: np.random.Generator) -> np.ndarray:
    """`n_reps` random permutations within groups at once (`n_reps` × items): row b takes item j's value from
    item `out[b, j]` of the same group (`groups`, integer codes). Sorting group + U(0, 1) keys per row
    shuffles each group's block in place, so one argsort replaces a Python loop over groups × replicates."""
    groups = np.asarray(groups, dtype=float)
    order = np.argsort(groups + rng.random((n_reps, groups.size)), axis=1)
    out = np.empty_like(order)
    out[:, np.argsort(groups, kind="stable")] = order
    return out


def _position(results: pd.DataFrame, multi: list[str]) -> Statistic:
    """Positions permuted among a prompt's candidates, the same way in each of its samples (a candidate keeps
    one place across the samples of a prompt, so its samples stay as correlated as the judge's); over the
    modes that show several candidates (`multi`, analysis.stats.modes). Each row's share of its prompt
    sample's win does not depend on where it was shown (`consistency.position_shares`), so every replicate's
    win rate per position is a weighted count of the permuted positions (one bincount for all replicates)."""
    shown = results["mode"].astype(str).isin(multi).to_numpy()
    rows = results.loc[shown & results["position"].notna().to_numpy()]
    prompt = ["judge", "mode", *consistency._prompt_keys(rows), "dimension"]
    slots = rows[[*prompt, "candidate_id", "position"]].drop_duplicates([*prompt, "candidate_id"])
    slots = slots.reset_index(drop=True)
    slot_group = slots.groupby(prompt, sort=False, observed=True).ngroup().to_numpy()
    shares = consistency.position_shares(rows)
    at = rows.loc[shares.index, [*prompt, "candidate_id"]].reset_index(drop=True)
    slot_of = at.merge(slots.drop(columns="position").assign(_slot=np.arange(len(slots))), how="left")[
        "_slot"
    ]
    keys = ["judge", "mode", "dimension"]
    cell, cells = pd.factorize(pd.MultiIndex.from_frame(shares[keys].astype(str)))
    values, slot_pos = np.unique(slots["position"].to_numpy(dtype=float), return_inverse=True)
    share, expected = shares["_share"].to_numpy(float), shares["_expected"].to_numpy(float)

    def stat(n_reps: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        observed = furthest_position(consistency.position_bias(rows))
        if shares.empty:
            return observed, pd.DataFrame()
        pos = slot_pos[permute_within(slot_group, n_reps, rng)][:, slot_of.to_numpy()]  # reps × rows
        n_cells = len(cells) * len(values)
        flat = (np.arange(n_reps)[:, None] * n_cells + cell * len(values) + pos).ravel()
        size = n_reps * n_cells

        def total(w: np.ndarray) -> np.ndarray:
            weights = np.broadcast_to(w, pos.shape).ravel()
            return np.bincount(flat, weights, size).reshape(n_reps, len(cells), len(values))

        count = total(np.ones_like(share))
        with np.errstate(invalid="ignore", divide="ignore"):
            excess = (total(share) - total(expected)) / count  # win rate − expected, per position
        far = np.argmax(np.where(np.isnan(excess), -np.inf, np.abs(excess)), axis=2)
        null = np.take_along_axis(excess, far[..., None], axis=2)[..., 0]  # reps × (judge, mode, dim)
        return observed, pd.DataFrame(null.T, index=cells.set_names(keys))

    return stat


def length_rows(results: pd.DataFrame, n_reps: int, seed: int) -> list[dict]:
    """Length bias: Spearman ρ of candidate score vs length (`consistency.length_bias`, the report's value)
    against the ρ of the same scores with the lengths permuted among the group's candidates; vectorised (ρ is
    Pearson's r of the ranks, and a permutation of the lengths permutes their ranks)."""
    cands = consistency.scores_with_length(results)  # once, for the observed ρ and its null
    observed = consistency.length_bias(results, cands)
    if observed.empty:
        return []
    cands = cands.dropna(subset=["length"]).astype({k: str for k in consistency.GROUP})
    parts = dict(iter(cands.groupby(consistency.GROUP, observed=True, sort=False)))
    rng = np.random.default_rng([seed, 3])
    rows = []
    for rec in observed.astype({k: str for k in consistency.GROUP}).to_dict("records"):
        part = parts.get(tuple(rec[k] for k in consistency.GROUP))
        null = np.array([])
        if part is not None and len(part) > 2:
            rs = stats.rankdata(part["score"].to_numpy(dtype=float))
            rl = stats.rankdata(part["length"].to_numpy(dtype=float))
            perm = rng.permuted(np.tile(rl, (n_reps, 1)), axis=1)
            rs_c = rs - rs.mean()
            perm_c = perm - perm.mean(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                null = (perm_c @ rs_c) / (np.sqrt((perm_c**2).sum(axis=1)) * np.sqrt((rs_c**2).sum()))
        rows.append(_null_row("length_bias", rec, float(rec["rho"]), null))
    return rows


def _mode_shift(cands: pd.DataFrame, reference: str, pairs: list[tuple[str, str]]) -> Statistic:
    """Each item's two verdicts swapped at random (no mode shift), for every (single, multi) mode pair; the
    multi mode in `mode`, as the report's mode-shift table has it. A swap flips the sign of the item's
    win change, so every replicate's `delta_win` is a signed sum (one matrix product for all replicates)."""
    paired = pd.concat(
        [illusion.mode_pairs(cands, reference, pair).assign(mode=pair[1]) for pair in pairs],
        ignore_index=True,
    )
    keys = [*illusion.MODE_SHIFT_KEYS, "mode"]

    def stat(n_reps: int, rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
        observed = illusion.paired_shift(paired, keys, n_boot=1, seed=0)
        return observed, swap_null(paired, keys, n_reps, rng)

    return stat


def swap_null(paired: pd.DataFrame, keys: list[str], n_reps: int, rng: np.random.Generator) -> pd.DataFrame:
    """`delta_win` per `keys` group (rows) and replicate (columns) with each item's `before` and `after`
    swapped with probability ½: a swap flips the sign of the item's win change, so all replicates are one
    signed sum (the same draws, in the same order, as a loop calling `illusion.paired_shift` per replicate)."""
    group, groups = pd.factorize(pd.MultiIndex.from_frame(paired[keys].astype(str)))
    change = (paired["after"].to_numpy() == 1).astype(float) - (paired["before"].to_numpy() == 1)
    sign = np.where(rng.random((n_reps, len(paired))) < 0.5, -1.0, 1.0)
    member = np.zeros((len(paired), len(groups)))
    member[np.arange(len(paired)), group] = 1.0
    null = (sign * change) @ member / member.sum(axis=0)
    return pd.DataFrame(null.T, index=groups.set_names(keys))


def _boot_weights(groups: np.ndarray, n_reps: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap weights per item (`n_reps` × items): instances (`groups`, codes 0..g−1) drawn with
    replacement, each item weighted by how often its instance was drawn."""
    n_groups = int(groups.max()) + 1 if groups.size else 0
    draws = rng.integers(0, max(n_groups, 1), (n_reps, n_groups))
    counts = np.zeros((n_reps, n_groups))
    np.add.at(counts, (np.repeat(np.arange(n_reps), n_groups), draws.ravel()), 1.0)
    return counts[:, groups]


def _wald(
    observed: float, reps: np.ndarray, one_sided_below: bool = False
) -> tuple[float, float, float, str]:
    """(p, lo, hi, note) for a difference `observed` from 0, with the bootstrap replicates `reps` of it: a
    Wald p from their sd, and the 95% range a difference of 0 would show (the basic bootstrap's)."""
    reps = reps[np.isfinite(reps)]
    if not np.isfinite(observed) or reps.size < 2:
        return np.nan, np.nan, np.nan, "too few items to compare"
    sd = float(np.std(reps, ddof=1))
    centred = reps - observed
    tail = (1 - LEVEL) / 2
    lo, hi = float(np.quantile(centred, tail)), float(np.quantile(centred, 1 - tail))
    if sd <= TOL:
        return np.nan, lo, hi, DEGENERATE
    z = observed / sd
    p = float(stats.norm.cdf(z)) if one_sided_below else float(2 * stats.norm.sf(abs(z)))
    return p, lo, hi, ""


def self_preference_rows(results: pd.DataFrame, reference: str, n_reps: int, seed: int) -> list[dict]:
    """Per judge × mode × dimension: the judge's `favours_own` against the other judges' `favours_own` for the
    same family on the items every judge scored (instances bootstrapped, the same draws for all judges)."""
    if "model" not in results or results["judge"].nunique() < 1:
        return []
    models = results[["judge", "model"]].drop_duplicates("judge")
    family_of = {str(j): consistency.model_family(str(m)) for j, m in models.itertuples(index=False)}
    cands = candidate_scores(results)
    cands = cands.loc[~cands["source"].isin([reference, "human"]).to_numpy()]
    rows: list[dict] = []
    for (mode, dim), part in cands.groupby(["mode", "dimension"], observed=True, sort=True):
        sign = direction(part.iloc[:1])[0]
        wide = part.pivot_table(
            index=["instance_id", "candidate_id", "source"], columns="judge", values="score", aggfunc="mean"
        )
        wide = wide.dropna()  # the items every judge scored
        if wide.empty:
            continue
        judges = [str(j) for j in wide.columns]
        scores = wide.to_numpy(dtype=float) * sign
        gen = np.array([consistency.model_family(str(s)) for s in wide.index.get_level_values("source")])
        groups = pd.factorize(wide.index.get_level_values("instance_id"))[0]
        rng = np.random.default_rng([seed, 1, len(rows)])
        weights = np.vstack([np.ones(len(wide)), _boot_weights(groups, n_reps, rng)])
        for j, judge in enumerate(judges):
            fam = family_of.get(judge)
            own = gen == fam
            if not own.any() or own.all():
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                mean_own = (weights * own) @ scores / (weights @ own)[:, None]
                mean_other = (weights * ~own) @ scores / (weights @ ~own)[:, None]
            favours = mean_own - mean_other  # (1 + n_reps) × judges
            others = [k for k in range(len(judges)) if k != j]
            row: dict[str, object] = {"field": "self_preference", "judge": judge, "mode": str(mode)}
            row |= {"dimension": str(dim), "group": str(fam), "statistic": "favours_own"}
            row |= {"value": float(favours[0, j])}
            if not others:
                rows.append(row | _untested("no other judge scored these items: nothing to compare with"))
                continue
            theirs = favours[:, others].mean(axis=1)
            diff = favours[:, j] - theirs
            p, lo, hi, note = _wald(float(diff[0]), diff[1:])
            rows.append(row | {"null_lo": theirs[0] + lo, "null_hi": theirs[0] + hi, "p": p, "note": note})
    return rows


def _untested(note: str) -> dict[str, object]:
    return {"null_lo": np.nan, "null_hi": np.nan, "p": np.nan, "note": note}


def quadratic_kappa(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Quadratic-weighted Cohen's κ of numeric ratings `x`, `y` (items) under each row of item `weights`:
    1 − mean (x − y)² / its expectation under independence (var x + var y + (mean x − mean y)²), equal to
    statsmodels' `cohens_kappa(wt="quadratic")` on the values' categories (tested)."""
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = weights @ x / total, weights @ y / total
        vx, vy = weights @ x**2 / total - mx**2, weights @ y**2 / total - my**2
        observed = weights @ (x - y) ** 2 / total
        expected = vx + vy + (mx - my) ** 2
        return np.where(expected > TOL, 1 - observed / expected, np.nan)


def human_ceiling_rows(cands: pd.DataFrame, humans: pd.DataFrame, n_reps: int, seed: int) -> list[dict]:
    """Per judge × mode × dimension: the judge's κ_w against each expert's others' consensus (mean over
    experts), compared with the experts' own κ_w against the same consensus on the same items (the human
    ceiling), bootstrapped over items; a one-sided test: only agreeing less than the experts is flagged."""
    keys = list(CONSENSUS_KEYS)
    h = check_humans(humans)
    h = h.loc[h["score"].notna().to_numpy()].astype({k: str for k in keys})
    experts = h.groupby([*keys, "annotator"], sort=True)["score"].mean().unstack("annotator")
    judged = candidate_scores(cands).astype({"judge": str, "mode": str, **{k: str for k in keys}})
    judged = judged.groupby(["judge", "mode", *keys], sort=True)["score"].mean().dropna()
    rows: list[dict] = []
    for (judge, mode, dim), part in judged.groupby(level=["judge", "mode", "dimension"], sort=True):
        items = part.droplevel(["judge", "mode"])
        common = experts.reindex(items.index)
        rated = common.notna()
        keep = (rated.sum(axis=1) >= 2).to_numpy()
        row: dict[str, object] = {"field": "human_agreement", "judge": judge, "mode": mode, "dimension": dim}
        row |= {"group": "", "statistic": "kappa_w_loo", "value": np.nan}
        if keep.sum() < 3:
            rows.append(row | _untested("fewer than 3 items with two or more experts: no human ceiling"))
            continue
        scores, mask = common.to_numpy(dtype=float)[keep], rated.to_numpy()[keep]
        judge_x = half_up(items.to_numpy(dtype=float)[keep])
        total, count = np.nansum(scores, axis=1), mask.sum(axis=1)
        rng = np.random.default_rng([seed, 2, len(rows)])
        weights = np.vstack([np.ones(len(scores)), _boot_weights(np.arange(len(scores)), n_reps, rng)])
        judge_k, expert_k = [], []
        for a in range(scores.shape[1]):
            mine = mask[:, a]
            if mine.sum() < 2:
                continue
            others = half_up(np.where(mine, (total - np.nan_to_num(scores[:, a])) / (count - mine), np.nan))
            sub = weights[:, mine]
            expert_k.append(quadratic_kappa(half_up(scores[mine, a]), others[mine], sub))
            judge_k.append(quadratic_kappa(judge_x[mine], others[mine], sub))
        if not expert_k:
            rows.append(row | _untested("no expert shares items with another: no human ceiling"))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a replicate with no κ: NaN, said by the note
            mine_k, ceiling = np.nanmean(judge_k, axis=0), np.nanmean(expert_k, axis=0)
        diff = mine_k - ceiling
        p, lo, hi, note = _wald(float(diff[0]), diff[1:], one_sided_below=True)
        row |= {"value": float(mine_k[0]), "null_lo": ceiling[0] + lo, "null_hi": ceiling[0] + hi}
        rows.append(row | {"p": p, "note": note})
    return rows


def statistics(
    results: pd.DataFrame, cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference"
) -> dict[str, Statistic]:
    """The permutation fields that apply to this study (`Statistic`)."""
    out: dict[str, Statistic] = {}
    kinds = kinds_by_mode(results)
    multi = modes_of(kinds, ModeKind.multi)
    if "position" in results and multi:
        out["position_bias"] = _position(results, multi)
    scored = set(cands["mode"].dropna().astype(str))
    pairs = [p for p in shift_pairs(kinds) if set(p) <= scored]
    if pairs:
        out["mode_shift"] = _mode_shift(cands, reference, pairs)
    return out


def _permutation_rows(field: str, stat: Statistic, n_reps: int, seed: int) -> list[dict]:
    keys, group, name = FIELDS[field]
    rng = np.random.default_rng([seed, list(FIELDS).index(field)])
    observed, sims = stat(n_reps, rng)
    if observed.empty or name not in observed:
        return []
    observed = observed.astype({k: str for k in keys})
    rows = []
    for rec in observed.to_dict("records"):
        at = tuple(rec[k] for k in keys)
        null = sims.loc[at].to_numpy(dtype=float) if len(sims) and at in sims.index else np.array([])
        rows.append(_null_row(field, rec, float(rec[name]), null))
    return rows


def _null_row(field: str, rec: dict, value: float, null: np.ndarray) -> dict:
    """One card row of a permutation field: the value, the null's 95% range, a Wald p against the null (of
    |value| for the furthest position, signed either way) or the note why it is not tested."""
    _, group, name = FIELDS[field]
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(null, [tail, 1 - tail]) if null.size else (np.nan, np.nan)
    p, note = np.nan, ""
    if null.size < 2 or not np.isfinite(value):
        note = "too few replicates with a value"
    elif np.std(null) <= TOL:
        note = DEGENERATE
    elif field == "position_bias":
        spread = np.abs(null)
        sd = spread.std(ddof=1)
        p = float(stats.norm.sf((abs(value) - spread.mean()) / sd)) if sd > TOL else np.nan
        note = "" if sd > TOL else DEGENERATE
    else:
        p = float(2 * stats.norm.sf(abs(value - null.mean()) / null.std(ddof=1)))
    return {
        "field": field,
        "judge": rec["judge"],
        "mode": rec.get("mode", ""),
        "dimension": rec["dimension"],
        "group": str(rec[group]) if group else "",
        "statistic": name,
        "value": value,
        "null_lo": float(low),
        "null_hi": float(high),
        "p": p,
        "note": note,
    }


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values, equal to statsmodels' `multipletests(method="holm")` (tested);
    written out because statsmodels runs `gc.collect()` on every Holm call, a quarter of a second per card
    in a large process."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    out = np.empty_like(p)
    out[order] = np.minimum(stepped, 1.0)
    return out


def card_family(table: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Holm's adjustment of each judge's p-values across its card (`q`), and `flag` = q < `alpha`: the card's
    tests are one family, so the chance that an unbiased judge shows any flag is at most `alpha`."""
    q = np.full(len(table), np.nan)
    p = pd.to_numeric(table["p"], errors="coerce").to_numpy(dtype=float)
    for idx in table.groupby(table["judge"].astype(str), sort=False).indices.values():
        ok = idx[np.isfinite(p[idx])]
        if ok.size:
            q[ok] = holm(p[ok])
    return table.assign(q=q, flag=np.nan_to_num(q, nan=1.0) < alpha)


def null_ranges(
    results: pd.DataFrame,
    cands: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    n_reps: int = N_REPS,
    seed: int = 0,
    fields: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """Per card field and judge (× mode × dimension, × group): the judge's value, the `LEVEL` range a judge
    without the effect would show, the test's `p`, its Holm `q` across the judge's card, `flag` (q < `ALPHA`)
    and a `note` where the field is not tested. `results` are the unperturbed rows and `cands` their
    candidate scores (`analysis.stats.study.study_candidates`), as the card reads them."""

    def wanted(field: str) -> bool:
        return fields is None or field in fields

    rows: list[dict] = []
    for field, stat in statistics(results, cands, humans, reference).items():
        if wanted(field):
            rows += _permutation_rows(field, stat, n_reps, seed)
    if wanted("length_bias") and "candidate_text" in results:
        rows += length_rows(results, n_reps, seed)
    if wanted("self_preference") and "model" in results and "source" in results:
        rows += self_preference_rows(results, reference, n_reps, seed)
    if wanted("human_agreement") and humans is not None and len(humans):
        rows += human_ceiling_rows(cands, humans, n_reps, seed)
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("q", "flag")])
    return card_family(table)[COLUMNS]


FLAGS: TableSpec = TableSpec(  # card-only: the null ranges of an unbiased judge
    "flags",
    lambda s, _: null_ranges(s.study, s.cands, s.humans, s.reference, s.n_null, s.seed),
    tuple(COLUMNS),
    card=CardField(
        "Flags (against a judge without the effect: permutations, the other judges on the same items, the "
        "human ceiling; Holm across the card, q < 0.05)",
        tuple(c for c in COLUMNS if c != "judge"),
        "no field with a null range (position, length, self-preference, mode shift, human agreement)",
        order=110,
    ),
    report=False,
)
