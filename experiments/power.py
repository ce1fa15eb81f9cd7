"""Power of the paired mode-shift test, before any money is spent and beside the measured shifts.

The report tests a judge's independent → comparative win-rate shift with McNemar's exact test on the same
instances (`analysis.stats.illusion.paired_shift`). This module computes that test's power exactly: given `n`
instances, the share `discordance` of instances whose win / not-win verdict differs between the modes
(ψ = p10 + p01) and a shift δ = p01 − p10, the number of discordant instances D is Binomial(n, ψ), and given
D the shifts one way are Binomial(D, (ψ + δ) / 2ψ); the exact test rejects when the smaller count is at most
the binomial critical value for D. The power is the sum over D, vectorised over the D that carry any weight
(a window of about ±7.5 sd around nψ, so its cost grows with √n, not n).

Above `N_EXACT` instances the power is the normal approximation of the same test (Connor 1987:
Φ((δ√n − z_{α/2}√ψ) / √(ψ − δ²))), which matches the exact sum there to within 0.002 (tested at the switch
point); it also gives the instances a tiny shift needs in closed form, so `plan_effect=0.002` answers at once.

The mode-shift tests form one Benjamini–Hochberg family (`analysis.stats.multiplicity`) of `family` tests
(judge × generator × dimension). BH at level q always rejects a p-value ≤ q / m, so each test's power is
computed at the per-test level q / m: the power BH guarantees for one real shift (more real shifts only raise
it). The minimum detectable effect (MDE) is the smallest δ with power ≥ the target, and the instances needed
for a named δ the smallest n with power ≥ the target (both by bisection; power grows with each).

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
#: Above this many instances the power is the normal approximation (the exact sum agrees to < 0.002 there).
N_EXACT = 1_000_000
#: The binomial weight below which a number of discordant instances D is left out of the exact sum.
TAIL = 1e-13


def per_test_level(alpha: float = ALPHA, family: int = 1) -> float:
    """The level each test of a BH family of `family` tests at level `alpha` is powered at: alpha / family,
    where BH rejects whatever the other p-values are."""
    if family < 1:
        raise ValueError(f"a test family of {family} tests: it must hold at least one")
    return alpha / family


def _critical(discordant: np.ndarray, alpha: float) -> np.ndarray:
    """Per number of discordant instances D, the largest k such that the exact two-sided binomial test
    (p = 0.5) rejects when min(n10, n01) ≤ k (−1 when no k rejects), for every D at once: a normal guess,
    then stepped up or down (binomial CDFs) until it is the exact one."""
    d = np.asarray(discordant, dtype=np.int64)

    def rejects(k: np.ndarray) -> np.ndarray:
        return (k >= 0) & (np.minimum(1.0, 2 * stats.binom.cdf(k, d, 0.5)) <= alpha)

    guess = np.floor(d / 2 - stats.norm.isf(alpha / 2) * np.sqrt(d) / 2)
    k = np.clip(guess, -1, d // 2).astype(np.int64)
    for _ in range(int(d.size > 0) * 64):  # each pass moves every k one step; the guess is off by a few
        up = rejects(k + 1) & (k + 1 <= d // 2)
        down = (k >= 0) & ~rejects(k)
        if not (up.any() or down.any()):
            break
        k = k + up - down
    return np.where(d > 0, k, -1)


def _check(effect: float, discordance: float) -> float:
    delta = abs(effect)
    if delta > discordance:
        raise ValueError(
            f"a shift of {effect} cannot arise with discordance {discordance} (|shift| ≤ discordance)"
        )
    return delta


def normal_power(n: float, effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA) -> float:
    """The normal approximation of McNemar's test's power (Connor 1987), used above `N_EXACT` instances."""
    if n <= 0 or discordance <= 0:
        return 0.0
    delta = _check(effect, discordance)
    spread = np.sqrt(max(discordance - delta**2, 1e-300))
    z = stats.norm.isf(alpha / 2)
    return float(stats.norm.cdf((delta * np.sqrt(n) - z * np.sqrt(discordance)) / spread))


def exact_power(n: int, effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA) -> float:
    """The exact McNemar test's power, summed over the numbers of discordant instances that carry weight."""
    if n <= 0 or discordance <= 0:
        return 0.0
    delta = _check(effect, discordance)
    lo = int(stats.binom.ppf(TAIL, n, discordance))
    hi = int(stats.binom.isf(TAIL, n, discordance)) if discordance < 1 else n
    d = np.arange(max(lo - 1, 0), min(hi + 1, n) + 1)
    weight = stats.binom.pmf(d, n, discordance)
    crit = _critical(d, alpha)
    q = (discordance + delta) / (2 * discordance)  # share of discordant instances that shift towards `effect`
    reject = np.where(crit >= 0, stats.binom.cdf(crit, d, q) + stats.binom.sf(d - crit - 1, d, q), 0.0)
    # the two tails overlap only when 2k ≥ D, which the exact test's critical value never reaches
    return float(np.sum(weight * np.minimum(reject, 1.0)))


def mcnemar_power(n: int, effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA) -> float:
    """The McNemar test's power to detect a win-rate shift `effect` over `n` paired instances at level `alpha`
    (a family's per-test level: `per_test_level`): exact up to `N_EXACT` instances, normal above."""
    if n > N_EXACT:
        return normal_power(n, effect, discordance, alpha)
    return exact_power(n, effect, discordance, alpha)


def normal_instances(
    effect: float, discordance: float = DISCORDANCE, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The instances the normal approximation needs for `effect` (closed form, not rounded)."""
    delta = _check(effect, discordance)
    za, zb = stats.norm.isf(alpha / 2), stats.norm.isf(1 - power)
    return float(((za * np.sqrt(discordance) + zb * np.sqrt(discordance - delta**2)) / delta) ** 2)


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
    """The fewest paired instances for which a shift `effect` is detected with `power` at level `alpha`; in
    closed form (normal) when that is more than `N_EXACT` instances."""
    if not 0 < abs(effect) <= discordance:
        raise ValueError(f"plan_effect {effect}: the shift must be in (0, discordance {discordance}]")
    guess = normal_instances(effect, discordance, alpha, power)
    if guess > N_EXACT:
        return int(np.ceil(guess))
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
    """What `plan.json` and the report say about the mode-shift test's power: the design (instances, assumed
    discordance, the family's size and BH level), never an observed discordance."""

    instances: int
    discordance: float
    alpha: float
    power: float
    mde: float | None
    effect: float | None
    instances_needed: int | None
    family: int = 1

    @property
    def level(self) -> float:
        """The per-test level the power is computed at (`per_test_level`)."""
        return per_test_level(self.alpha, self.family)

    @property
    def method(self) -> str:
        return "normal approximation" if self.instances > N_EXACT else "exact"

    def as_dict(self) -> dict[str, object]:
        return {
            "test": "McNemar exact, paired win / not-win, independent vs comparative, per judge × generator × "
            "dimension",
            "instances": self.instances,
            "discordance_assumed": self.discordance,
            "alpha": self.alpha,
            "family_tests": self.family,
            "per_test_level": self.level,
            "correction": f"Benjamini–Hochberg at q = {self.alpha} over {self.family} mode-shift test(s): "
            f"powered at q / {self.family}",
            "power_method": self.method,
            "power": self.power,
            "minimum_detectable_shift": None if self.mde is None else round(self.mde, 4),
            "effect": self.effect,
            "instances_needed": self.instances_needed,
        }

    def sentence(self) -> str:
        """The design in words (the report's power note and `plan=true`'s line read the same numbers)."""
        design = (
            f"n = {self.instances:,} instances, discordance {self.discordance:.2f} assumed, "
            f"BH q = {self.alpha} over {self.family} mode-shift test(s) (each at {self.level:.3g})"
        )
        if self.mde is None:
            return f"{design}: no shift can be detected with {self.power:.0%} power"
        return f"{design}: the smallest shift detected with {self.power:.0%} power is {self.mde:.3f}"


def power_note(
    instances: int,
    discordance: float = DISCORDANCE,
    effect: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
    family: int = 1,
) -> PowerNote:
    """The MDE for `instances`, and the instances a named `effect` needs, for a test of a BH family of
    `family` tests at level `alpha`."""
    if not 0 < discordance <= 1:
        raise ValueError(f"plan_discordance {discordance}: must be in (0, 1]")
    level = per_test_level(alpha, family)
    needed = None if effect is None else instances_needed(effect, discordance, level, power)
    return PowerNote(
        instances,
        discordance,
        alpha,
        power,
        minimum_detectable_effect(instances, discordance, level, power),
        effect,
        needed,
        family,
    )
