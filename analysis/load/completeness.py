"""What each run below a folder did and did not do, from its manifest, config and results rows: whether it
stopped early and why, the calls it never started, why its unscored calls are unscored, and how many
instances it covered. The report's and the card's completeness banner read this one table, so a study that
stopped after 25 of 99 calls can never read as complete (issue 33 item 2).

Causes of an unscored call, one per call (a call is unscored when any of its rows is):
`provider_error`, `rate_limit`, `timeout` (no completion: the provider failed it after the retries),
`cut_off` (the answer stopped at max_tokens and could not be repaired), `unparseable` (an answer without a
valid value). `salvaged` counts scored calls whose value came from a cut-off answer, repaired.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from analysis.load.checks import (
    LabelCoverage,
    ResultsError,
    check_label_coverage,
    check_label_scale,
    label_coverage,
    label_ranges,
    read_table,
)
from analysis.load.collect import load_humans
from analysis.load.files import RESULTS_FILES, find_results
from analysis.stats.costs import no_completion
from analysis.stats.humans import check_dimensions
from analysis.stats.scores import as_text, distinct_mask
from core.cells import unescape_text
from core.run_config import RunConfig, RunConfigError, read_run_config
from core.schema import MANIFEST_NAME, Manifest, ManifestError, run_manifest
from experiments.outputs import CLAIM

#: Why a call is unscored, in the banner's order (the first three: the provider gave no answer).
PROVIDER_CAUSES: tuple[str, ...] = ("provider_error", "rate_limit", "timeout")
CAUSES: tuple[str, ...] = (*PROVIDER_CAUSES, "cut_off", "unparseable")
#: The per-run columns of `run_status`, in order.
COLUMNS: tuple[str, ...] = (
    "run",
    "judge",
    "model",
    "api_base",
    "mode",
    "stopped",
    "calls_total",
    "calls_not_started",
    "calls_answered",
    *CAUSES,
    "salvaged",
    "instances_dataset",
    "instances_judged",
    "instances_scored",
)
_ROW_COLUMNS = (
    "judge",
    "mode",
    "instance_id",
    "prompt_id",
    "sample_idx",
    "parse_ok",
    "salvaged",
    "error",
    "raw",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
)
CALL = ("prompt_id", "sample_idx")  # one call: a prompt's sample


def call_causes(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per call (`CALL`, within its judge and run where the rows have them): `judge`, `answered` (a completion came
    back), `scored` (every row of the call parsed), `cause` (why it is unscored, one of `CAUSES`; None when
    scored) and `salvaged`. A row without the call columns is a call of its own."""
    if rows.empty:
        return pd.DataFrame(columns=["judge", "answered", "scored", "cause", "salvaged"])
    keys = [c for c in ("judge", "run_id", *CALL) if c in rows]
    failed = no_completion(rows)
    ok = _flag(rows["parse_ok"]) if "parse_ok" in rows else np.ones(len(rows), bool)
    cut, rate, slow = _error_flags(rows)
    if "finish_reason" in rows:
        cut = cut | distinct_mask(rows["finish_reason"], lambda reason: str(reason) == "length")
    salvaged = _flag(rows["salvaged"]) if "salvaged" in rows else np.zeros(len(rows), bool)
    frame = pd.DataFrame(
        {
            "judge": as_text(rows["judge"]).to_numpy() if "judge" in rows else "",
            "_call": _call_ids(rows, keys),
            "answered": ~failed,
            "ok": ok,
            "cause": _causes(rate, slow, failed, cut, ok),
            "salvaged": salvaged & ok,
        }
    )
    calls = frame.groupby("_call", sort=False).agg(
        judge=("judge", "first"),
        answered=("answered", "all"),
        scored=("ok", "all"),
        salvaged=("salvaged", "any"),
    )
    first_cause = frame.dropna(subset=["cause"]).groupby("_call", sort=False)["cause"].first()
    cause = first_cause.reindex(calls.index).astype(object)
    calls["cause"] = cause.where(cause.notna() & ~calls["scored"], None)  # None: scored
    return calls.reset_index(drop=True)


def _call_ids(rows: pd.DataFrame, keys: list[str]) -> np.ndarray:
    if not keys:
        return np.arange(len(rows))
    return rows.groupby(keys, observed=True, dropna=False, sort=False).ngroup().to_numpy()


_RATE = re.compile("RateLimit|\\b429\\b")
_SLOW = re.compile("Timeout|timed out|timed-out")


def _error_flags(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cut off, rate limited, timed out) per row, from its error text: each distinct text tested once (most
    rows share the empty one); no error column: all False."""
    if "error" not in rows:
        none = np.zeros(len(rows), dtype=bool)
        return none, none.copy(), none.copy()
    codes, texts = pd.factorize(rows["error"])
    words = [str(t) for t in texts]
    flags = np.array(
        [("finish_reason=length" in t, bool(_RATE.search(t)), bool(_SLOW.search(t))) for t in words]
        + [(False, False, False)],  # a missing error (code -1)
        dtype=bool,
    ).reshape(-1, 3)[codes]
    return flags[:, 0], flags[:, 1], flags[:, 2]


def _causes(
    rate: np.ndarray, slow: np.ndarray, failed: np.ndarray, cut: np.ndarray, ok: np.ndarray
) -> np.ndarray:
    """Each unscored row's cause (None for a scored row): the provider's failure by its error text (`rate`
    limited, `slow`: timed out), a cut-off answer, or an answer with no valid value."""
    provider = np.where(rate, "rate_limit", np.where(slow, "timeout", "provider_error"))
    answered = np.where(cut, "cut_off", "unparseable")
    cause = np.where(failed, provider, answered).astype(object)
    cause[ok] = None
    return cause


def provider_failures(rows: pd.DataFrame) -> pd.DataFrame:
    """Per judge: `calls`, `answered` (a completion came back) and `provider_failed` (the provider failed the
    call after its retries: no answer to parse). The leaderboard's parse rate is over the answered calls only,
    so a rate-limited judge does not read as one that cannot follow the format."""
    if rows.empty or "judge" not in rows:
        return pd.DataFrame(columns=["judge", "calls", "answered", "provider_failed"])
    calls = call_causes(rows)
    out = calls.groupby("judge", sort=True).agg(calls=("answered", "size"), answered=("answered", "sum"))
    out["provider_failed"] = out["calls"] - out["answered"]
    return out.reset_index()


def run_status(root: str | Path) -> pd.DataFrame:
    """One row per run folder below `root` (`COLUMNS`): what its manifest, config.json and rows say about how
    complete it is. A folder a run claimed that holds no results is a run stopped before writing
    anything (killed, interrupted, or still running). A missing count is NaN, never 0."""
    root = Path(root)
    rows = [_one_run(path) for path in find_results(root)]
    rows += [_unwritten(folder) for folder in _started_without_results(root)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _started_without_results(root: Path) -> Iterable[Path]:
    """Run folders a run claimed (`experiments.outputs.CLAIM`; or Hydra's `.hydra/`) that hold no results: a
    run ended without writing (killed, or still running; an interrupt that writes nothing releases its claim)."""
    if root.is_file():
        return []
    markers = [*root.rglob(CLAIM), *(p for p in root.rglob(".hydra") if p.is_dir())]
    return sorted(
        {
            marker.parent
            for marker in markers
            if not any((marker.parent / name).exists() for name in (*RESULTS_FILES, MANIFEST_NAME))
        }
    )


def _unwritten(folder: Path) -> dict[str, object]:
    return {
        "run": str(folder),
        "stopped": "before writing any output (killed or interrupted, or still running)",
    }


def _one_run(path: Path) -> dict[str, object]:
    folder = path.parent
    try:
        manifest = run_manifest(folder)
    except ManifestError:
        manifest = None  # the loader names a damaged manifest where it matters; here: unknown
    config = _config(folder)
    judge = config.judge
    rows = _rows(path)
    calls = call_causes(rows)
    causes = calls["cause"].value_counts() if len(calls) else pd.Series(dtype=int)
    scored = rows.loc[_flag(rows["parse_ok"])] if "parse_ok" in rows else rows
    out: dict[str, object] = {
        "run": str(folder),
        "judge": (manifest.judge if manifest else None) or (judge.name if judge else None),
        "model": (manifest.model if manifest else None) or (judge.model if judge else None),
        "api_base": judge.api_base if judge else None,
        "mode": manifest.mode if manifest else None,
        "stopped": _stopped(manifest, config),
        "calls_total": manifest.calls_total if manifest else len(calls),
        "calls_not_started": manifest.calls_not_started if manifest else 0,
        "calls_answered": int(calls["answered"].sum()) if len(calls) else 0,
        **{c: int(causes.get(c, 0)) for c in CAUSES},
        "salvaged": int(calls["salvaged"].sum()) if len(calls) else 0,
        "instances_dataset": _dataset_size(manifest.dataset_path if manifest else None),
        "instances_judged": manifest.instances if manifest else None,
        "instances_scored": int(scored["instance_id"].nunique()) if "instance_id" in scored else None,
    }
    return out


def _stopped(manifest: Manifest | None, config: RunConfig) -> str | None:
    """Why the run stopped short: its budget, or a parse rate under its `min_parse_rate` (the run wrote its
    outputs, then failed)."""
    if not isinstance(manifest, Manifest):
        return None
    budget = manifest.budget
    if budget is not None and budget.stopped:
        scope = "the sweep's " if budget.budget_scope == "sweep" else ""
        return (
            f"{scope}budget_usd={budget.budget_usd:g} reached"
            if budget.stopped == "budget"
            else budget.stopped
        )
    minimum, rate = config.min_parse_rate, manifest.parse_rate
    if minimum is not None and rate is not None and rate < minimum:
        return f"parse rate {rate:.3f} below min_parse_rate={minimum:g}"
    return None


def _config(folder: Path) -> RunConfig:
    """The run's config.json; none or a damaged one says nothing here (the loader names a damaged one)."""
    try:
        return read_run_config(folder) or RunConfig()
    except RunConfigError:
        return RunConfig()


def _rows(path: Path) -> pd.DataFrame:
    """The columns of a results file that say what became of each call."""
    try:
        if path.suffix == ".parquet":
            names = set(pq.read_schema(path).names)
            return pq.read_table(path, columns=[c for c in _ROW_COLUMNS if c in names]).to_pandas()
        frame = read_table(
            path,
            lambda p: pd.read_csv(
                p,
                usecols=lambda c: c in _ROW_COLUMNS,
                dtype=dict.fromkeys(("judge", "mode", "instance_id", "prompt_id", "error", "raw"), str),
                keep_default_na=False,
                na_values={"error": [""], "raw": [""], "finish_reason": [""]},
            ),
            "CSV",
        )
    except (OSError, ValueError, ResultsError):
        return pd.DataFrame()
    frame = unescape_text(frame)
    return frame


def _flag(values: pd.Series) -> np.ndarray:
    """A true/false column (bools, or a CSV's text) as bools; missing is false."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.fillna(False).to_numpy(dtype=bool)
    return (
        values.astype("string")
        .str.strip()
        .str.lower()
        .isin(["true", "1", "1.0"])
        .fillna(False)
        .to_numpy(bool)
    )


def _dataset_size(dataset_path: str | None) -> int | None:
    """Instances in the run's dataset file (one JSON object a line), where it can still be read; None
    otherwise (a moved file, another format)."""
    if not dataset_path:
        return None
    path = Path(dataset_path)
    if not path.is_file() or path.suffix != ".jsonl":
        return None
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def checked_humans(
    path: str | None, results: pd.DataFrame
) -> tuple[pd.DataFrame | None, LabelCoverage | None]:
    """The `--humans` labels, checked as judge answers are: on the judges' dimensions, on their rubric's scale
    (`checks.check_label_scale`, the test `annotate ingest` applies) and naming at least one judged candidate;
    with how many of them do (the banner says how many match none)."""
    if not path:
        return None, None
    humans = load_humans(path)
    check_dimensions(humans, results["dimension"].dropna().unique(), path)
    check_label_scale(humans, Path(path), label_ranges(results))
    coverage = label_coverage(humans, results)
    check_label_coverage(coverage, Path(path))
    return humans, coverage
