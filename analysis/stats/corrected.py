"""Corrected estimates: a judge's win rate or mean score, corrected by the items experts rated, valid only for
the way those items were chosen (docs/statistics.md, "Corrected estimates").

A judge scores every candidate; experts rate a few. The judge-only estimate is precise and biased, the
human-only estimate unbiased and wide. A corrected estimate uses the judge on every unit and the experts on
the rated ones to measure the judge's bias. Which form is valid depends on the labels' design (the labels
file's `design` / `inclusion_prob` columns, written by `analysis.annotate`, or `--humans-design`):

- `random` (a simple random sample of the units): prediction-powered inference (PPI++, Angelopoulos, Duchi &
  Zrnic 2023, via `ppi-python`), power-tuned so that it is no wider than the human-only CI;
- `stratified` / `weighted` (known, unequal inclusion probabilities π): the inverse-probability-weighted form
  of active statistical inference (Zrnic & Candès 2024): θ = mean over all N units of
  λ·ŷ + (ξ/π)(y − λ·ŷ), ξ = 1 on a labelled unit; its CI from the terms' sd / √N, λ power-tuned in [0, 1]
  (ppi-python has no such function: `active_estimate`, tested against a hand computation);
- labels chosen by a rule without probabilities (top-k by entropy, disagreement, flip; an expert set
  collected elsewhere and not declared): no corrected estimate, and the design table says why.

The unit is one instance × generator × dimension, the win table's (`analysis.stats.winrate`):
- `win_rate`: the generator's best-of-K against the same-prompt reference (`winrate.instance_outcomes`);
  the experts' label is a strict majority of annotators whose own best-of-K over the same candidates wins
  (a unit is labelled when an annotator rated all its candidates and the reference); a unit without a strict
  majority counts as no majority win and is counted in `n_no_majority`;
- `mean_score`: the mean score of the generator's K candidates (the experts' consensus,
  `analysis.stats.humans.consensus_scores`, on every candidate of the unit).

Rates and their CIs are clipped to [0, 1]. Every judge × mode × generator × dimension is a row; one with
nothing to correct (no labelled unit, fewer than 2) has no estimate and a `why_no_estimate` saying why.
`n_effective` is the number of expert labels a human-only estimate would need for the corrected CI's width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from analysis.stats.humans import (
    DESIGN,
    INCLUSION,
    consensus_scores,
    human_results,
    majority_outcomes,
    majority_vote,
    pair_outcomes,
)
from analysis.stats.scores import as_text, candidate_scores, dimension_directions, direction, text_columns
from analysis.stats.spec import CardField, Section, TableSpec
from analysis.stats.winrate import instance_outcomes

ALPHA = 0.05
#: One row of the corrected table: the win table's group (judge, mode, generator, dimension).
KEYS = ["judge", "mode", "source", "dimension"]
#: The groups of `labels_and_predictions` (per candidate, read by the calibration).
VERDICT_KEYS = ["judge", "mode", "dimension"]
ITEM = ["instance_id", "candidate_id"]
UNIT = ["instance_id", "source", "dimension"]
#: Designs whose inclusion probabilities are known: `random` (equal, PPI++) and unequal (active inference).
RANDOM = "random"
WEIGHTED_DESIGNS = ("stratified", "weighted")
DESIGNS = (RANDOM, *WEIGHTED_DESIGNS)
#: The prefix of a design chosen by a rule without probabilities (`rule:entropy`, ...): never corrected.
RULE = "rule:"
COLUMNS = [
    *KEYS,
    "quantity",
    "design",
    "n_labeled",
    "n_unlabeled",
    "n_no_majority",
    "judge_only",
    "judge_only_lo",
    "judge_only_hi",
    "human_only",
    "human_only_lo",
    "human_only_hi",
    "corrected",
    "corrected_lo",
    "corrected_hi",
    "n_effective",
    "why_no_estimate",
]
DESIGN_TABLE_COLUMNS = ["design", "n_labels", "n_units", "inclusion_min", "inclusion_max", "corrected"]
MEANINGS = {
    "design": "how the labelled items were chosen: random, stratified or weighted (known inclusion "
    "probabilities), rule:<name> (top-k, none), or undeclared",
    "n_no_majority": "labelled win-rate units without a strict expert majority (counted as no majority win)",
    "why_no_estimate": "why a group has no corrected estimate (nothing to correct)",
    "n_units": "instance × generator × dimension units the experts rated in full",
    "inclusion_min": "smallest inclusion probability of a labelled item",
    "inclusion_max": "largest inclusion probability of a labelled item",
}


def _classical_mean_ci(y: np.ndarray, alpha: float) -> tuple[float, float]:
    """ppi-python's `classical_mean_ci`, imported when an estimate is made: ppi-python loads numba, about a
    second of a report that has no design to correct (issue 35, item 4)."""
    from ppi_py import classical_mean_ci  # noqa: PLC0415

    lo, hi = classical_mean_ci(y, alpha=alpha)
    return float(np.ravel(lo)[0]), float(np.ravel(hi)[0])


@dataclass(frozen=True)
class Estimates:
    """Judge-only, human-only and corrected estimates of one mean, each with its CI."""

    judge_only: tuple[float, float, float]
    human_only: tuple[float, float, float]
    corrected: tuple[float, float, float]
    n_effective: float


def estimate(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, alpha: float = ALPHA) -> Estimates:
    """The three estimates of E[y] under a random design: `y` and `yhat` on the labelled items (a random
    sample), `yhat_unlabeled` on the rest (PPI++; with no unlabelled item, the labelled mean itself)."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate  # noqa: PLC0415 (numba: only for an estimate)

    y, yhat, rest = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabeled))
    every = np.concatenate([yhat, rest])
    j_lo, j_hi = _classical_mean_ci(every, alpha=alpha)
    h_lo, h_hi = _classical_mean_ci(y, alpha=alpha)
    if len(rest):
        c_lo, c_hi = ppi_mean_ci(y, yhat, rest, alpha=alpha)
        point = ppi_mean_pointestimate(y, yhat, rest)
        corrected = (float(np.ravel(point)[0]), float(np.ravel(c_lo)[0]), float(np.ravel(c_hi)[0]))
    else:  # every unit labelled: the experts' own mean is the estimate
        corrected = (float(y.mean()), float(h_lo), float(h_hi))
    return Estimates(
        (float(every.mean()), float(j_lo), float(j_hi)),
        (float(y.mean()), float(h_lo), float(h_hi)),
        corrected,
        _n_effective(len(y), (float(h_lo), float(h_hi)), corrected),
    )


def _n_effective(n: int, human: tuple[float, float], corrected: tuple[float, float, float]) -> float:
    width_h, width_c = human[1] - human[0], corrected[2] - corrected[1]
    return n * (width_h / width_c) ** 2 if width_c > 0 else float("nan")


def active_estimate(
    y: np.ndarray,
    yhat: np.ndarray,
    labelled: np.ndarray,
    pi: np.ndarray,
    alpha: float = ALPHA,
    lam: float | None = None,
) -> tuple[float, float, float]:
    """Active inference (Zrnic & Candès 2024) of E[y] over N units: each unit's term λ·ŷ + (ξ/π)(y − λ·ŷ)
    (ξ = 1 where labelled, π its inclusion probability, y read only where labelled), their mean and a normal
    CI from their sd / √N. λ = None: power-tuned, the λ in [0, 1] minimising the terms' variance (λ = 0 is
    the Horvitz–Thompson human-only estimate). The units' labels must be drawn independently with
    probability π > 0 (Poisson or stratified sampling). One estimate; `active_estimates` for many at once."""
    point, lo, hi = active_estimates(y, yhat, labelled, pi, alpha, lam)
    return float(point), float(lo), float(hi)


def active_estimates(
    y: np.ndarray,
    yhat: np.ndarray,
    labelled: np.ndarray,
    pi: np.ndarray,
    alpha: float = ALPHA,
    lam: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`active_estimate` along the last axis: (point, lo, hi), one per leading index (a replicate)."""
    yhat, xi = np.asarray(yhat, dtype=float), np.asarray(labelled, dtype=bool)
    weight = np.where(xi, 1.0 / np.where(xi, np.asarray(pi, dtype=float), 1.0), 0.0)
    a = np.where(xi, np.nan_to_num(np.asarray(y, dtype=float)) * weight, 0.0)
    b = yhat * (1.0 - weight)
    n = a.shape[-1]
    if lam is None:
        centred_b = b - b.mean(axis=-1, keepdims=True)
        var_b = (centred_b**2).sum(axis=-1)
        cov = ((a - a.mean(axis=-1, keepdims=True)) * centred_b).sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            tuned = np.where(var_b > 0, np.clip(-cov / var_b, 0.0, 1.0), 0.0)
        factor = np.asarray(tuned)[..., None]
    else:
        factor = np.asarray(lam, dtype=float)
    terms = a + factor * b
    point = terms.mean(axis=-1)
    sd = terms.std(axis=-1, ddof=1) if n > 1 else np.zeros_like(point)
    half = norm.ppf(1 - alpha / 2) * sd / math.sqrt(n)
    return point, point - half, point + half


@dataclass(frozen=True)
class Design:
    """The labels' design: its name, and `why` no corrected estimate is valid under it (None: one is)."""

    name: str
    why: str | None = None


def _recorded(humans: pd.DataFrame) -> pd.Series:
    """Each label's recorded design ("" where the file records none)."""
    if DESIGN not in humans:
        return pd.Series("", index=humans.index)
    return humans[DESIGN].fillna("").astype(str).str.strip()


def labels_design(humans: pd.DataFrame) -> Design:
    """The design recorded in the labels (`design`, `inclusion_prob`): one known design, or why not."""
    recorded = _recorded(humans)
    names = sorted(set(recorded))
    if names == [""]:
        return Design(
            "undeclared",
            "the labels file records no design (how its items were chosen): declare a random sample with "
            "--humans-design random, or label items from `annotate export --by random|stratified`",
        )
    if len(names) > 1:
        shown = ", ".join(n or "undeclared" for n in names)
        return Design(
            "mixed", f"labels of several designs ({shown}) in one file: no one design to correct under"
        )
    name = names[0]
    if name.startswith(RULE):
        return Design(
            name,
            f"items chosen by a rule without inclusion probabilities ({name[len(RULE) :]} top-k): a corrected "
            "estimate would be biased; label a random or stratified export instead",
        )
    if name not in DESIGNS:
        return Design(name, f"unknown design {name!r} (known: {', '.join(DESIGNS)})")
    if name in WEIGHTED_DESIGNS:
        pi = pd.to_numeric(humans.get(INCLUSION), errors="coerce")
        if pi is None or not ((pi > 0) & (pi <= 1)).all():
            return Design(name, f"design {name} needs every label's inclusion_prob in (0, 1]")
    return Design(name)


def declare_design(humans: pd.DataFrame, declared: str | None, source: object) -> pd.DataFrame:
    """The labels with `declared` (`--humans-design`) as the design of labels that record none; a ValueError
    (one line naming `source`) when the file records another design: a declaration never overrides it."""
    if declared is None:
        return humans
    recorded = _recorded(humans)
    other = sorted(set(recorded) - {"", declared})
    if other:
        raise ValueError(
            f"--humans-design {declared}: {source} records its own design ({', '.join(other)}); drop the option"
        )
    return humans.assign(**{DESIGN: declared})


def unit_predictions(
    cands: pd.DataFrame, humans: pd.DataFrame, reference: str = "reference"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(win units, score units): per judge × mode × instance × generator × dimension, the judge's `yhat`
    (a best-of-K win; the mean candidate score) beside the experts' `y` where they rated the whole unit (NaN
    elsewhere), and for the wins `no_majority` (a labelled unit without a strict majority)."""
    judged = text_columns(instance_outcomes(cands, reference), ["judge", "mode", *UNIT])
    wins = judged[["judge", "mode", *UNIT]].assign(yhat=(judged["outcome"] == 1).to_numpy(dtype=float))
    rated = human_results(humans, dimension_directions(cands))
    expected = text_columns(cands.loc[as_text(cands["source"]) != reference], [*UNIT, "candidate_id"])
    k = expected.groupby(UNIT)["candidate_id"].nunique().rename("_k").reset_index()
    per_annotator = instance_outcomes(rated, reference).astype({c: str for c in UNIT})
    per_annotator = per_annotator.merge(k, on=UNIT, how="inner")
    complete = per_annotator.loc[per_annotator["k"].to_numpy() >= per_annotator["_k"].to_numpy()]
    votes = majority_vote(complete, UNIT) if len(complete) else pd.DataFrame(columns=[*UNIT, "outcome"])
    votes = votes.assign(
        y=(votes["outcome"].fillna(0).astype(int) == 1).astype(float),
        no_majority=votes["outcome"].isna().to_numpy(),
    )[[*UNIT, "y", "no_majority"]]
    wins = wins.merge(votes.astype({c: str for c in UNIT}), on=UNIT, how="left")
    scored = (
        expected.groupby(["judge", "mode", *UNIT, "candidate_id"], observed=True)["score"]
        .mean()
        .reset_index()
    )
    consensus = consensus_scores(humans).rename(columns={"human": "y"})[
        ["instance_id", "candidate_id", "dimension", "y"]
    ]
    scored = scored.merge(consensus, on=["instance_id", "candidate_id", "dimension"], how="left")
    scores = (
        scored.groupby(["judge", "mode", *UNIT], observed=True)
        .agg(yhat=("score", "mean"), y=("y", "mean"), _missing=("y", lambda v: int(v.isna().sum())))
        .reset_index()
    )
    scores.loc[scores["_missing"].to_numpy() > 0, "y"] = np.nan
    return wins, scores.drop(columns="_missing")


def unit_inclusion(humans: pd.DataFrame) -> pd.DataFrame:
    """Per instance × dimension (the unit `annotate export` samples): its inclusion probability."""
    pi = pd.to_numeric(humans[INCLUSION], errors="coerce") if INCLUSION in humans else np.nan
    frame = humans[["instance_id", "dimension"]].astype(str).assign(pi=pi)
    return frame.groupby(["instance_id", "dimension"])["pi"].min().reset_index()


def _labels(humans: pd.DataFrame, cands: pd.DataFrame, reference: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the experts' win label per rated pair: their strict majority; their consensus score per candidate)."""
    rated = candidate_scores(human_results(humans, dimension_directions(cands)))
    wins = majority_outcomes(pair_outcomes(rated, reference))
    wins = wins.assign(y=(wins["outcome"] == 1).astype(float))[[*ITEM, "dimension", "y"]]
    consensus = consensus_scores(humans).rename(columns={"human": "y"})[[*ITEM, "dimension", "y"]]
    return wins.astype({c: str for c in [*ITEM, "dimension"]}), consensus.astype({c: str for c in ITEM})


def labels_and_predictions(
    cands: pd.DataFrame, humans: pd.DataFrame, reference: str = "reference"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The judge's predictions on every generated candidate beside the experts' labels where they have one
    (`y`, NaN elsewhere), per judge × mode × dimension × item: (scores: `yhat` the candidate score; verdicts:
    `yhat` 1 for a win over the reference, `diff` the score difference, signed so > 0 favours the candidate).
    Shared by the corrected estimates and the calibration (analysis.stats.calibration)."""
    wins, consensus = _labels(humans, cands, reference)
    judged = text_columns(pair_outcomes(cands, reference), [*VERDICT_KEYS, *ITEM])
    signed = (judged["score"] - judged["ref_score"]).to_numpy() * direction(judged)
    judged = judged.assign(yhat=(judged["outcome"] == 1).astype(float), diff=signed)
    # a candidate scored in several prompts (comparative_all) is one item: the mean over them
    verdicts = judged.groupby([*VERDICT_KEYS, *ITEM], as_index=False)[["yhat", "diff"]].mean()
    scored = text_columns(candidate_scores(cands), [*VERDICT_KEYS, *ITEM, "source"])
    scored = scored.loc[(scored["source"] != reference).to_numpy(), [*VERDICT_KEYS, *ITEM, "score"]]
    scored = scored.rename(columns={"score": "yhat"})
    return (
        scored.merge(consensus, on=[*ITEM, "dimension"], how="left"),
        verdicts.merge(wins, on=[*ITEM, "dimension"], how="left"),
    )


def corrected_estimates(
    cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference", alpha: float = ALPHA
) -> pd.DataFrame:
    """Per judge × mode × generator × dimension and quantity (`win_rate`, `mean_score`): the judge-only,
    human-only and corrected estimates with CIs under the labels' design (`labels_design`), the labelled
    and unlabelled unit counts and the labels' effective sample size. Empty when the design allows no
    corrected estimate (`design_table` says why); a group with nothing to correct is a row with a `why_no_estimate`."""
    if humans is None or humans.empty:
        return pd.DataFrame(columns=COLUMNS)
    design = labels_design(humans)
    if design.why is not None:
        return pd.DataFrame(columns=COLUMNS)
    wins, scores = unit_predictions(cands, humans, reference)
    inclusion = unit_inclusion(humans)
    rows = []
    for quantity, units in (("win_rate", wins), ("mean_score", scores)):
        units = units.merge(inclusion, on=["instance_id", "dimension"], how="left")
        for key, part in units.groupby(KEYS, sort=True):
            row = dict(zip(KEYS, key, strict=True)) | {"quantity": quantity, "design": design.name}
            rows.append(row | _group(part, design.name, quantity == "win_rate", alpha))
    return pd.DataFrame(rows, columns=COLUMNS)


def _group(part: pd.DataFrame, design: str, rate: bool, alpha: float) -> dict[str, object]:
    """One group's counts and estimates (NaN with a `why_no_estimate` where there is nothing to correct)."""
    labelled = part["y"].notna().to_numpy()
    n_lab = int(labelled.sum())
    no_majority = int(part.loc[labelled, "no_majority"].astype(bool).sum()) if "no_majority" in part else 0
    out: dict[str, object] = {
        "n_labeled": n_lab,
        "n_unlabeled": int((~labelled).sum()),
        "n_no_majority": no_majority,
        "why_no_estimate": "",
    }
    blank = dict.fromkeys(
        [c for c in COLUMNS if c.startswith(("judge_only", "human_only", "corrected"))], np.nan
    )
    if n_lab < 2:
        why = "no unit of this group was rated in full by the experts" if n_lab == 0 else "1 labelled unit"
        return out | blank | {"n_effective": np.nan, "why_no_estimate": f"nothing to correct: {why} (need 2)"}
    y, yhat = part["y"].to_numpy(dtype=float), part["yhat"].to_numpy(dtype=float)
    if design == RANDOM:
        got = estimate(y[labelled], yhat[labelled], yhat[~labelled], alpha)
    else:
        pi = part["pi"].to_numpy(dtype=float)
        j_lo, j_hi = _classical_mean_ci(yhat, alpha=alpha)
        human = active_estimate(y, yhat, labelled, pi, alpha, lam=0.0)
        corrected = active_estimate(y, yhat, labelled, pi, alpha)
        got = Estimates(
            (float(yhat.mean()), float(j_lo), float(j_hi)),
            human,
            corrected,
            _n_effective(n_lab, (human[1], human[2]), corrected),
        )
    triples = {"judge_only": got.judge_only, "human_only": got.human_only, "corrected": got.corrected}
    for name, value in triples.items():
        out |= _triple(name, tuple(np.clip(value, 0.0, 1.0)) if rate else value)
    return out | {"n_effective": got.n_effective}


def design_table(
    cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference"
) -> pd.DataFrame:
    """One row for the labels file: its design, labels, fully rated units, the inclusion probabilities'
    range, and whether corrected estimates are computed (how) or why not (one line)."""
    if humans is None or humans.empty:
        return pd.DataFrame(columns=DESIGN_TABLE_COLUMNS)
    design = labels_design(humans)
    pi = pd.to_numeric(humans[INCLUSION], errors="coerce") if INCLUSION in humans else pd.Series(dtype=float)
    if design.why is not None:
        verdict, n_units = f"not computed: {design.why}", np.nan
    else:
        wins, _ = unit_predictions(cands, humans, reference)
        labelled = wins.loc[wins["y"].notna(), UNIT].drop_duplicates()
        n_units = len(labelled)
        how = (
            "PPI++ (ppi-python)"
            if design.name == RANDOM
            else "inverse-probability weighted (active inference)"
        )
        verdict = f"computed: {how}"
    row = {
        "design": design.name,
        "n_labels": len(humans),
        "n_units": n_units,
        "inclusion_min": float(pi.min()) if pi.notna().any() else np.nan,
        "inclusion_max": float(pi.max()) if pi.notna().any() else np.nan,
        "corrected": verdict,
    }
    return pd.DataFrame([row], columns=DESIGN_TABLE_COLUMNS)


def _triple(name: str, value: tuple[float, ...]) -> dict[str, float]:
    return {name: float(value[0]), f"{name}_lo": float(value[1]), f"{name}_hi": float(value[2])}


CORRECTED_DESIGN: TableSpec = TableSpec(
    "corrected_design",
    lambda s, _: design_table(s.cands, s.humans, s.reference) if s.has_humans else None,
    tuple(DESIGN_TABLE_COLUMNS),
    section=Section.corrected,
    meanings={
        **MEANINGS,
        "n_labels": "human labels on this dimension, which no judge scored (compared with nothing)",
        "corrected": "prediction-powered (PPI++) estimate: the judge on every item, its bias measured on the expert-rated ones",
    },
)
CORRECTED_ESTIMATES: TableSpec = TableSpec(
    "corrected_estimates",
    lambda s, _: corrected_estimates(s.cands, s.humans, s.reference) if s.has_humans else None,
    tuple(COLUMNS),
    section=Section.corrected,
    place=1,
    card=CardField(
        "Corrected estimates (judge-only, human-only and corrected under the labels' design, 95% CIs)",
        tuple(COLUMNS[1:]),
        "no human labels (--humans), or labels whose design allows no corrected estimate (the report's "
        "corrected_design table says why)",
        order=90,
    ),
    meanings={
        **MEANINGS,
        "quantity": "what is estimated: win_rate (generated preferred over the reference) or mean_score",
        "n_labeled": "items the experts also rated",
        "n_unlabeled": "items only the judge scored",
        "judge_only": "the judge's estimate on every item (biased if the judge is)",
        "human_only": "the experts' estimate on the items they rated",
        "n_effective": "expert labels a human-only estimate would need for the corrected CI's width",
    },
)
