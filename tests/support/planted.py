"""Planted studies shared by the tests of the card's null ranges and of the vectorised bootstraps."""

from __future__ import annotations

import numpy as np
import pandas as pd


def planted_comparative(bias: float, seed: int, n_prompts: int = 60, n_samples: int = 3) -> pd.DataFrame:
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
