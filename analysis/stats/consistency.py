"""How far a judge agrees with itself, and the biases that move its verdicts (docs/statistics.md).

- self-consistency over the samples of one prompt: sd, share of prompts whose samples disagree, α;
- position bias: by shown position in comparative mode, and order effects / flips in pairwise mode;
- length bias: Spearman of candidate score vs candidate length in words;
- self-preference: a judge's mean score for its own model family's generations vs other generators'.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from analysis.stats.modes import modes_of
from analysis.stats.reliability import Level, alpha_from_counts
from analysis.stats.scores import (
    as_text,
    candidate_scores,
    direction,
    group_ids,
    map_distinct,
    scored_rows,
    split_groups,
    text_isin,
    usable_mask,
)
from analysis.stats.spec import CardField, FigureSpec, Headline, Inputs, Section, Tables, TableSpec
from core.intervals import fisher_z_interval, t_interval, wilson_interval
from core.modes import ModeKind

GROUP = ["judge", "mode", "dimension"]
PREFERENCE_VALUE = {"a": 1.0, "tie": 0.0, "b": -1.0}


def _usable(results: pd.DataFrame) -> pd.DataFrame:
    return results.loc[usable_mask(results)]


def _prompt_keys(results: pd.DataFrame) -> list[str]:
    """A prompt's identity: `prompt_id`, or what defines a prompt in each mode when it is absent."""
    if "prompt_id" in results:
        return ["prompt_id"]
    return ["instance_id"] + [c for c in ("other_id", "order") if c in results]


def sample_values(results: pd.DataFrame) -> pd.DataFrame:
    """One numeric verdict per row: the score, or for pairwise rows the preference (a 1, tie 0, b -1)."""
    rows = _usable(results)
    value = rows["score"].astype(float)
    if "preference" in rows:
        pref = map_distinct(rows["preference"], lambda p: PREFERENCE_VALUE.get(str(p), np.nan))
        value = value.fillna(pd.Series(pref.astype(float), index=rows.index))
    keys = [*GROUP, *_prompt_keys(rows), "candidate_id", "sample_idx"]
    return rows[keys].assign(value=value.to_numpy()).loc[value.notna().to_numpy()]


def _samples_alpha(
    unit: np.ndarray, value_code: np.ndarray, values: np.ndarray, level: Level, n_boot: int, seed: int
) -> tuple[float, float, float]:
    """α with samples as raters and (prompt, candidate) as units, for one judge × mode × dimension."""
    local = np.unique(unit, return_inverse=True)[1]
    n_units, n_values = local.max() + 1, len(values)
    counts = np.bincount(local * n_values + value_code, minlength=n_units * n_values).reshape(
        n_units, n_values
    )
    return alpha_from_counts(counts, values, level, n_boot, seed)


def self_consistency(
    results: pd.DataFrame, level: Level = "ordinal", n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Per judge × mode × dimension, over prompts×candidates with ≥ 2 scored samples: mean sd (t CI),
    share whose samples disagree (Wilson CI), and Krippendorff's α across samples (bootstrap CI)."""
    vals = sample_values(results)
    unit, first = group_ids(vals, [*GROUP, *_prompt_keys(vals), "candidate_id"])
    value = vals["value"].to_numpy()
    n = np.bincount(unit)
    squares = np.bincount(unit, weights=(value - (np.bincount(unit, weights=value) / n)[unit]) ** 2)
    with np.errstate(all="ignore"):
        units = vals[GROUP].iloc[first].assign(_n=n, _sd=np.sqrt(squares / (n - 1)), _dis=squares > 1e-9)
    out = (
        units.loc[n >= 2]
        .groupby(GROUP, observed=True)
        .agg(
            n_prompts=("_n", "size"),
            mean_sd=("_sd", "mean"),
            sd_sd=("_sd", "std"),
            n_disagree=("_dis", "sum"),
        )
        .reset_index()
    )
    out["sd_lo"], out["sd_hi"] = t_interval(out["mean_sd"], out["sd_sd"], out["n_prompts"])
    out["disagree"] = out["n_disagree"] / out["n_prompts"]
    out["disagree_lo"], out["disagree_hi"] = wilson_interval(out["n_disagree"], out["n_prompts"])
    values, value_code = np.unique(value, return_inverse=True)
    alphas = {
        key: _samples_alpha(unit[idx], value_code[idx], values, level, n_boot, seed)
        for key, idx in split_groups(vals, GROUP)
    }
    for j, col in enumerate(("alpha", "alpha_lo", "alpha_hi")):
        out[col] = [alphas.get(tuple(r), (np.nan,) * 3)[j] for r in out[GROUP].itertuples(index=False)]
    return out.drop(columns=["sd_sd"])


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterator[tuple[tuple, np.ndarray, pd.DataFrame]]:
    """(key values, row positions, rows) of every group."""
    for key, idx in split_groups(frame, keys):
        yield key, idx, frame.iloc[idx]


def position_shares(results: pd.DataFrame, modes: Sequence[str] | None = None) -> pd.DataFrame:
    """The scored rows with a shown position (`position_bias`'s `modes`), each with its `_share` of its
    prompt sample's win (1 / number tied for best, else 0) and `_expected` share without position bias
    (1 / number shown). Neither depends on where the candidate was shown, so the card's position null
    (`analysis.stats.null_ranges`) permutes positions against these fixed shares."""
    rows = scored_rows(results)
    chosen = text_isin(rows["mode"], modes) if modes is not None else True
    rows = rows.loc[chosen & rows["position"].notna().to_numpy()]
    prompt = ["judge", "mode", *_prompt_keys(rows), "sample_idx", "dimension"]
    codes = group_ids(rows, prompt)[0]
    signed = rows["score"].to_numpy(dtype=float) * direction(rows)
    best = np.full(codes.max() + 1 if len(codes) else 0, -np.inf)
    np.maximum.at(best, codes, signed)
    top = (signed >= best[codes] - 1e-9).astype(float)
    shown = np.bincount(codes)[codes]
    return rows[["judge", "mode", "dimension", "position", "score"]].assign(
        _share=top / np.bincount(codes, weights=top)[codes], _expected=1.0 / shown
    )


def position_bias(results: pd.DataFrame, modes: Sequence[str] | None = None) -> pd.DataFrame:
    """Per judge × mode × dimension × shown position in prompts of several candidates (`modes`: those of
    kind multi, analysis.stats.modes; None: every row with a position): mean score and win rate (share of
    prompt samples in which the candidate shown there scored best, ties split) and the win rate expected
    without position bias (mean of 1 / number shown). The mean score has a t CI; the win rate, a share of n
    prompt samples, a Wilson CI on its (tie-split) count of wins, so 3 wins of 3 reads [0.44, 1], not the
    t interval's [1, 1] from a standard deviation of 0."""
    frame = position_shares(results, modes)
    out = (
        frame.groupby(["judge", "mode", "dimension", "position"], observed=True)
        .agg(
            n=("score", "size"),
            mean_score=("score", "mean"),
            sd_score=("score", "std"),
            win_rate=("_share", "mean"),
            expected=("_expected", "mean"),
        )
        .reset_index()
    )
    out["score_lo"], out["score_hi"] = t_interval(out["mean_score"], out["sd_score"], out["n"])
    out["win_lo"], out["win_hi"] = wilson_interval(out["win_rate"] * out["n"], out["n"])
    return out


def pairwise_bias(results: pd.DataFrame, modes: Sequence[str] | None = None) -> pd.DataFrame:
    """Per judge × dimension in pairwise mode, over (prompt, sample) verdicts, each with a Wilson CI:
    `first_rate` = n_first / n_decided, the share of decided (not tie) verdicts that prefer the first-shown
    text (0.5 without an order preference; a tie favours neither order, so counting it in the denominator
    read a judge that often says tie as preferring the second-shown text; NaN when all are ties);
    `tie_rate` = n_tie / n; and the flip rate — the share of verdicts whose preference changes when the
    order is swapped (verdicts whose other order is unscored are not counted)."""
    rows = _usable(results)
    # `modes`: those of kind pair (analysis.stats.modes); None: every row with a preference and an order
    chosen = text_isin(rows["mode"], modes) if modes is not None else True
    rows = rows.loc[chosen & rows["preference"].notna().to_numpy() & rows["order"].notna().to_numpy()]
    rows = rows.drop_duplicates(["judge", *_prompt_keys(rows), "sample_idx", "dimension"])
    pref, order = as_text(rows["preference"]).to_numpy(), as_text(rows["order"]).to_numpy()
    first = ((order == "ab") & (pref == "a")) | ((order == "ba") & (pref == "b"))
    flag = rows["inconsistent"] if "inconsistent" in rows else pd.Series(pd.NA, index=rows.index)
    known = flag.notna().to_numpy()  # unknown when the other order is unscored
    frame = rows[["judge", "dimension"]].assign(
        _first=first,
        _tie=pref == "tie",
        _known=known,
        _flip=known & flag.fillna(False).astype(bool).to_numpy(),
    )
    out = (
        frame.groupby(["judge", "dimension"], observed=True)
        .agg(
            n=("_first", "size"),
            n_first=("_first", "sum"),
            n_tie=("_tie", "sum"),
            n_known=("_known", "sum"),
            n_flip=("_flip", "sum"),
        )
        .reset_index()
    )
    out.insert(out.columns.get_loc("n_tie") + 1, "n_decided", out["n"] - out["n_tie"])
    for name, denom in (("first", "n_decided"), ("tie", "n"), ("flip", "n_known")):
        out[f"{name}_rate"] = out[f"n_{name}"] / out[denom].where(out[denom] > 0)
        out[f"{name}_lo"], out[f"{name}_hi"] = wilson_interval(out[f"n_{name}"], out[denom])
    # exact binomial test of first_rate = 0.5 (no order preference) on the decided verdicts
    out.insert(
        out.columns.get_loc("first_hi") + 1,
        "first_p",
        [
            float(stats.binomtest(int(k), int(n), 0.5).pvalue) if n > 0 else np.nan
            for k, n in zip(out["n_first"], out["n_decided"], strict=True)
        ],
    )
    return out


def _word_counts(results: pd.DataFrame) -> pd.DataFrame:
    """Length in words of each (instance, candidate)'s text, counted once per distinct text."""
    first = results.drop_duplicates(["instance_id", "candidate_id"])
    length = map_distinct(first["candidate_text"], lambda text: len(str(text).split())).astype(float)
    return first[["instance_id", "candidate_id"]].assign(length=length)


def scores_with_length(results: pd.DataFrame) -> pd.DataFrame:
    """Each candidate's score (`candidate_scores`) beside its length in words: what `length_bias` and its
    null (`null_ranges.length_rows`) read, computed once for both."""
    return candidate_scores(results).merge(_word_counts(results), on=["instance_id", "candidate_id"])


def length_bias(results: pd.DataFrame, cands: pd.DataFrame | None = None) -> pd.DataFrame:
    """Spearman ρ of candidate score vs length in words per judge × mode × dimension (Fisher-z CI); `cands`:
    `scores_with_length(results)` where the caller has it already.

    `rho_better` is ρ signed so that > 0 means longer texts are judged better on either kind of dimension.
    """
    cands = scores_with_length(results) if cands is None else cands
    rows = []
    for key, _, part in _groups(cands.dropna(subset=["length"]), GROUP):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input gives NaN
            rho = float(stats.spearmanr(part["score"], part["length"])[0]) if len(part) > 1 else np.nan
        lo, hi = fisher_z_interval(rho, len(part), "spearman")
        sign = direction(part.iloc[:1])[0]
        rows.append(
            {
                **dict(zip(GROUP, key, strict=True)),
                "n": len(part),
                "rho": rho,
                "rho_lo": lo,
                "rho_hi": hi,
                "rho_better": rho * sign,
                "mean_length": part["length"].mean(),
            }
        )
    return pd.DataFrame(rows, columns=[*GROUP, "n", "rho", "rho_lo", "rho_hi", "rho_better", "mean_length"])


def model_family(name: str, families: Mapping[str, str] | None = None) -> str:
    """Family of a judge model or generator: `families[name]` if given, else the leading letters of the name
    after any provider prefix, lowercased ("openai/gpt-4o" and "gpt-5.5" → "gpt", "gemini-2.5-pro" →
    "gemini", "deepseek-chat" → "deepseek", "narrow_gen" → "narrow_gen")."""
    if families and name in families:
        return families[name]
    base = str(name).lower().rsplit("/", 1)[-1]
    match = re.match(r"[a-z_]+?(?=[-.:0-9]|$)", base)
    return match.group(0) if match else base


SELF_PREFERENCE_COLUMNS = (
    *GROUP,
    "family",
    "n_own",
    "n_other",
    "mean_own",
    "mean_other",
    "diff",
    "diff_lo",
    "diff_hi",
    "p",
    "favours_own",
)


def _own_vs_other(mine: np.ndarray, theirs: np.ndarray, sign: float) -> dict[str, float]:
    """Means, difference, Welch CI and p (scipy; NaN below two values a side), and the signed difference."""
    lo = hi = p = np.nan
    if len(mine) >= 2 and len(theirs) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero variance on both sides gives NaN
            test = stats.ttest_ind(mine, theirs, equal_var=False)
            ci = test.confidence_interval(0.95)
        lo, hi, p = float(ci.low), float(ci.high), float(test.pvalue)
    diff = float(mine.mean() - theirs.mean())
    return {
        "n_own": len(mine),
        "n_other": len(theirs),
        "mean_own": mine.mean(),
        "mean_other": theirs.mean(),
        "diff": diff,
        "diff_lo": lo,
        "diff_hi": hi,
        "p": p,
        "favours_own": diff * sign,
    }


def self_preference(
    results: pd.DataFrame,
    families: Mapping[str, str] | None = None,
    reference: str = "reference",
) -> pd.DataFrame:
    """Per judge × mode × dimension: mean candidate score for generators of the judge's own family vs the
    other generators (reference and human texts excluded), their difference with a Welch CI and p, and
    `favours_own` = difference signed so that > 0 means the judge rates its own family better.

    A judge's family is `families[judge]` if given, else `model_family` of its `model`; a generator's is
    `model_family(source, families)`. Groups without both kinds of candidates are left out.
    """
    models = results[["judge", "model"]].drop_duplicates("judge")
    judge_family = {
        str(j): families[j] if families and j in families else model_family(str(m), families)
        for j, m in models.itertuples(index=False)
    }
    cands = candidate_scores(results)
    cands = cands.loc[~cands["source"].isin([reference, "human"]).to_numpy()]
    gen_family = map_distinct(cands["source"], lambda s: model_family(str(s), families))
    own = map_distinct(cands["judge"], lambda j: judge_family.get(str(j))) == gen_family
    rows = []
    for key, idx, part in _groups(cands, GROUP):
        mine, theirs = part["score"].to_numpy()[own[idx]], part["score"].to_numpy()[~own[idx]]
        if len(mine) and len(theirs):
            sign = direction(part.iloc[:1])[0]
            rows.append(
                {
                    **dict(zip(GROUP, key, strict=True)),
                    "family": judge_family.get(str(key[0])),
                    **_own_vs_other(mine, theirs, sign),
                }
            )
    return pd.DataFrame(rows, columns=list(SELF_PREFERENCE_COLUMNS))


def furthest_position(pos: pd.DataFrame) -> pd.DataFrame:
    """Per judge × mode × dimension: the shown position whose win rate is furthest from the unbiased rate (the
    card's position-bias row), with its `excess` = win rate − expected."""
    if pos is None or pos.empty:
        return pd.DataFrame()
    pos = pos.assign(excess=pos["win_rate"] - pos["expected"])
    by = ["judge", "mode", "dimension"] if "mode" in pos else ["judge", "dimension"]
    idx = pos.groupby(by, observed=True)["excess"].apply(lambda s: s.abs().idxmax())
    return pos.loc[idx.to_numpy()]


def mean_by_judge(table: pd.DataFrame | None, value: str, name: str) -> pd.DataFrame:
    """A leaderboard column: `value`'s mean per judge, named `name` (no row where the table is absent)."""
    if table is None or table.empty or value not in table:
        return pd.DataFrame(columns=["judge", name])
    frame = table.assign(judge=table["judge"].astype(str))
    return frame.groupby("judge", as_index=False)[value].mean().rename(columns={value: name})


def position_by_judge(tables: Tables) -> pd.DataFrame:
    """Position bias per judge: comparative mode, the largest |win rate − expected| over shown positions
    (averaged over dimensions); pairwise mode, first_rate − 0.5, first_rate being the share of decided (not
    tie) verdicts that prefer the first-shown text (`pairwise_bias`; averaged over dimensions, NaN when every
    verdict is a tie); a judge that ran both shows the one further from 0 (a max would hide a pairwise
    preference for the second-shown text)."""
    frames = []
    pos = POSITION_BIAS.of(tables)
    if pos is not None and len(pos):
        gap = pos.assign(judge=pos["judge"].astype(str), _gap=(pos["win_rate"] - pos["expected"]).abs())
        per_dim = gap.groupby(["judge", "dimension"], observed=True)["_gap"].max().reset_index()
        frames.append(per_dim.groupby("judge", as_index=False)["_gap"].mean())
    pair = PAIRWISE_BIAS.of(tables)
    if pair is not None and len(pair):
        first = pair.assign(judge=pair["judge"].astype(str), _gap=pair["first_rate"] - 0.5)
        frames.append(first.groupby("judge", as_index=False)["_gap"].mean())
    if not frames:
        return pd.DataFrame(columns=["judge", "position_bias"])
    both = pd.concat(frames, ignore_index=True).dropna(subset=["_gap"])  # all ties: no pairwise gap
    largest = both.loc[both["_gap"].abs().groupby(both["judge"]).idxmax()]  # signed: < 0 favours the second
    return largest.rename(columns={"_gap": "position_bias"})[["judge", "position_bias"]]


def _pairwise_by_judge(tables: Tables) -> pd.DataFrame:
    """The leaderboard's pairwise columns: first-shown preference, tie and flip rates, means per judge."""
    pair = PAIRWISE_BIAS.of(tables)
    parts = [mean_by_judge(pair, c, c) for c in ("first_rate", "tie_rate", "flip_rate")]
    return parts[0].merge(parts[1], on="judge", how="outer").merge(parts[2], on="judge", how="outer")


def _multi(s: Inputs) -> list[str]:
    return modes_of(s.mode_kinds, ModeKind.multi)


def _pair(s: Inputs) -> list[str]:
    return modes_of(s.mode_kinds, ModeKind.pair)


SELF_CONSISTENCY: TableSpec = TableSpec(
    "self_consistency",
    lambda s, _: self_consistency(s.study, n_boot=s.n_boot, seed=s.seed),
    ("judge", "mode", "dimension", "n_prompts", "mean_sd", "disagree", "alpha"),
    section=Section.self_consistency,
    figure=FigureSpec("self_consistency", "self_consistency_plot", lambda t, _: (SELF_CONSISTENCY.need(t),)),
    headline=Headline("alpha", "min", "lowest α across samples"),
    card=CardField(
        "Self-consistency across samples",
        ("mode", "dimension", "n_prompts", "mean_sd", "disagree", "alpha", "alpha_lo", "alpha_hi"),
        "fewer than 2 scored samples per prompt",
        order=20,
    ),
    leaderboard=lambda t: mean_by_judge(SELF_CONSISTENCY.of(t), "alpha", "self_alpha"),
    meanings={
        "n_prompts": "prompt × candidate units with ≥ 2 scored samples",
        "n_disagree": "units whose samples differ",
        "self_alpha": "self-consistency: Krippendorff's α across a prompt's samples (mean over modes × dimensions)",
        "mean_sd": "mean sd of a prompt's samples",
        "disagree": "share of units whose samples differ",
    },
)
POSITION_BIAS: TableSpec = TableSpec(
    "position_bias",
    lambda s, _: position_bias(s.study, _multi(s)) if _multi(s) and "position" in s.study else None,
    ("judge", "mode", "dimension", "position", "n", "win_rate", "expected"),
    section=Section.position,
    figure=FigureSpec("position_bias", "position_bias_plot", lambda t, _: (POSITION_BIAS.need(t),)),
    headline=Headline("win_rate", "max", "highest win rate by position"),
    card=CardField(
        "Position bias (several candidates per prompt: the position furthest from the unbiased win rate)",
        ("mode", "dimension", "position", "n", "win_rate", "expected", "win_lo", "win_hi"),
        "no run of a several-candidates mode (comparative)",
        order=30,
        read=furthest_position,
    ),
    leaderboard=position_by_judge,
    meanings={
        "position": "0-based place in the comparative prompt",
        "mean_score": "mean score at this position",
        "sd_score": "sd of those scores",
        "win_rate": "share of prompts where the candidate at this position scored best",
        "expected": "that share without position bias",
        "position_bias": "comparative: largest |win rate − expected| over positions; pairwise: first_rate − 0.5 (ties left out; < 0 favours the second-shown text)",
    },
)
PAIRWISE_BIAS: TableSpec = TableSpec(
    "pairwise_bias",
    lambda s, _: pairwise_bias(s.study, _pair(s)) if _pair(s) and "order" in s.study else None,
    ("judge", "dimension", "first_rate", "tie_rate", "flip_rate", "first_p"),
    section=Section.position,
    headline=Headline("first_rate", "absmax", "largest first-shown preference"),
    leaderboard=_pairwise_by_judge,
    p_column="first_p",
    p_family="bias",
    meanings={
        "n_first": "verdicts preferring the first-shown text",
        "n_decided": "verdicts that are not a tie",
        "n_flip": "verdicts that change with the order",
        "n_known": "verdicts whose swapped order was scored",
        "first_rate": "n_first / n_decided: share of decided (not tie) verdicts preferring the first-shown text (0.5 = no order preference; empty when all are ties)",
        "tie_rate": "share of tie verdicts",
        "flip_rate": "share of verdicts that change when the order is swapped",
        "first_p": "exact binomial p of first_rate = 0.5 (no order preference)",
        "first_p_q": "Benjamini–Hochberg q-value of first_p (within its test family, fixed by the design)",
    },
)
LENGTH_BIAS: TableSpec = TableSpec(
    "length_bias",
    lambda s, _: length_bias(s.study) if "candidate_text" in s.study else None,
    ("judge", "mode", "dimension", "n", "rho", "rho_better"),
    section=Section.length,
    headline=Headline("rho_better", "absmax", "largest |ρ| of score vs length"),
    card=CardField(
        "Length bias (Spearman ρ of score vs length in words)",
        ("mode", "dimension", "n", "rho", "rho_lo", "rho_hi", "rho_better"),
        "results carry no candidate_text",
        order=40,
    ),
    leaderboard=lambda t: mean_by_judge(LENGTH_BIAS.of(t), "rho_better", "length_rho"),
    meanings={
        "rho_better": "Spearman ρ of score vs length, signed so > 0 means longer is judged better",
        "length_rho": "mean rho_better",
        "mean_length": "mean length in words",
    },
)
SELF_PREFERENCE: TableSpec = TableSpec(
    "self_preference",
    lambda s, _: self_preference(s.study, s.families, s.reference),
    ("judge", "mode", "dimension", "family", "diff", "p", "favours_own"),
    section=Section.self_preference,
    headline=Headline("diff", "absmax", "largest own-family difference"),
    card=CardField(
        "Self-preference (own model family vs others; p Welch, p_q its BH q-value)",
        ("mode", "dimension", "family", "diff", "diff_lo", "diff_hi", "p", "p_q", "favours_own"),
        "no generator of the judge's own model family",
        order=50,
    ),
    leaderboard=lambda t: mean_by_judge(SELF_PREFERENCE.of(t), "favours_own", "self_preference"),
    p_column="p",
    p_family="bias",
    meanings={
        "family": "the judge's model family",
        "n_own": "own-family candidates",
        "n_other": "other candidates",
        "mean_own": "mean score of own-family generations",
        "mean_other": "mean score of other generations",
        "diff": "own − other",
        "p": "Welch t-test p",
        "favours_own": "own − other signed so > 0 means the judge favours its own family",
        "self_preference": "mean favours_own",
        "p_q": "Benjamini–Hochberg q-value of p (within its test family, fixed by the design)",
    },
)
