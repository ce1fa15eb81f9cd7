"""Two judges that are one rater (issue 33 item 4): byte-identical raw answers on every call both answered, or
configs that reach the same model at the same endpoint. Counted as two, they make a tie read as agreement, a
combination average one model with itself and LLM-LLM agreement read 100%.

One rule, read twice: the report and the cards (analysis.report, analysis.card) name the pairs and leave the
combined tables out, and a `-m` sweep names them as soon as it ends (`duplicate_lines`, from each job's
`config.json` and results). Endpoints are compared and printed without credentials (judge.secrets.endpoint,
then redact): a key never reaches a line or a table.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from core.run_config import RUN_CONFIG, RunConfigError, read_run_config
from judge.secrets import endpoint, redact

#: Fewer shared answered calls than this say nothing about two judges being one.
MIN_SHARED = 2
COLUMNS = ("judge_a", "judge_b", "shared", "identical", "reason")
#: What identifies one call across judges: the prompt, the sample and the robustness perturbation.
_CALL = ("prompt_id", "sample_idx", "perturbation")


def identical_answers(results: pd.DataFrame, min_shared: int = MIN_SHARED) -> pd.DataFrame:
    """Pairs of judges whose raw answers are byte-identical on every call (prompt and sample) both answered,
    over at least `min_shared` such calls (`COLUMNS`; `reason` says so)."""
    need = {"judge", "prompt_id", "sample_idx", "raw"}
    if not need <= set(results) or results["judge"].nunique() < 2:
        return pd.DataFrame(columns=list(COLUMNS))
    call = [c for c in _CALL if c in results]
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
    row per run with judge, model and api_base; a run without an api_base uses the provider's default). The
    endpoint is compared without credentials, so a rotated key is the same endpoint."""
    if runs.empty or not {"judge", "model"} <= set(runs):
        return pd.DataFrame(columns=list(COLUMNS))
    known = runs.dropna(subset=["judge", "model"])
    bases = known["api_base"] if "api_base" in known else pd.Series(None, index=known.index, dtype=object)
    at = [endpoint(b if isinstance(b, str) else None) or "" for b in bases]
    frame = known.assign(_at=at, judge=known["judge"].astype(str), model=known["model"].astype(str))
    rows = []
    for (model, where), part in frame.groupby(["model", "_at"], sort=True):
        place = redact(str(where)) if where else "the provider default endpoint"
        for a, b in combinations(sorted(part["judge"].unique()), 2):
            rows.append((a, b, float("nan"), float("nan"), f"same model {model} at {place}"))
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


def _job_run(job: Path) -> dict[str, str | None] | None:
    """A job's judge name, model and api_base from its config.json (core.run_config); None if it has none."""
    try:
        config = read_run_config(job)
    except RunConfigError:
        return None
    judge = config.judge if config is not None else None
    if judge is None:
        return None
    return {"judge": judge.name, "model": judge.model, "api_base": judge.api_base}


def _job_answers(job: Path, judge: str) -> pd.DataFrame | None:
    """A job's answered calls (the call's key and its raw answer); None if it has none or they are unreadable."""
    path = job / "results.parquet"
    try:
        names = set(pq.read_schema(path).names)
        if not {"prompt_id", "sample_idx", "raw"} <= names:
            return None
        columns = [c for c in _CALL if c in names]
        frame = pq.read_table(path, columns=[*columns, "raw"]).to_pandas()
    except (OSError, ValueError):
        return None
    return frame.astype({c: str for c in columns}).assign(judge=judge)


def duplicate_lines(sweep_dir: Path) -> list[str]:
    """One warning line per pair of differently named judges in the sweep's jobs that are one rater."""
    runs, answers = [], []
    for config in sorted(sweep_dir.glob(f"*/{RUN_CONFIG}")):
        run = _job_run(config.parent)
        if run is None:
            continue
        runs.append(run)
        found = _job_answers(config.parent, str(run["judge"]))
        if found is not None:
            answers.append(found)
    results = pd.concat(answers, ignore_index=True) if answers else pd.DataFrame()
    pairs = duplicate_raters(results, pd.DataFrame(runs))
    return [
        f"warning: judges {p.judge_a} and {p.judge_b} are one rater ({p.reason}): "
        "count them once in any comparison or combination"
        for p in pairs.itertuples()
    ]
