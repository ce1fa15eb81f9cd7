"""Issue 27 item 6: the card's null ranges (an unbiased judge of the same self-consistency) and flags."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.card import null_ranges
from analysis.stats.study import study_candidates


def _comparative(bias: float, seed: int, n_prompts: int = 60, n_samples: int = 3) -> pd.DataFrame:
    """Comparative prompts of 3 candidates, each shown in a random order; the judge scores a candidate's
    quality plus noise (sd 0.7), plus `bias` when it is shown first."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        quality = rng.normal(2.0, 0.5, 3)
        order = rng.permutation(3)
        for k in range(n_samples):
            for c in range(3):
                pos = int(order[c]) + 1
                score = quality[c] + rng.normal(0, 0.7) + (bias if pos == 1 else 0.0)
                rows.append(
                    {
                        "judge": "j",
                        "model": "m",
                        "mode": "comparative",
                        "prompt_id": f"p{p}",
                        "instance_id": f"i{p}",
                        "candidate_id": f"c{c}",
                        "source": f"gen{c}",
                        "dimension": "originality",
                        "higher_is_better": True,
                        "sample_idx": k,
                        "position": pos,
                        "score": round(score * 2) / 2,
                        "parse_ok": True,
                    }
                )
    return pd.DataFrame(rows)


def _position_row(results: pd.DataFrame, seed: int = 0, n_reps: int = 100) -> pd.Series:
    table = null_ranges.null_ranges(
        results, study_candidates(results), n_reps=n_reps, seed=seed, fields=("position_bias",)
    )
    assert len(table) == 1
    return table.iloc[0]


def test_a_planted_position_bias_is_flagged() -> None:
    """+0.8 to the first-shown candidate: the first position wins far more than 1/3 of prompts, outside
    the range of the same judge with the positions shuffled."""
    row = _position_row(_comparative(bias=0.8, seed=1))
    assert row["group"] == "1" and row["value"] > row["null_hi"] and bool(row["flag"])


def test_an_unbiased_judge_is_not_flagged_in_most_seeds() -> None:
    """Without a bias the judge's excess lies inside its null range (a 95% range: at most one seed of 10 may
    fall outside by chance). Positions permuted per prompt sample instead of per prompt ignored that a
    candidate keeps its place in all samples of a prompt: the range was too narrow, 2 of these 10 flagged."""
    flags = [bool(_position_row(_comparative(bias=0.0, seed=s), n_reps=60)["flag"]) for s in range(10)]
    assert sum(flags) <= 1


def test_the_range_is_seeded() -> None:
    results = _comparative(bias=0.0, seed=3)
    a, b = _position_row(results, seed=7), _position_row(results, seed=7)
    assert (a["null_lo"], a["null_hi"]) == (b["null_lo"], b["null_hi"])


def test_a_judge_noisier_than_its_samples_is_flagged_on_human_agreement() -> None:
    """Human agreement: judge a scores the consensus exactly (no spread, κ = 1: inside its one-value
    range); judge b is self-consistent (identical samples) yet off the consensus by ±1 at random, more
    than its zero sample spread allows: flagged."""
    rng = np.random.default_rng(0)
    truth = {f"c{c}": int(rng.integers(0, 5)) for c in range(40)}
    off = {c: int(rng.choice([-1, 1])) for c in truth}
    rows = [
        {
            "judge": j,
            "model": "m",
            "mode": "independent",
            "prompt_id": f"{c}",
            "instance_id": "i1",
            "candidate_id": c,
            "source": "gen",
            "dimension": "clarity",
            "higher_is_better": True,
            "sample_idx": k,
            "score": float(t + (off[c] if j == "b" else 0)),
            "parse_ok": True,
        }
        for j in ("a", "b")
        for c, t in truth.items()
        for k in range(3)
    ]
    results = pd.DataFrame(rows)
    humans = pd.DataFrame(
        [
            {
                "annotator": "h",
                "instance_id": "i1",
                "candidate_id": c,
                "source": "gen",
                "dimension": "clarity",
                "score": t,
            }
            for c, t in truth.items()
        ]
    )
    table = null_ranges.null_ranges(
        results, study_candidates(results), humans, n_reps=30, fields=("human_agreement",)
    ).set_index("judge")
    assert table.loc["a", "value"] == pytest.approx(1.0) and not table.loc["a", "flag"]
    assert table.loc["b", "value"] < table.loc["b", "null_lo"] and table.loc["b", "flag"]
