"""Synthetic results tables with planted effects, for tests, the benchmark and demos of the report.

Each candidate has a true quality per dimension; a judge's sample score is the quality plus the judge's
bias, plus `shift` for generated candidates in comparative mode (the planted novelty illusion), plus noise,
rounded and clipped to the 1–10 scale. Columns follow the results-table contract (core/schema.py); string
columns are categorical, as `analysis.load.collect.load_results` returns them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

WORDS = np.array("novel method data gap model prior study result effect signal".split())


def _cat(codes: np.ndarray, categories: Sequence[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(categories), dtype=object))


def _texts(n_instances: int, n_cands: int, rng: np.random.Generator) -> list[str]:
    """Random candidate texts, all distinct (they are a categorical's categories): a repeat, which a few
    thousand instances make likely, gets a number after it."""
    lengths = rng.integers(5, 60, size=n_instances * n_cands)
    texts = [" ".join(WORDS[rng.integers(0, len(WORDS), n)]) for n in lengths]
    seen: dict[str, int] = {}
    for pos, text in enumerate(texts):
        seen[text] = seen.get(text, 0) + 1
        if seen[text] > 1:
            texts[pos] = f"{text} {seen[text]}"  # WORDS holds no digits: no clash with a drawn text
    return texts


def _shown(
    shape: tuple[int, ...], index: tuple[np.ndarray, ...], comparative: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, pd.Categorical]:
    """Shown position (comparative rows only; one seeded order per instance) and the prompt id of each row:
    one prompt per judge × instance in comparative mode, per judge × candidate in independent mode."""
    n_judges, n_modes, n_instances, n_c = shape[:4]
    j, m, i, c = index
    order = np.argsort(rng.random((n_instances, n_c)), axis=1)
    position = np.where(comparative, np.argsort(order, axis=1)[i, c], np.nan)
    run = (j * n_modes + m) * n_instances + i
    prompt = np.where(comparative, run, n_judges * n_modes * n_instances + run * n_c + c)
    codes, uniques = pd.factorize(prompt)
    return position, _cat(codes, [f"p{x}" for x in uniques])


def synthetic_results(
    n_instances: int = 40,
    generators: Sequence[str] = ("narrow_gen", "broad_gen"),
    k: int = 3,
    dimensions: Sequence[str] = ("originality", "source_boundedness"),
    judges: Sequence[str] = ("judge_a", "judge_b"),
    models: Sequence[str] | None = None,
    modes: Sequence[str] = ("independent", "comparative"),
    n_samples: int = 3,
    shift: float = 0.0,
    noise: float = 0.5,
    unscored: float = 0.0,
    seed: int = 0,
    lower_is_better: Sequence[str] = ("source_boundedness", "diagnostic_framing"),
) -> pd.DataFrame:
    """A results table of n_instances × (1 reference + K per generator) × dimensions × samples × judges
    × modes rows (independent and comparative modes); `higher_is_better` is false on `lower_is_better`."""
    rng = np.random.default_rng(seed)
    n_c = 1 + k * len(generators)
    shape = (len(judges), len(modes), n_instances, n_c, len(dimensions), n_samples)
    j, m, i, c, d, s = (a.ravel() for a in np.indices(shape, dtype=np.int32))
    quality = rng.normal(6.0, 1.5, size=(n_instances, n_c, len(dimensions)))
    bias = rng.normal(0.0, 0.5, size=len(judges))
    is_gen = c > 0
    comparative = np.asarray(modes, dtype=object)[m] == "comparative"
    raw = quality[i, c, d] + bias[j] + shift * (is_gen & comparative) + rng.normal(0, noise, size=len(j))
    score = np.clip(np.floor(raw + 0.5), 1, 10)
    parse_ok = rng.random(len(j)) >= unscored
    cand_names = ["ref", *[f"{g}_{x}" for g in generators for x in range(k)]]
    source_code = np.repeat(np.arange(len(generators) + 1), [1] + [k] * len(generators))
    position, prompt_id = _shown(shape, (j, m, i, c), comparative, rng)
    model_names = list(models) if models is not None else [f"openai/{x}" for x in judges]
    n_runs = len(judges) * len(modes)
    return pd.DataFrame(
        {
            "run_id": _cat(j * len(modes) + m, [f"run{x}" for x in range(n_runs)]),
            "judge": _cat(j, judges),
            "model": _cat(j, model_names),
            "mode": _cat(m, modes),
            "rubric": _cat(np.zeros_like(j), ["rq"]),
            "rubric_version": _cat(np.zeros_like(j), ["v1"]),
            "prompt_id": prompt_id,
            "instance_id": _cat(i, [f"inst{x:05d}" for x in range(n_instances)]),
            "candidate_id": _cat(c, cand_names),
            "source": _cat(source_code[c], ["reference", *generators]),
            "dimension": _cat(d, dimensions),
            "higher_is_better": ~np.isin(np.asarray(dimensions, dtype=object), list(lower_is_better))[d],
            "sample_idx": s,
            "temperature": 0.1,
            "position": position,
            "score": np.where(parse_ok, score, np.nan),
            "parse_ok": parse_ok,
            "prompt_tokens": 500,
            "completion_tokens": 80,
            "cost_usd": 0.001,
            "latency_s": 1.0,
            "cached": False,
            "candidate_text": _cat(i * n_c + c, _texts(n_instances, n_c, rng)),
        }
    )


def synthetic_humans(
    results: pd.DataFrame, annotators: Sequence[str] = ("h1", "h2", "h3"), noise: float = 1.0, seed: int = 0
) -> pd.DataFrame:
    """Human labels for the independent-mode candidates of `results`: each annotator sees the mean of the
    first judge's independent scores plus noise, rounded to the scale."""
    rng = np.random.default_rng(seed)
    base = results.loc[(results["mode"].astype(str) == "independent").to_numpy()]
    base = base.loc[(base["judge"] == base["judge"].iloc[0]).to_numpy()]
    cands = base.groupby(["instance_id", "candidate_id", "source", "dimension"], observed=True)[
        "score"
    ].mean()
    cands = cands.dropna().reset_index()
    frames = []
    for a in annotators:
        score = np.clip(np.floor(cands["score"].to_numpy() + rng.normal(0, noise, len(cands)) + 0.5), 1, 10)
        frames.append(cands.assign(annotator=a, score=score))
    out = pd.concat(frames, ignore_index=True)
    return out[["annotator", "instance_id", "candidate_id", "source", "dimension", "score"]].astype(
        {"annotator": str, "instance_id": str, "candidate_id": str, "source": str, "dimension": str}
    )


def synthetic_pairwise(
    n_instances: int = 30,
    judges: Sequence[str] = ("judge_a",),
    dimension: str = "originality",
    n_samples: int = 2,
    first_bias: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """Pairwise rows: one generated candidate vs the reference per instance, asked in both orders.

    With probability `first_bias` the judge prefers whichever text it was shown first; otherwise it
    prefers the generated candidate half of the time. `inconsistent` marks verdicts that flip with order.
    """
    rng = np.random.default_rng(seed)
    shape = (len(judges), n_instances, n_samples, 2)
    j, i, s, o = (a.ravel() for a in np.indices(shape, dtype=np.int32))
    truth = np.where(rng.random((len(judges), n_instances, n_samples)) < 0.5, "a", "b")[j, i, s]
    shown_first = np.where(o == 0, "a", "b")  # order "ab": candidate_id shown first
    by_position = rng.random((len(judges), n_instances, n_samples))[j, i, s] < first_bias
    pref = np.where(by_position, shown_first, truth)
    flips = pd.Series(pref).groupby([j, i, s]).transform("nunique").to_numpy() > 1
    return pd.DataFrame(
        {
            "judge": np.asarray(judges, dtype=object)[j],
            "model": "openai/" + np.asarray(judges, dtype=object)[j],
            "mode": "pairwise",
            "prompt_id": [f"pw{a}_{b}_{c}" for a, b, c in zip(j, i, o, strict=True)],
            "instance_id": [f"inst{x:05d}" for x in i],
            "candidate_id": "gen_0",
            "source": "gen",
            "other_id": "ref",
            "order": np.where(o == 0, "ab", "ba"),
            "dimension": dimension,
            "higher_is_better": True,
            "sample_idx": s,
            "position": o.astype(float),
            "score": np.nan,
            "preference": pref,
            "inconsistent": flips,
            "parse_ok": True,
            "candidate_text": "a generated text",
        }
    )
