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


def test_vectorised_critical_values_equal_the_loop() -> None:
    """Issue 34.12: the critical value of every D at once equals the per-D search it replaced."""
    d = np.arange(0, 1500)
    for alpha in (0.05, 0.01, 0.05 / 12, 0.5):
        loop = np.full(d.shape, -1)
        for i, n in enumerate(d):
            if n:
                ks = np.arange(0, n // 2 + 1)
                ok = ks[np.minimum(1.0, 2 * stats.binom.cdf(ks, n, 0.5)) <= alpha]
                loop[i] = ok.max() if ok.size else -1
        assert np.array_equal(power._critical(d, alpha), loop)


def test_normal_approximation_matches_exact_at_the_switch_point() -> None:
    """Above `N_EXACT` instances the power is the normal approximation: where both apply, within 0.002."""
    n = power.N_EXACT
    for effect in (0.001, 0.002, 0.003):
        assert power.normal_power(n, effect, 0.3) == pytest.approx(
            power.exact_power(n, effect, 0.3), abs=2e-3
        )
    assert power.mcnemar_power(n + 1, 0.002, 0.3) == power.normal_power(n + 1, 0.002, 0.3)
    # a shift needing more than N_EXACT instances: the closed form, rounded up
    assert power.instances_needed(0.0005, 0.3) == int(np.ceil(power.normal_instances(0.0005, 0.3)))


def test_large_studies_and_tiny_effects_answer_at_once() -> None:
    """20,000 instances (was 54 s) and a shift of 0.002 (no answer in 55 s): the same numbers as the exact sum."""
    mde = power.minimum_detectable_effect(20_000, 0.3)
    assert mde is not None and power.exact_power(20_000, mde, 0.3) >= 0.8 > power.exact_power(
        20_000, mde - 1e-4, 0.3
    )
    n = power.instances_needed(0.002, 0.3)
    assert power.exact_power(n, 0.002, 0.3) >= 0.8 > power.exact_power(n - 1, 0.002, 0.3)


def test_the_plan_powers_the_family_at_its_bh_level() -> None:
    """Issue 32.4: a family of m tests at BH q is powered at q / m (BH always rejects there)."""
    note = power.power_note(300, 0.3, family=6)
    assert note.level == pytest.approx(0.05 / 6)
    assert note.mde == power.minimum_detectable_effect(300, 0.3, alpha=0.05 / 6)
    single = power.power_note(300, 0.3)
    assert single.mde is not None and note.mde is not None and note.mde > single.mde
    assert note.as_dict()["family_tests"] == 6 and note.as_dict()["alpha"] == 0.05
