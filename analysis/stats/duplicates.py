"""Two judges that are one rater: byte-identical answers on the prompts both judged, or configs that reach the
same model at the same endpoint. Counted as two, they make a tie read as agreement, a combination average one
model with itself and LLM-LLM agreement read 100% (issue 33 item 4); the report names them and leaves the
combined tables out.
"""

from __future__ import annotations

from itertools import combinations

import pandas as pd

#: Fewer shared answered calls than this say nothing about two judges being one.
MIN_SHARED = 2
COLUMNS = ("judge_a", "judge_b", "shared", "identical", "reason")


def identical_answers(results: pd.DataFrame, min_shared: int = MIN_SHARED) -> pd.DataFrame:
    """Pairs of judges whose raw answers are byte-identical on every call (prompt and sample) both answered,
    over at least `min_shared` such calls (`COLUMNS`; `reason` says so)."""
    need = {"judge", "prompt_id", "sample_idx", "raw"}
    if not need <= set(results) or results["judge"].nunique() < 2:
        return pd.DataFrame(columns=list(COLUMNS))
    call = ["prompt_id", "sample_idx", *(c for c in ("perturbation",) if c in results)]
    calls = results[["judge", *call, "raw"]].astype({"judge": str, "raw": "string"})
    calls = calls.loc[calls["raw"].fillna("").str.len() > 0].drop_duplicates(["judge", *call])
    wide = calls.pivot(index=call, columns="judge", values="raw")
    rows = []
    for a, b in combinations(sorted(wide.columns), 2):
        both = wide[a].notna() & wide[b].notna()
        shared = int(both.sum())
        same = int((wide.loc[both, a] == wide.loc[both, b]).sum())
        if shared >= min_shared and same == shared:
            rows.append((a, b, shared, same, f"byte-identical answers on all {shared} calls both answered"))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def same_endpoint(runs: pd.DataFrame) -> pd.DataFrame:
    """Pairs of differently named judges whose runs reach the same model at the same endpoint (`runs`: one
    row per run with judge, model and api_base; a run without an api_base uses the provider's default)."""
    if runs.empty or not {"judge", "model"} <= set(runs):
        return pd.DataFrame(columns=list(COLUMNS))
    known = runs.dropna(subset=["judge", "model"])
    endpoint = known["api_base"].fillna("").astype(str) if "api_base" in known else ""
    frame = known.assign(_at=known["model"].astype(str) + "\0" + endpoint, judge=known["judge"].astype(str))
    rows = []
    for _, part in frame.groupby("_at", sort=True):
        names = sorted(part["judge"].unique())
        model = str(part["model"].iloc[0])
        for a, b in combinations(names, 2):
            rows.append(
                (
                    a,
                    b,
                    float("nan"),
                    float("nan"),
                    f"configs reach the same model ({model}) at the same endpoint",
                )
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def duplicate_raters(results: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every pair of judges that is one rater, by either test, one row per pair with both reasons joined."""
    parts = [identical_answers(results), same_endpoint(runs if runs is not None else pd.DataFrame())]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=list(COLUMNS))
    found = pd.concat(parts, ignore_index=True)
    return (
        found.groupby(["judge_a", "judge_b"], as_index=False, sort=True)
        .agg(shared=("shared", "max"), identical=("identical", "max"), reason=("reason", "; ".join))
        .loc[:, list(COLUMNS)]
    )
