"""NovBench's human validation (seed paper App. D): do the metrics prefer what expert annotators prefer?

Each pair holds two generated novelty evaluations (A, B) of one paper and each annotator's choice.

* **Human majority**: the option chosen by strictly more than half of the annotators. Pairs without one
  (e.g. 1–1 with two annotators) are excluded from Agreement and ρ, and counted (``n_no_majority``).
* **Metric preference**: the sign of ``combined(A) − combined(B)``, ``combined`` being a declared
  :class:`Combination` of the four metrics. Pairs where the difference is 0 (within ``TIE_TOL``: two equal
  shares such as 7/9 can differ in the last bit once summed in floating point) are metric ties, and pairs
  where either side is undefined (NaN) are undefined; both are counted (``n_metric_tie``, ``n_undefined``).
* **Agreement** (Eq. 8) = share of *all* pairs with a strict human majority (``n_agreement``) where the
  metric prefers the majority's choice: a metric tie or an undefined metric prefers nothing, so it counts as a
  disagreement, never leaves the denominator (leaving ties out read 70.5% of 44 dev pairs for 64.6% of 48).
* **Spearman ρ** between ``combined(A) − combined(B)`` and the human preference, coded as the share of
  annotators choosing A minus the share choosing B, over the pairs with a majority and a defined difference
  (a metric tie enters as a difference of 0), with its two-sided p-value (``rho_p``, scipy), as the paper
  gives it.
* **Fleiss κ** among the annotators over every pair (statsmodels), categories A and B.

CIs: a seeded percentile bootstrap over pairs; one set of resampled pairs serves all three statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from analysis.stats.agreement import fleiss_kappa
from analysis.stats.winrate import TIE_TOL
from core.intervals import percentile_ci

# Range of each metric, so a combination adds like with like: (x − lo)/(hi − lo), clipped to [0, 1].
METRIC_RANGE: dict[str, tuple[float, float]] = {
    "relevance": (1.0, 5.0),
    "correctness": (0.0, 1.0),
    "coverage": (0.0, 1.0),
    "clarity": (0.0, 1.0),
}


@dataclass(frozen=True)
class Combination:
    """A weighted sum of metrics, each first rescaled to [0, 1] by its range (``METRIC_RANGE``).

    The default weighs the four metrics equally: no weight is fitted to any human data.
    """

    weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(METRIC_RANGE, 1.0))

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(METRIC_RANGE))
        if unknown or not self.weights:
            raise ValueError(
                f"combination: unknown metric(s) {unknown}; choose from {', '.join(METRIC_RANGE)}"
            )
        for name, weight in self.weights.items():  # 0 or NaN makes every pair a tie, < 0 reverses the metric
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"combination: weight of {name!r} must be a positive number, got {weight:g}")

    @classmethod
    def parse(cls, spec: str) -> Combination:
        """``"relevance+clarity"`` (weight 1 each) or ``"relevance=2,coverage=1"``."""
        weights: dict[str, float] = {}
        for part in spec.replace("+", ",").split(","):
            name, _, weight = part.strip().partition("=")
            try:
                weights[name.strip()] = float(weight) if weight else 1.0
            except ValueError:
                raise ValueError(
                    f"combination: weight of {name.strip()!r} is not a number: {weight!r}"
                ) from None
        return cls(weights)

    def describe(self) -> str:
        """The formula, for every output that shows a number computed with it."""
        terms = []
        for m, w in self.weights.items():
            lo, hi = METRIC_RANGE[m]
            unit = m if (lo, hi) == (0.0, 1.0) else f"({m}-{lo:g})/{hi - lo:g}"
            terms.append(unit if w == 1 else f"{w:g}*{unit}")
        return " + ".join(terms)

    def __call__(self, scores: pd.DataFrame) -> pd.Series:
        total = pd.Series(0.0, index=scores.index)
        for m, w in self.weights.items():
            lo, hi = METRIC_RANGE[m]
            total = total + w * ((scores[m].astype(float) - lo) / (hi - lo)).clip(0.0, 1.0)
        return total


VOTE_OPTIONS: tuple[str, ...] = ("A", "B")


def strict_majority(votes: Sequence[str]) -> str | None:
    """The option chosen by more than half of the votes, or None."""
    for option in VOTE_OPTIONS:
        if sum(v == option for v in votes) * 2 > len(votes):
            return option
    return None


def _stats(diff: np.ndarray, votes: np.ndarray) -> dict[str, float]:
    """Agreement, ρ and κ of one set of pairs (the module docstring's definitions); ``diff`` has its ties
    already snapped to 0 (`validate`)."""
    share_a = (votes == "A").mean(axis=1)
    pref = 2.0 * share_a - 1.0
    has_major = np.abs(pref) > 0
    defined = has_major & ~np.isnan(diff)
    decided = defined & (diff != 0)
    hits = (np.sign(diff[decided]) == np.sign(pref[decided])).sum()
    rho = rho_p = math.nan
    if defined.sum() >= 3 and np.ptp(diff[defined]) > 0 and np.ptp(pref[defined]) > 0:
        res = spearmanr(diff[defined], pref[defined])
        rho, rho_p = float(res.statistic), float(res.pvalue)
    n_major = int(has_major.sum())  # Eq. 8's denominator: ties and undefined values stay in it as misses
    return {
        "agreement": hits / n_major if n_major else math.nan,
        "rho": rho,
        "rho_p": rho_p,
        "kappa": fleiss_kappa(votes, VOTE_OPTIONS),
        "n_pairs": len(diff),
        "n_no_majority": len(diff) - n_major,
        "n_undefined": int((has_major & np.isnan(diff)).sum()),
        "n_metric_tie": int((defined & (diff == 0)).sum()),
        "n_agreement": n_major,
    }


def validate(
    diff: Sequence[float], votes: np.ndarray, n_boot: int = 2000, seed: int = 0, tie_tol: float = TIE_TOL
) -> dict[str, float]:
    """Agreement, Spearman ρ (and its p-value) and Fleiss κ with 95% bootstrap CIs (``<stat>_lo``/``<stat>_hi``)
    and counts.

    ``|diff| <= tie_tol`` is a metric tie (a difference in the last bit); `validation_table` scales it by the
    combination's total weight, so that multiplying every weight by a constant changes nothing."""
    diff_arr, votes = np.asarray(diff, dtype=float), np.asarray(votes, dtype=object)
    diff_arr = np.where(np.abs(diff_arr) <= tie_tol, 0.0, diff_arr)
    point = _stats(diff_arr, votes)
    idx = np.random.default_rng(seed).integers(0, len(diff_arr), (n_boot, len(diff_arr)))
    keys = ("agreement", "rho", "kappa")
    replicates = (_stats(diff_arr[i], votes[i]) for i in idx)  # each replicate's statistics computed once
    boots = np.array([[rep[k] for k in keys] for rep in replicates]).reshape(n_boot, 3)
    lo, hi = percentile_ci(boots)
    for j, k in enumerate(keys):
        point[f"{k}_lo"], point[f"{k}_hi"] = float(lo[j]), float(hi[j])
    return point


def validation_table(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    votes: np.ndarray,
    combinations: Mapping[str, Combination],
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per named combination: its formula, Agreement/ρ/κ with CIs, and the pair counts."""
    rows: list[dict[str, Any]] = []
    for name, comb in combinations.items():
        diff = (comb(scores_a) - comb(scores_b)).to_numpy()
        tol = TIE_TOL * sum(comb.weights.values())  # combined values range over [0, total weight]
        rows.append(
            {"metric": name, "combination": comb.describe(), **validate(diff, votes, n_boot, seed, tol)}
        )
    return pd.DataFrame(rows)


def default_combinations(combination: Combination) -> dict[str, Combination]:
    """The declared combination, then each metric alone (the issue's dev-set breakdown)."""
    return {"combined": combination, **{m: Combination({m: 1.0}) for m in METRIC_RANGE}}
