"""The mode-shift test's power (experiments.power): exact against an enumeration with statsmodels' McNemar,
planted against a simulation, and in plan.json."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from experiments import power


def enumerated_power(n: int, effect: float, discordance: float, alpha: float = 0.05) -> float:
    """Every (n10, n01) table of n instances, weighted by its multinomial probability, tested with
    statsmodels' exact McNemar test: the power by brute force."""
    p10, p01 = (discordance - effect) / 2, (discordance + effect) / 2
    total = 0.0
    for n10, n01 in itertools.product(range(n + 1), repeat=2):
        if n10 + n01 > n:
            continue
        prob = stats.multinomial.pmf([n10, n01, n - n10 - n01], n, [p10, p01, 1 - discordance])
        if n10 + n01 and mcnemar(np.array([[0, n10], [n01, 0]]), exact=True).pvalue < alpha:
            total += prob
    return total


@pytest.mark.parametrize(("n", "effect", "discordance"), [(20, 0.3, 0.5), (30, 0.15, 0.3), (25, 0.0, 0.4)])
def test_power_equals_the_enumerated_exact_test(n: int, effect: float, discordance: float) -> None:
    assert power.mcnemar_power(n, effect, discordance) == pytest.approx(
        enumerated_power(n, effect, discordance), abs=1e-9
    )


def test_power_at_the_mde_is_the_target_in_a_seeded_simulation() -> None:
    n, psi = 300, 0.3
    mde = power.minimum_detectable_effect(n, psi)
    assert mde is not None and 0 < mde < psi
    rng = np.random.default_rng(7)
    counts = rng.multinomial(n, [(psi - mde) / 2, (psi + mde) / 2, 1 - psi], size=2000)
    low, d = np.minimum(counts[:, 0], counts[:, 1]), counts[:, 0] + counts[:, 1]
    p = np.minimum(1.0, 2 * stats.binom.cdf(low, d, 0.5))  # statsmodels' exact McNemar p, vectorised
    empirical = float(np.mean(p < 0.05))
    assert abs(empirical - 0.8) <= 0.05
    # and a smaller shift is under-powered (the MDE is the smallest that reaches 0.8)
    assert power.mcnemar_power(n, mde * 0.8, psi) < 0.8


def test_instances_needed_is_the_first_n_with_enough_power() -> None:
    n = power.instances_needed(0.10, 0.3)
    assert power.mcnemar_power(n, 0.10, 0.3) >= 0.8
    assert power.mcnemar_power(n - 1, 0.10, 0.3) < 0.8
    mde = power.minimum_detectable_effect(n, 0.3)
    assert mde is not None and mde <= 0.10 + 1e-6


def test_impossible_settings_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="plan_effect 0.5"):
        power.instances_needed(0.5, 0.3)
    with pytest.raises(ValueError, match="plan_discordance 0"):
        power.power_note(100, discordance=0.0)
    assert power.minimum_detectable_effect(4, 0.3) is None  # 4 instances: no exact test reaches p < 0.05
