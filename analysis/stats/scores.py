"""Candidate scores, best-of-K and per-judge score summaries (docs/statistics.md).

A judge's score for a candidate is the mean over its samples; unscored samples (NaN score or parse_ok False)
are dropped, and a candidate with no scored sample is left out. Best-of-K keeps, per generator and instance,
the best candidate on each dimension: the max, or the min where lower is better. Which way is better is read
from the results table's `higher_is_better` column (written from the rubric spec), never assumed from a name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.stats.spec import Inputs
from core.intervals import t_interval
from core.spellings import FALSE_TEXT, ORIGINAL, TRUE_TEXT

#: The results-table column that says, per row, whether a higher score is better on its dimension.
DIRECTION = "higher_is_better"
CANDIDATE_KEYS: tuple[str, ...] = (
    "judge",
    "mode",
    "instance_id",
    "candidate_id",
    "source",
    "dimension",
    DIRECTION,
)
BEST_KEYS: tuple[str, ...] = ("judge", "mode", "instance_id", "source", "dimension", DIRECTION)
SUMMARY_KEYS: tuple[str, ...] = ("judge", "mode", "source", "dimension")
#: The generator whose comparative prompt a reference score came from; "" where the prompt did not show
#: exactly one generator (independent mode, or every generator in one prompt). The paper compares a
#: generator's best-of-K with the reference scored in the same context.
CONTEXT = "context"
CONTEXT_KEYS: tuple[str, ...] = (*CANDIDATE_KEYS, CONTEXT)
BEST_CONTEXT_KEYS: tuple[str, ...] = (*BEST_KEYS, CONTEXT)


def dimension_directions(frame: pd.DataFrame, what: str = "results") -> dict[str, bool]:
    """dimension -> higher_is_better, from the table's column; one clear error when the column is absent,
    a row lacks it, or one dimension is said to go both ways."""
    if DIRECTION not in frame:
        raise ValueError(
            f"{what} lack the {DIRECTION!r} column (each dimension's direction, from the rubric "
            "spec); re-run the study or add the column"
        )
    pairs = frame[["dimension", DIRECTION]].drop_duplicates()
    pairs = pairs.loc[pairs["dimension"].notna().to_numpy()]
    if pairs[DIRECTION].isna().any():
        dims = sorted(map(str, pairs.loc[pairs[DIRECTION].isna().to_numpy(), "dimension"]))
        raise ValueError(f"{what}: {DIRECTION!r} is empty for dimension(s) {dims}")
    seen: dict[str, set[bool]] = {}
    for dim, hib in zip(pairs["dimension"].astype(str), as_bool(pairs[DIRECTION]), strict=True):
        seen.setdefault(dim, set()).add(bool(hib))
    both = sorted(d for d, v in seen.items() if len(v) > 1)
    if both:
        raise ValueError(
            f"{what}: dimension(s) {both} are higher-is-better in some rows and lower-is-better in others"
        )
    return {d: v.pop() for d, v in seen.items()}


def with_directions(frame: pd.DataFrame, directions: Mapping[str, bool], what: str) -> pd.DataFrame:
    """`frame` with the `higher_is_better` column set from `directions` (e.g. human labels, which carry no
    direction, take the judges'); a dimension without a known direction is one clear error."""
    unknown = sorted(set(map(str, frame["dimension"].dropna().unique())) - set(directions))
    if unknown:
        raise ValueError(f"{what}: no direction (higher_is_better) known for dimension(s) {unknown}")
    hib = map_distinct(frame["dimension"], lambda d: directions[str(d)])
    return frame.assign(**{DIRECTION: hib.astype(bool)})


def half_up(values: Any) -> np.ndarray:
    """Scores on the rubric's integer scale, rounded half up (2.5 -> 3, not Python's banker's 2): the one
    rounding every ordinal statistic (κ_w, latent labels) applies to a mean score."""
    return np.floor(np.asarray(values, dtype=float) + 0.5)


def direction(frame: pd.DataFrame) -> np.ndarray:
    """+1 where higher is better, -1 where lower is better, per row of `frame` (its `higher_is_better`).

    Multiplying a score by its direction turns every dimension into higher-is-better.
    """
    if DIRECTION not in frame:
        raise ValueError(f"the table lacks the {DIRECTION!r} column (each dimension's direction)")
    return np.where(as_bool(frame[DIRECTION]), 1.0, -1.0)


# how a CSV may spell true and false (any case, spaces around): here, analysis.load.checks.check_flags, the viewer


def _parse_bool(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in TRUE_TEXT:
        return True
    if text in FALSE_TEXT:
        return False
    raise ValueError(f"{DIRECTION!r} must be true or false, not {value!r}")


def as_bool(values: pd.Series) -> np.ndarray:
    """A true/false column as a bool array, whether it arrived as bools, 0/1 or the text of a CSV cell
    ("False" must not read as true); a missing or other value is one clear error."""
    if values.isna().any():
        raise ValueError(
            f"{DIRECTION!r} is empty in some rows: every scored row needs its dimension's direction"
        )
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.to_numpy(dtype=bool)
    return map_distinct(values, _parse_bool).astype(bool)


def map_distinct(
    series: pd.Series, fn: Callable[[Any], Any], missing: Any = np.nan, dtype: Any = object
) -> np.ndarray:
    """`fn` applied once per distinct value of `series` (fast on categoricals), as an array of `dtype`;
    `missing` where the value is missing."""
    codes, uniques = pd.factorize(series)
    mapped = np.array([fn(u) for u in uniques] + [missing], dtype=dtype)
    return mapped[codes]  # code -1 (missing) picks the trailing `missing`


def as_text(values: pd.Series) -> pd.Series:
    """`values.astype(str)`, the same values and dtype: a categorical of string categories converts each
    category once and takes them by code (pandas converts every row: ~7x slower on a 10M-row key column)."""
    dtype = values.dtype
    if not isinstance(dtype, pd.CategoricalDtype) or not pd.api.types.is_string_dtype(dtype.categories):
        return values.astype(str)
    text = dtype.categories.astype(str).array
    codes = values.cat.codes.to_numpy()
    return pd.Series(text.take(codes, allow_fill=True), index=values.index, name=values.name)


def text_columns(frame: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """`frame.astype({c: str for c in columns})` through `as_text` (a copy; the other columns as they are)."""
    return frame.assign(**{c: as_text(frame[c]) for c in columns})


def text_isin(series: pd.Series, values: Iterable[str]) -> np.ndarray:
    """`series.astype(str).isin(values)` as a bool array, each distinct value converted once (a categorical
    key is never turned into a column of strings); a missing value is in no set."""
    wanted = set(values)
    return distinct_mask(series, lambda v: str(v) in wanted)


def distinct_mask(series: pd.Series, test: Callable[[Any], bool]) -> np.ndarray:
    """`test` of every row's value as a bool array, called once per distinct value (fast on categoricals);
    False where the value is missing."""
    return map_distinct(series, lambda v: bool(test(v)), missing=False, dtype=bool)


def usable_mask(results: pd.DataFrame) -> np.ndarray:
    """Rows whose answer parsed (parse_ok not False; a table without parse_ok is all usable)."""
    if "parse_ok" not in results:
        return np.ones(len(results), dtype=bool)
    return results["parse_ok"].fillna(True).astype(bool).to_numpy()


def scored_rows(results: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows that carry a usable score (score not NaN, parse_ok not False), optionally only `columns`."""
    ok = results["score"].notna().to_numpy() & usable_mask(results)
    return results.loc[ok, list(columns) if columns is not None else slice(None)]


def group_ids(frame: pd.DataFrame, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Group number of every row (groups numbered in the order of their key codes) and each group's first row.

    Works on category codes, so it is several times faster than a pandas groupby on many categorical keys;
    a missing key value is a group of its own.
    """
    codes, sizes = [], []
    for key in keys:
        col = frame[key]
        if isinstance(col.dtype, pd.CategoricalDtype):
            c, n = col.cat.codes.to_numpy().astype(np.int64), len(col.cat.categories)
        else:
            c, uniques = pd.factorize(col)
            n = len(uniques)
        codes.append(np.where(c < 0, n, c))
        sizes.append(n + 1)
    combined, size = np.zeros(len(frame), dtype=np.int64), 1
    for c, n in zip(codes, sizes, strict=True):
        if size * n >= 2**62:  # re-number (keeping the order) before the packed key overflows
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)
            size = int(combined.max()) + 1
        combined, size = combined * n + c, size * n
    if size <= 8 * len(combined) + 1_000_000:  # dense re-numbering: cheaper than hashing
        seen = np.zeros(size, dtype=bool)
        seen[combined] = True
        ids = (np.cumsum(seen) - 1)[combined]
    else:
        ids = np.unique(combined, return_inverse=True)[1]
    first = np.empty(ids.max() + 1 if len(ids) else 0, dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids))[::-1]  # reversed, so the first occurrence is written last
    return ids, first


def split_groups(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[tuple, np.ndarray]]:
    """(key values, row positions) of every group of `frame` by `keys`, in `group_ids` order."""
    ids, first = group_ids(frame, keys)
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(len(first) + 1))
    key_values = frame[list(keys)].iloc[first].itertuples(index=False, name=None)
    return [(key, order[bounds[g] : bounds[g + 1]]) for g, key in enumerate(key_values)]


def reference_context(results: pd.DataFrame, reference: str = "reference") -> np.ndarray:
    """`CONTEXT` of every row: for a reference row of a prompt (judge × mode × prompt_id) whose other rows
    all come from one generator, that generator; "" otherwise (and everywhere without `prompt_id`)."""
    if CONTEXT in results:
        return (
            results[CONTEXT].astype(object).where(results[CONTEXT].notna(), "").astype(str).to_numpy(object)
        )
    out = np.full(len(results), "", dtype=object)
    if "prompt_id" not in results or results.empty:
        return out
    ids, first = group_ids(results, ["judge", "mode", "prompt_id"])
    is_ref = (results["source"] == reference).to_numpy()
    codes, names = pd.factorize(results["source"])
    gen = ~is_ref & (codes >= 0)
    lo, hi = np.full(len(first), np.iinfo(np.int64).max), np.full(len(first), -1)
    np.minimum.at(lo, ids[gen], codes[gen])
    np.maximum.at(hi, ids[gen], codes[gen])
    single = np.asarray(names, dtype=object)[np.clip(hi, 0, None)] if len(names) else np.full(len(first), "")
    per_prompt = np.where((hi >= 0) & (lo == hi), single, "")
    out[is_ref] = per_prompt[ids[is_ref]]
    return out


def candidate_scores(
    results: pd.DataFrame, keys: Sequence[str] = CANDIDATE_KEYS, reference: str = "reference"
) -> pd.DataFrame:
    """One row per judged candidate: `score` (mean of scored samples), `sd`, `n_scored`. With `CONTEXT` among
    the keys, a reference scored in several generators' comparative prompts has one row per prompt context.

    Pairwise rows have no score and so never appear here.
    """
    if DIRECTION in keys and DIRECTION not in results:
        dimension_directions(results)  # raises the one-line error
    if CONTEXT in keys:
        ok = results["score"].notna().to_numpy() & usable_mask(results)
        context = reference_context(results, reference)[ok]
        rows = results.loc[ok, [k for k in keys if k != CONTEXT] + ["score"]].assign(**{CONTEXT: context})
    else:
        rows = scored_rows(results, [*keys, "score"])
    ids, first = group_ids(rows, keys)
    score = rows["score"].to_numpy(dtype=float)
    n = np.bincount(ids, minlength=len(first))
    mean = np.bincount(ids, weights=score, minlength=len(first)) / n
    squares = np.bincount(ids, weights=(score - mean[ids]) ** 2, minlength=len(first))
    with np.errstate(all="ignore"):
        sd = np.where(n > 1, np.sqrt(squares / (n - 1)), np.nan)
    out = rows.iloc[first][list(keys)].reset_index(drop=True)
    return out.assign(score=mean, sd=sd, n_scored=n)


def best_of_k(cands: pd.DataFrame, keys: Sequence[str] = BEST_KEYS) -> pd.DataFrame:
    """Best candidate score per `keys` (generator × instance × dimension × judge × mode): `best`, `k`.

    `k` is how many scored candidates the best was taken over (1 for the reference).
    """
    signed = cands["score"].to_numpy() * direction(cands)
    frame = cands[list(keys)].assign(_signed=signed)
    grouped = frame.groupby(list(keys), observed=True, sort=False)["_signed"]
    out = grouped.agg(best="max", k="size").reset_index()
    out["best"] = out["best"] * direction(out)
    return out


def combined_name(judges: Iterable[str], combine: str) -> str:
    """The name of a judge combination, e.g. ``mean(a+b)``."""
    return f"{combine}({'+'.join(sorted(map(str, judges)))})"


def combination_names(frame: pd.DataFrame, combine: str) -> dict[str, str]:
    """dimension -> the name of the combination of the judges that rated it: judges split by rubric
    (``a/novelty``) combine per rubric, ``mean(a/novelty+b/novelty)``, never across rubrics."""
    judges = frame.groupby("dimension", observed=True, sort=False)["judge"].unique()
    return {str(dim): combined_name(js, combine) for dim, js in judges.items()}


def join_reference(gen: pd.DataFrame, ref: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Every generated row of `gen` with the reference row of `ref` on the same `keys`: the reference scored
    in that generator's own prompt (`CONTEXT` == its source) where there is one, else the reference scored
    outside any one generator's prompt; a row with neither is dropped."""
    keys = list(keys)
    context = as_text(ref[CONTEXT]).to_numpy() if CONTEXT in ref else np.full(len(ref), "")
    g = gen.drop(columns=CONTEXT, errors="ignore").reset_index(drop=True)
    r = ref.drop(columns=CONTEXT, errors="ignore").reset_index(drop=True)
    if all(g[k].dtype == r[k].dtype for k in keys) and not set(g.columns) & (set(r.columns) - set(keys)):
        rows, refs = _reference_rows(g, r, context, keys)
        extra = [c for c in r.columns if c not in keys]
        return pd.concat(
            [g.iloc[rows].reset_index(drop=True), r[extra].iloc[refs].reset_index(drop=True)], axis=1
        )
    own = r.loc[context != ""].assign(_src=context[context != ""])
    shared = r.loc[context == ""]
    g = g.assign(_row=np.arange(len(g)), _src=as_text(g["source"]).to_numpy())
    both = pd.concat(
        [g.merge(own, on=[*keys, "_src"], how="inner"), g.merge(shared, on=keys, how="inner")],
        ignore_index=True,
    )
    both = both.drop_duplicates("_row").sort_values("_row", kind="stable")  # own context first
    return both.drop(columns=["_row", "_src"]).reset_index(drop=True)


def _reference_rows(
    g: pd.DataFrame, r: pd.DataFrame, context: np.ndarray, keys: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """`join_reference`'s (row of `g`, row of `r`) pairs, in `g`'s order, from merges of the keys and integer
    source codes only (the sources as text and the other columns never go through a merge)."""
    is_own = context != ""
    ctx_codes, ctx_names = pd.factorize(context)  # a missing context (-1) matches only a missing source
    src_codes, src_names = pd.factorize(g["source"])
    found = pd.Index(ctx_names).get_indexer([str(s) for s in src_names])
    src = np.append(np.where(found < 0, -2, found), -1)[src_codes]  # -2: no reference in that prompt
    left = g[keys].assign(_row=np.arange(len(g)))
    own = r.loc[is_own, keys].assign(_src=ctx_codes[is_own], _ref=np.flatnonzero(is_own))
    shared = r.loc[~is_own, keys].assign(_ref=np.flatnonzero(~is_own))
    pairs = pd.concat(
        [
            left.assign(_src=src).merge(own, on=[*keys, "_src"], how="inner")[["_row", "_ref"]],
            left.merge(shared, on=keys, how="inner")[["_row", "_ref"]],
        ],
        ignore_index=True,
    )
    pairs = pairs.drop_duplicates("_row").sort_values("_row", kind="stable")  # own context first
    return pairs["_row"].to_numpy(), pairs["_ref"].to_numpy()


def judges_needed(cands: pd.DataFrame) -> pd.Series:
    """Per mode × dimension: how many judges scored any candidate, i.e. every judge of the combination there
    (a combined value rests on all of them or is left out, as `unanimous` / `majority` votes are)."""
    return cands.groupby(["mode", "dimension"], observed=True)["judge"].nunique().rename("_need")


def _on_every_judge(frame: pd.DataFrame, cands: pd.DataFrame) -> pd.DataFrame:
    """The rows of `frame` (with mode, dimension, `n_judges`) whose value rests on every judge its mode and
    dimension had (`judges_needed`)."""
    need = (
        frame[["mode", "dimension"]]
        .merge(judges_needed(cands).reset_index(), on=["mode", "dimension"], how="left")["_need"]
        .to_numpy()
    )
    return frame.loc[frame["n_judges"].to_numpy() == need].reset_index(drop=True)


def combined_pairs(
    cands: pd.DataFrame, reference: str = "reference", every_judge: bool = True
) -> pd.DataFrame:
    """The judges' `mean` combination, per mode × instance × generated candidate × dimension: `score` and
    `ref_score`, each averaged over the judges that scored both that candidate and the instance's reference
    (`n_judges` of them). Only candidates every judge of the combination scored on both sides are kept, so
    best-of-K picks among means over one and the same judge set (issue 24 item 3: a candidate one judge
    failed on used to stand on the other judge alone and could win best-of-K on that); `every_judge=False`
    keeps the others too (to count what is left out)."""
    is_ref = (cands["source"] == reference).to_numpy()
    keys = ["judge", "mode", "instance_id", "dimension"]
    ref = cands.loc[is_ref, [*keys, *([CONTEXT] if CONTEXT in cands else []), "score"]]
    both = join_reference(cands.loc[~is_ref], ref.rename(columns={"score": "ref_score"}), keys)
    item = ["mode", "instance_id", "candidate_id", "source", "dimension", DIRECTION]
    out = both.groupby(item, observed=True, sort=False).agg(
        score=("score", "mean"), ref_score=("ref_score", "mean"), n_judges=("judge", "nunique")
    )
    out = _on_every_judge(out.reset_index(), cands) if every_judge else out.reset_index()
    out.insert(0, "judge", out["dimension"].astype(str).map(combination_names(cands, "mean")).astype(object))
    return out


def best_of_k_scores(
    cands: pd.DataFrame, reference: str = "reference", combined: bool = True
) -> pd.DataFrame:
    """The paper's best-five table: per judge × mode × source × dimension, `n` instances, `n_judges_min` (the
    fewest judges behind any of them: 1 for a judge) and the `mean` ± `sd` over instances of the best-of-K
    candidate score (the reference's own score for the reference, averaged over the generators' prompts it
    was scored in). With several judges and `combined`, it adds their `mean` combination
    (`combined_best_of_k`)."""
    best = best_of_k(cands, [*BEST_KEYS, *([CONTEXT] if CONTEXT in cands else [])])
    frames = [best.groupby(list(BEST_KEYS), observed=True, sort=False)["best"].mean().reset_index()]
    if combined and cands["judge"].nunique() > 1:
        frames.append(combined_best_of_k(cands, reference))
    return _mean_sd_over_instances(frames)


def combined_best_of_k(cands: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """Best-of-K per instance under the judges' `mean`, over the candidates every judge of the combination
    scored (`combined_pairs`); the reference over the judges that scored it, kept where that is every judge.
    `n_judges` is how many judges the best-of-K rests on."""
    pairs = combined_pairs(cands, reference)
    is_ref = (cands["source"] == reference).to_numpy()
    keys = ["mode", "instance_id", "candidate_id", "source", "dimension", DIRECTION]
    ref = (
        cands.loc[is_ref]
        .groupby(keys, observed=True, sort=False)
        .agg(score=("score", "mean"), n_judges=("judge", "nunique"))
    )
    ref = _on_every_judge(ref.reset_index(), cands)
    ref.insert(0, "judge", ref["dimension"].astype(str).map(combination_names(cands, "mean")).astype(object))
    both = pd.concat([pairs.drop(columns=["ref_score"]), ref], ignore_index=True)
    both = text_columns(both, ["source", "dimension"])
    best = best_of_k(both)
    judges = both.groupby(list(BEST_KEYS), observed=True, sort=False)["n_judges"].min().reset_index()
    return best.merge(judges, on=list(BEST_KEYS), how="left")


def combined_best_of_k_scores(cands: pd.DataFrame, reference: str = "reference") -> pd.DataFrame:
    """`best_of_k_scores` of the judges' `mean` combination only."""
    return _mean_sd_over_instances([combined_best_of_k(cands, reference)])


def _mean_sd_over_instances(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """n, n_judges_min (a frame without `n_judges` is one judge's) and mean ± sd of `best` over instances."""
    best = pd.concat(
        [
            text_columns(f, SUMMARY_KEYS).assign(n_judges=f["n_judges"] if "n_judges" in f else 1)
            for f in frames
        ],
        ignore_index=True,
    )
    out = best.groupby(list(SUMMARY_KEYS), sort=True).agg(
        n=("best", "size"), n_judges_min=("n_judges", "min"), mean=("best", "mean"), sd=("best", "std")
    )
    return out.reset_index()


def score_summary(cands: pd.DataFrame, by: Sequence[str] = SUMMARY_KEYS, level: float = 0.95) -> pd.DataFrame:
    """Mean ± sd of candidate scores per judge × mode × source × dimension, with a t-interval for the mean."""
    grouped = cands.groupby(list(by), observed=True, sort=True)["score"]
    out = grouped.agg(n="size", mean="mean", sd="std").reset_index()
    out["ci_lo"], out["ci_hi"] = t_interval(out["mean"], out["sd"], out["n"], level)
    return out


def perturbation_names(values: pd.Series) -> np.ndarray:
    """Each row's perturbation as one spelling for every reader: spaces trimmed, and `none`, empty or missing
    (a run without the column) all `none` (" none " was unperturbed to the report but no baseline here)."""
    names = map_distinct(values, lambda p: str(p).strip() or ORIGINAL)
    return np.where(pd.isna(names), ORIGINAL, names).astype(str)


def lower_is_better(s: Inputs) -> list[str]:
    """The study's lower-is-better dimensions (a figure says what a win means there); none where the results
    do not say (`dimension_directions` refuses them elsewhere, in one line)."""
    try:
        directions = dimension_directions(s.results)
    except ValueError:
        return []
    return sorted(d for d, higher in directions.items() if not higher)
