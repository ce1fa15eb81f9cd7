"""Vectorised resampling against the loops it replaced, each statistic timed both ways in the same run.

    python benchmarks/bootstrap_bench.py [--items 1000] [--n-boot 1000] [--repeats 3]

Prints, per statistic, the best of `--repeats` wall times of the old loop (one Python iteration per replicate,
kept below as the baseline) and of the code the analysis runs now, and their ratio new / old. The machine
is shared, so compare the ratios of one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
from crowdkit.aggregation import MACE

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project, when run as a script

from analysis import latent  # noqa: E402
from analysis.stats import consistency, illusion, latent_models, null_ranges  # noqa: E402
from analysis.stats.agreement import cohen_kappa, pair_agreement  # noqa: E402
from analysis.stats.reliability import alpha_with_ci  # noqa: E402
from core.intervals import positive_int  # noqa: E402

# --- the baselines: one Python iteration per replicate (the old code, or the textbook loop) ---


def baseline_kappa(a: np.ndarray, b: np.ndarray, n_boot: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = np.empty((n_boot, 2))
    for i in range(n_boot):
        idx = rng.integers(0, len(a), len(a))
        out[i] = cohen_kappa(a[idx], b[idx]), cohen_kappa(a[idx], b[idx], weights="quadratic")
    return out


def baseline_alpha(data: np.ndarray, n_boot: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    n = data.shape[1]
    return np.array(
        [
            krippendorff.alpha(
                reliability_data=data[:, rng.integers(0, n, n)], level_of_measurement="ordinal"
            )
            for _ in range(n_boot)
        ]
    )


def baseline_shift(paired: pd.DataFrame, n_boot: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n_boot):
        boot = paired.iloc[rng.integers(0, len(paired), len(paired))]
        out.append((boot["after"] == 1).mean() - (boot["before"] == 1).mean())
    return np.array(out)


def baseline_mace_fit(labels: pd.DataFrame) -> object:
    """crowd-kit's MACE as the analysis called it before (pandas group-bys per E-step)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MACE(n_restarts=1, n_iter=50, random_state=0).fit(labels[["task", "worker", "label"]])


def baseline_mace_refits(labels: pd.DataFrame, n_boot: int) -> np.ndarray:
    """The old refit loop (`competence_table` with a fitter): one EM per resampled table."""
    rng = np.random.default_rng(0)
    return np.array(
        [latent_models.mace(latent._resample(labels, rng)).accuracy.to_numpy() for _ in range(n_boot)]
    )


def baseline_position_null(results: pd.DataFrame, n_reps: int) -> np.ndarray:
    """The old card null: per replicate, positions shuffled group by group, merged back, table recomputed."""
    rows = results.loc[results["position"].notna().to_numpy()]
    prompt = ["judge", "mode", *consistency._prompt_keys(rows), "dimension"]
    slots = rows[[*prompt, "candidate_id", "position"]].drop_duplicates([*prompt, "candidate_id"])
    slots = slots.reset_index(drop=True)
    groups = [np.asarray(g) for g in slots.groupby(prompt, sort=False, observed=True).indices.values()]
    others = rows.drop(columns="position")
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n_reps):
        pos = slots["position"].to_numpy(copy=True)
        for idx in groups:
            pos[idx] = pos[rng.permutation(idx)]
        shown = others.merge(slots.assign(position=pos), on=[*prompt, "candidate_id"], how="left")
        out.append(consistency.furthest_position(consistency.position_bias(shown))["excess"].to_numpy())
    return np.array(out)


def baseline_mode_shift_null(paired: pd.DataFrame, n_reps: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n_reps):
        swap = rng.random(len(paired)) < 0.5
        p = paired.assign(
            before=np.where(swap, paired["after"], paired["before"]),
            after=np.where(swap, paired["before"], paired["after"]),
        )
        out.append(illusion.paired_shift(p, [*illusion.MODE_SHIFT_KEYS, "mode"], n_boot=1)["delta_win"])
    return np.array(out)


# --- planted data ---


def _labels(n_items: int, rng: np.random.Generator) -> pd.DataFrame:
    truth = rng.integers(-1, 2, n_items)
    frames = []
    for rater, right in (("a", 0.8), ("b", 0.8), ("c", 0.6), ("d", 0.0), ("e", 0.7)):
        label = np.where(rng.random(n_items) < right, truth, rng.integers(-1, 2, n_items))
        frames.append(
            pd.DataFrame({"task": [f"t{i}" for i in range(n_items)], "worker": rater, "label": label})
        )
    return pd.concat(frames, ignore_index=True).assign(kind="judge")


def _comparative(n_prompts: int, rng: np.random.Generator) -> pd.DataFrame:
    n = n_prompts * 3 * 3  # prompts × samples × candidates
    prompt = np.repeat(np.arange(n_prompts), 9)
    cand = np.tile(np.arange(3), n_prompts * 3)
    order = np.argsort(rng.random((n_prompts, 3)), axis=1)
    return pd.DataFrame(
        {
            "judge": "j",
            "mode": "comparative",
            "prompt_id": [f"p{p}" for p in prompt],
            "instance_id": [f"i{p}" for p in prompt],
            "candidate_id": [f"c{c}" for c in cand],
            "dimension": "originality",
            "higher_is_better": True,
            "sample_idx": np.tile(np.repeat(np.arange(3), 3), n_prompts),
            "position": order[prompt, cand] + 1,
            "score": np.round(rng.normal(3, 1, n) * 2) / 2,
            "parse_ok": True,
        }
    )


def _best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=positive_int, default=1000, help="items (units, instances, tasks)")
    parser.add_argument("--n-boot", type=positive_int, default=1000, help="replicates")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timings per side (the best is kept)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(1)
    n, b = args.items, args.n_boot
    a = rng.integers(1, 6, n).astype(float)
    bb = np.where(rng.random(n) < 0.6, a, rng.integers(1, 6, n)).astype(float)
    three = np.stack([a, bb, np.where(rng.random(n) < 0.5, a, bb)])
    before = rng.choice([-1, 0, 1], n)
    paired = pd.DataFrame(
        {"judge": "j", "source": "g", "dimension": "d", "mode": "m", "before": before}
        | {"after": np.where(rng.random(n) < 0.7, before, rng.choice([-1, 0, 1], n))}
    )
    labels = _labels(min(n, 400), rng)
    raters = pd.Index(sorted(labels["worker"].unique()))
    comparative = _comparative(max(n // 10, 20), rng)
    refits = max(b // 20, 10)
    position = null_ranges._position(comparative, ["comparative"])
    keys = [*illusion.MODE_SHIFT_KEYS, "mode"]
    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("kappa + kappa_w", lambda: baseline_kappa(a, bb, b), lambda: pair_agreement(a, bb, b)),
        ("krippendorff alpha", lambda: baseline_alpha(three, b), lambda: alpha_with_ci(three, "ordinal", b)),
        (
            "paired shift (win rates)",
            lambda: baseline_shift(paired, b),
            lambda: illusion.paired_shift(paired, ["judge", "source", "dimension"], b),
        ),
        (
            f"MACE point fit ({len(labels)} labels)",
            lambda: baseline_mace_fit(labels),
            lambda: latent_models.mace(labels),
        ),
        (
            f"MACE refits ({refits})",
            lambda: baseline_mace_refits(labels, refits),
            lambda: latent._mace_refit_boot(labels, raters, refits, 0),
        ),
        (
            f"card position null ({len(comparative)} rows)",
            lambda: baseline_position_null(comparative, b),
            lambda: position(b, np.random.default_rng(0)),
        ),
        (
            "card mode-shift null",
            lambda: baseline_mode_shift_null(paired, b),
            lambda: null_ranges.swap_null(paired, keys, b, np.random.default_rng(0)),
        ),
    ]
    print(f"{n} items, {b} replicates, best of {args.repeats}")
    print(f"{'statistic':40s} {'old s':>9s} {'new s':>9s} {'new/old':>9s}")
    for name, old, new in cases:
        t_old, t_new = _best(old, args.repeats), _best(new, args.repeats)
        print(f"{name:40s} {t_old:9.3f} {t_new:9.4f} {t_new / t_old:9.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
