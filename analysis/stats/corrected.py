"""Corrected estimates: a judge's win rate or mean score on every item, corrected by the items experts rated.

A judge scores every candidate; experts rate a few. The judge-only estimate is precise and biased, the
human-only estimate unbiased and wide. Prediction-powered inference (PPI++, Angelopoulos, Duchi & Zrnic 2023,
via `ppi-python`) uses the judge on all items and the experts on the rated ones to measure the judge's bias,
giving an unbiased estimate of the experts' quantity that is narrower than the human-only one whenever the
judge tracks the experts (and no wider than it otherwise: the power-tuning λ falls to 0).

Per judge × mode × dimension, two quantities:
- `win_rate`: the share of generated candidates preferred over the same instance's reference (the pair
  outcome of `analysis.stats.humans.pair_outcomes`; the experts' label is their strict majority on the pair);
- `mean_score`: a generated candidate's score (the experts' label is their consensus
  (`analysis.stats.humans.consensus_scores`, the annotators' mean), on the experts' own scale: the correction also absorbs a shift of scale).

The labelled items are those the experts rated; the unlabelled, every other item the judge scored.
`n_effective` is the number of expert labels a human-only estimate would need for the corrected CI's width.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

from analysis.stats.humans import consensus_scores, human_results, majority_outcomes, pair_outcomes
from analysis.stats.scores import candidate_scores, dimension_directions, direction

ALPHA = 0.05
KEYS = ["judge", "mode", "dimension"]
ITEM = ["instance_id", "candidate_id"]
COLUMNS = [
    *KEYS,
    "quantity",
    "n_labeled",
    "n_unlabeled",
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
]


@dataclass(frozen=True)
class Estimates:
    """Judge-only, human-only and prediction-powered estimates of one mean, each with its CI."""

    judge_only: tuple[float, float, float]
    human_only: tuple[float, float, float]
    corrected: tuple[float, float, float]
    n_effective: float


def estimate(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, alpha: float = ALPHA) -> Estimates:
    """The three estimates of E[y]: `y` and `yhat` on the labelled items, `yhat_unlabeled` on the rest."""
    y, yhat, rest = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabeled))
    every = np.concatenate([yhat, rest])
    j_lo, j_hi = classical_mean_ci(every, alpha=alpha)
    h_lo, h_hi = classical_mean_ci(y, alpha=alpha)
    c_lo, c_hi = ppi_mean_ci(y, yhat, rest, alpha=alpha)
    point = ppi_mean_pointestimate(y, yhat, rest)
    corrected = (float(np.ravel(point)[0]), float(np.ravel(c_lo)[0]), float(np.ravel(c_hi)[0]))
    width_h, width_c = float(h_hi - h_lo), corrected[2] - corrected[1]
    n_eff = len(y) * (width_h / width_c) ** 2 if width_c > 0 else float("nan")
    return Estimates(
        (float(every.mean()), float(j_lo), float(j_hi)),
        (float(y.mean()), float(h_lo), float(h_hi)),
        corrected,
        n_eff,
    )


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
    judged = pair_outcomes(cands, reference).astype({c: str for c in [*KEYS, *ITEM]})
    signed = (judged["score"] - judged["ref_score"]).to_numpy() * direction(judged)
    judged = judged.assign(yhat=(judged["outcome"] == 1).astype(float), diff=signed)
    # a candidate scored in several prompts (comparative_all) is one item: the mean over them
    verdicts = judged.groupby([*KEYS, *ITEM], as_index=False)[["yhat", "diff"]].mean()
    scored = candidate_scores(cands).astype({c: str for c in [*KEYS, *ITEM, "source"]})
    scored = scored.loc[(scored["source"] != reference).to_numpy(), [*KEYS, *ITEM, "score"]]
    scored = scored.rename(columns={"score": "yhat"})
    return (
        scored.merge(consensus, on=[*ITEM, "dimension"], how="left"),
        verdicts.merge(wins, on=[*ITEM, "dimension"], how="left"),
    )


def corrected_estimates(
    cands: pd.DataFrame, humans: pd.DataFrame | None, reference: str = "reference", alpha: float = ALPHA
) -> pd.DataFrame:
    """Per judge × mode × dimension and quantity (`win_rate`, `mean_score`): the judge-only, human-only and
    corrected estimates with CIs, the labelled and unlabelled counts and the labels' effective sample size.
    Groups with fewer than 2 labelled or no unlabelled items are left out (nothing to correct)."""
    if humans is None or humans.empty:
        return pd.DataFrame(columns=COLUMNS)
    scores, verdicts = labels_and_predictions(cands, humans, reference)
    rows = []
    for quantity, merged in (("win_rate", verdicts), ("mean_score", scores)):
        for key, part in merged.groupby(KEYS, sort=True):
            labelled = part["y"].notna().to_numpy()
            if labelled.sum() < 2 or (~labelled).sum() < 1:
                continue
            got = estimate(
                part.loc[labelled, "y"], part.loc[labelled, "yhat"], part.loc[~labelled, "yhat"], alpha
            )
            rows.append(
                dict(zip(KEYS, key, strict=True))
                | {
                    "quantity": quantity,
                    "n_labeled": int(labelled.sum()),
                    "n_unlabeled": int((~labelled).sum()),
                    **_triple("judge_only", got.judge_only),
                    **_triple("human_only", got.human_only),
                    **_triple("corrected", got.corrected),
                    "n_effective": got.n_effective,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _triple(name: str, value: tuple[float, float, float]) -> dict[str, float]:
    return {name: value[0], f"{name}_lo": value[1], f"{name}_hi": value[2]}
