"""Power of the paired mode-shift test, before any money is spent and beside the measured shifts.

The report tests a judge's independent → comparative win-rate shift with McNemar's exact test on the same
instances (`analysis.stats.illusion.paired_shift`). This module computes that test's power exactly instead of by
a normal approximation: given `n` instances, the share `discordance` of instances whose win / not-win
verdict differs between the modes (ψ = p10 + p01) and a shift δ = p01 − p10, the number of discordant
instances D is Binomial(n, ψ), and given D the shifts one way are Binomial(D, (ψ + δ) / 2ψ); the exact
test rejects when the smaller count is at most the binomial critical value for D. The power is the sum
over D. The minimum detectable effect (MDE) is the smallest δ with power ≥ the target, and the instances
needed for a named δ the smallest n with power ≥ the target (both by bisection; power grows with each).

It lives in `experiments` so that `plan=true` and `analysis.report.build` share one computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.8
#: The stated default assumption: the share of instances whose verdict differs between the two modes.
DISCORDANCE = 0.3


def _critical(discordant: np.ndarray, alpha: float) -> np.ndarray:
    """Per number of discordant instances D, the largest k such that the exact two-sided binomial test
    (p = 0.5) rejects when min(n10, n01) ≤ k (−1 when no k rejects)."""
    out = np.full(discordant.shape, -1, dtype=np.int64)
    for i, d in enumerate(discordant):
        if d == 0:
            continue
        ks = np.arange(0, d // 2 + 1)
        p = np.minimum(1.0, 2 * stats.binom.cdf(ks, d, 0.5))
        ok = ks[p <= alpha]
        out[i] = ok.max() if ok.size else -1
    return out


def mcnemar_power(n: int, effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA) -> float:
    """The exact McNemar test's power to detect a win-rate shift `effect` over `n` paired instances."""
    if n <= 0 or discordance <= 0:
        return 0.0
    delta = abs(effect)
    if delta > discordance:
        raise ValueError(
            f"a shift of {effect} cannot arise with discordance {discordance} (|shift| ≤ discordance)"
        )
    d = np.arange(0, n + 1)
    weight = stats.binom.pmf(d, n, discordance)
    keep = weight > 1e-12  # D far from n·ψ contributes nothing measurable
    d, weight = d[keep], weight[keep]
    crit = _critical(d, alpha)
    q = (discordance + delta) / (2 * discordance)  # share of discordant instances that shift towards `effect`
    reject = np.where(crit >= 0, stats.binom.cdf(crit, d, q) + stats.binom.sf(d - crit - 1, d, q), 0.0)
    # the two tails overlap only when 2k ≥ D, which the exact test's critical value never reaches
    return float(np.sum(weight * np.minimum(reject, 1.0)))


def minimum_detectable_effect(
    n: int, discordance: float = DISCORDANCE, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest shift detected with `power` over `n` instances, or None when even a shift as large as
    the discordance allows is not (too few instances)."""
    if mcnemar_power(n, discordance, discordance, alpha) < power:
        return None
    lo, hi = 0.0, discordance
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if mcnemar_power(n, mid, discordance, alpha) >= power else (mid, hi)
    return hi


def instances_needed(
    effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA, power: float = POWER
) -> int:
    """The fewest paired instances for which a shift `effect` is detected with `power`."""
    if not 0 < abs(effect) <= discordance:
        raise ValueError(f"plan_effect {effect}: the shift must be in (0, discordance {discordance}]")
    hi = 8
    while mcnemar_power(hi, effect, discordance, alpha) < power:
        hi *= 2
    lo = hi // 2
    while hi - lo > 1:  # power is not strictly monotone in n for an exact test; the first n that reaches it
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if mcnemar_power(mid, effect, discordance, alpha) >= power else (mid, hi)
    return hi


@dataclass(frozen=True)
class PowerNote:
    """What `plan.json` and the report say about the mode-shift test's power."""

    instances: int
    discordance: float
    alpha: float
    power: float
    mde: float | None
    effect: float | None
    instances_needed: int | None

    def as_dict(self) -> dict[str, object]:
        return {
            "test": "McNemar exact, paired win / not-win, independent vs comparative, per judge × generator × "
            "dimension",
            "instances": self.instances,
            "discordance_assumed": self.discordance,
            "alpha": self.alpha,
            "power": self.power,
            "minimum_detectable_shift": None if self.mde is None else round(self.mde, 4),
            "effect": self.effect,
            "instances_needed": self.instances_needed,
        }


def power_note(
    instances: int,
    discordance: float = DISCORDANCE,
    effect: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> PowerNote:
    """The MDE for `instances`, and the instances a named `effect` needs."""
    if not 0 < discordance <= 1:
        raise ValueError(f"plan_discordance {discordance}: must be in (0, 1]")
    needed = None if effect is None else instances_needed(effect, discordance, alpha, power)
    return PowerNote(
        instances,
        discordance,
        alpha,
        power,
        minimum_detectable_effect(instances, discordance, alpha, power),
        effect,
        needed,
    )
