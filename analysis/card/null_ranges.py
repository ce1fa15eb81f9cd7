"""Null ranges for the judge card's bias and agreement fields: what an unbiased judge of the same
self-consistency would show, and a flag when the judge falls outside it.

A card value alone cannot say whether a position excess of 0.04 or a length ρ of 0.2 is a bias or the
judge's own noise. Each field is recomputed, with the same function the report and the card use, on
seeded replicates of the judge's own data with the effect removed, and the 2.5–97.5% range of the
replicates is the range an unbiased judge of the same spread would show:

- `position_bias`: the positions shown in each comparative prompt are permuted (the scores stay),
  statistic: the excess win rate (win rate − expected) of the position furthest from the unbiased rate;
- `length_bias`: the candidates' texts (so their lengths) are permuted across candidates, statistic ρ;
- `self_preference`: the generators are permuted across generated candidates, statistic `favours_own`;
- `mode_shift`: each item's two mode outcomes are swapped with probability ½, statistic `delta_win`;
- `human_agreement`: a judge that scores the human consensus plus noise of its own within-prompt sample
  sd `sample_sd` (its candidate score is a mean of k samples: sd / √k), statistic quadratic-weighted κ.

`flag` is True when the judge's value lies outside the range (a range of one value, e.g. a judge with no
spread, flags only a value different from it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.stats import consistency, illusion
from analysis.stats.humans import CONSENSUS_KEYS, consensus_scores, human_agreement
from analysis.stats.scores import candidate_scores

N_REPS = 200
LEVEL = 0.95
TOL = 1e-9
COLUMNS = ["field", "judge", "mode", "dimension", "group", "statistic", "value", "null_lo", "null_hi", "flag"]
#: field -> (keys of one value, the column naming its group, the statistic)
FIELDS: dict[str, tuple[list[str], str | None, str]] = {
    "position_bias": (["judge", "dimension"], "position", "excess"),
    "length_bias": (["judge", "mode", "dimension"], None, "rho"),
    "self_preference": (["judge", "mode", "dimension"], "family", "favours_own"),
    "mode_shift": (["judge", "source", "dimension"], "source", "delta_win"),
    "human_agreement": (["judge", "mode", "dimension"], None, "kappa_w"),
}

#: the mode of a field whose table has no mode column
MODE = {"position_bias": "comparative", "mode_shift": "independent→comparative"}
Statistic = Callable[[np.random.Generator | None], pd.DataFrame]


def furthest_position(pos: pd.DataFrame) -> pd.DataFrame:
    """Per judge × dimension: the shown position whose win rate is furthest from the unbiased rate (the
    card's position-bias row), with its `excess` = win rate − expected."""
    if pos is None or pos.empty:
        return pd.DataFrame()
    pos = pos.assign(excess=pos["win_rate"] - pos["expected"])
    idx = pos.groupby(["judge", "dimension"], observed=True)["excess"].apply(lambda s: s.abs().idxmax())
    return pos.loc[idx.to_numpy()]


def _shuffle_within(values: pd.Series, groups: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    out = values.to_numpy(copy=True)
    for idx in groups:
        out[idx] = out[rng.permutation(idx)]
    return out


def _position(results: pd.DataFrame) -> Statistic:
    """Positions permuted among a prompt's candidates, the same way in each of its samples (a candidate keeps
    one place across the samples of a prompt, so its samples stay as correlated as the judge's)."""
    rows = results.loc[(results["mode"] == "comparative").to_numpy() & results["position"].notna().to_numpy()]
    prompt = ["judge", *consistency._prompt_keys(rows), "dimension"]
    slots = rows[[*prompt, "candidate_id", "position"]].drop_duplicates([*prompt, "candidate_id"])
    slots = slots.reset_index(drop=True)
    groups = [np.asarray(g) for g in slots.groupby(prompt, sort=False, observed=True).indices.values()]
    others = rows.drop(columns="position")

    def stat(rng: np.random.Generator | None) -> pd.DataFrame:
        if rng is None:
            return furthest_position(consistency.position_bias(rows))
        new = slots.assign(position=_shuffle_within(slots["position"], groups, rng))
        shown = others.merge(new, on=[*prompt, "candidate_id"], how="left")
        return furthest_position(consistency.position_bias(shown))

    return stat


def _by_item(results: pd.DataFrame, column: str, keep: np.ndarray) -> Statistic:
    """Permute `column` across the (instance, candidate) items where `keep` holds (one value per item)."""
    items = (
        results[["instance_id", "candidate_id", column]]
        .loc[keep]
        .drop_duplicates(["instance_id", "candidate_id"])
    )

    def permuted(rng: np.random.Generator) -> pd.DataFrame:
        new = items.assign(**{column: rng.permutation(items[column].to_numpy())})
        mapped = results[["instance_id", "candidate_id"]].merge(
            new, on=["instance_id", "candidate_id"], how="left"
        )[column]
        values = np.where(keep, mapped.to_numpy(), results[column].to_numpy())
        return results.assign(**{column: values})

    return permuted  # type: ignore[return-value]


def _length(results: pd.DataFrame) -> Statistic:
    permute = _by_item(results, "candidate_text", np.ones(len(results), dtype=bool))
    return lambda rng: consistency.length_bias(results if rng is None else permute(rng))


def _self_preference(results: pd.DataFrame, reference: str) -> Statistic:
    generated = ~results["source"].isin([reference, "human"]).to_numpy()
    permute = _by_item(results, "source", generated)
    return lambda rng: consistency.self_preference(results if rng is None else permute(rng), None, reference)


def _mode_shift(cands: pd.DataFrame, reference: str) -> Statistic:
    paired = illusion.mode_pairs(cands, reference)

    def stat(rng: np.random.Generator | None) -> pd.DataFrame:
        p = paired
        if rng is not None:
            swap = rng.random(len(p)) < 0.5
            p = p.assign(
                before=np.where(swap, p["after"], p["before"]), after=np.where(swap, p["before"], p["after"])
            )
        return illusion.paired_shift(p, illusion.MODE_SHIFT_KEYS, n_boot=1, seed=0)

    return stat


def sample_spread(results: pd.DataFrame) -> pd.DataFrame:
    """Per judge × mode × dimension: the pooled within-prompt sample sd (root mean variance over prompts
    with ≥ 2 samples) and the mean number of samples per prompt, `k`."""
    values = consistency.sample_values(results)
    keys = [*consistency.GROUP, *consistency._prompt_keys(values), "candidate_id"]
    per = values.groupby(keys, observed=True)["value"].agg(var="var", k="size").reset_index()
    out = (
        per.groupby(consistency.GROUP, observed=True).agg(var=("var", "mean"), k=("k", "mean")).reset_index()
    )
    out["sample_sd"] = np.sqrt(out["var"].fillna(0.0))
    return out.astype({c: str for c in consistency.GROUP})[[*consistency.GROUP, "sample_sd", "k"]]


def _human(results: pd.DataFrame, cands: pd.DataFrame, humans: pd.DataFrame) -> Statistic:
    keys = list(CONSENSUS_KEYS)
    judged = candidate_scores(cands).astype({"judge": str, "mode": str, **{k: str for k in keys}})
    judged = judged.merge(consensus_scores(humans)[[*keys, "human"]], on=keys, how="inner")
    judged = judged.merge(sample_spread(results), on=consistency.GROUP, how="left")
    noise = (judged["sample_sd"].fillna(0.0) / np.sqrt(judged["k"].fillna(1.0).clip(lower=1.0))).to_numpy()

    def stat(rng: np.random.Generator | None) -> pd.DataFrame:
        if rng is None:
            return human_agreement(cands, humans, n_boot=1, seed=0)
        fake = judged.assign(score=judged["human"].to_numpy() + rng.normal(0.0, 1.0, len(judged)) * noise)
        return human_agreement(fake, humans, n_boot=1, seed=0)

    return stat


def statistics(
    results: pd.DataFrame, cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference"
) -> dict[str, Statistic]:
    """The fields that apply to this study, each a function of a generator (None: the judge's own value)."""
    out: dict[str, Statistic] = {}
    modes = set(results["mode"].dropna().astype(str))
    if "position" in results and "comparative" in modes:
        out["position_bias"] = _position(results)
    if "candidate_text" in results:
        out["length_bias"] = _length(results)
    if "model" in results and "source" in results:
        out["self_preference"] = _self_preference(results, reference)
    if {"independent", "comparative"} <= set(cands["mode"].dropna().astype(str)):
        out["mode_shift"] = _mode_shift(cands, reference)
    if humans is not None and len(humans):
        out["human_agreement"] = _human(results, cands, humans)
    return out


def null_ranges(
    results: pd.DataFrame,
    cands: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    n_reps: int = N_REPS,
    seed: int = 0,
    fields: tuple[str, ...] | None = None,
) -> pd.DataFrame:
    """Per card field and judge (× mode × dimension, × group): the judge's value, the `LEVEL` range over
    `n_reps` seeded bias-free replicates, and `flag` (outside). `results` are the unperturbed rows and
    `cands` their candidate scores (`analysis.stats.study.study_candidates`), as the card reads them."""
    rows = []
    for field, stat in statistics(results, cands, humans, reference).items():
        if fields is not None and field not in fields:
            continue
        keys, group, name = FIELDS[field]
        observed = stat(None)
        if observed.empty or name not in observed:
            continue
        observed = observed.astype({k: str for k in keys})
        rng = np.random.default_rng([seed, list(FIELDS).index(field)])
        reps = [stat(rng).astype({k: str for k in keys}).set_index(keys)[name] for _ in range(n_reps)]
        sims = pd.concat(reps, axis=1) if reps else pd.DataFrame()
        tail = (1 - LEVEL) / 2
        lo = sims.quantile(tail, axis=1) if len(sims) else pd.Series(dtype=float)
        hi = sims.quantile(1 - tail, axis=1) if len(sims) else pd.Series(dtype=float)
        for rec in observed.to_dict("records"):
            at = tuple(rec[k] for k in keys)
            at = at[0] if len(at) == 1 else at
            low, high = (float(lo.get(at, np.nan)), float(hi.get(at, np.nan)))
            value = float(rec[name])
            known = np.isfinite([value, low, high]).all()
            flag = bool(known and (value < low - TOL or value > high + TOL))
            label = str(rec[group]) if group else ""
            mode = rec.get("mode", MODE.get(field, ""))
            rows.append(
                {
                    "field": field,
                    "judge": rec["judge"],
                    "mode": mode,
                    "dimension": rec["dimension"],
                    "group": label,
                }
                | {"statistic": name, "value": value, "null_lo": low, "null_hi": high, "flag": flag}
            )
    return pd.DataFrame(rows, columns=COLUMNS)
