"""The judge leaderboard (one row per judge, from every declared table's leaderboard columns) and the
multiple-testing family (every declared p-value column): the two tables that read all the others, computed
last (`TableSpec.reads_all`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from analysis.load.completeness import provider_failures
from analysis.stats import multiplicity
from analysis.stats.costs import NO_COMPLETION, call_costs, no_completion, per_1k
from analysis.stats.scores import group_ids, usable_mask
from analysis.stats.spec import Section, TableSpec
from analysis.tables.registry import leaderboard_parts, p_columns, p_families

CALL_KEYS = ["run_id", "prompt_id", "sample_idx"]  # one judgment = one call (a prompt's sample)


def judge_names(labels: Iterable[str]) -> list[str]:
    """Distinct judges behind rater labels: ``judge/rubric`` and ``judge [mode]`` count once."""
    return sorted({str(x).split(" [", 1)[0].split("/", 1)[0] for x in labels})


def _calls(results: pd.DataFrame) -> pd.DataFrame:
    """One row per judgment (call) with its judge, parse status, cost, latency, cached flag and `answered`
    (a completion came back: `costs.no_completion`). A call is parsed only when every one of its rows is
    (experiments.manifest counts it so); a row of unknown status (NaN parse_ok: a run whose table lacks the
    column) counts as parsed, as scores.usable_mask uses it. Cost, latency and the cached flag are the call's."""
    keys = [c for c in CALL_KEYS if c in results]
    results = results.assign(cost_usd=call_costs(results), answered=~no_completion(results))
    cols = [
        c
        for c in ("judge", "parse_ok", "answered", "cost_usd", "latency_s", "cached", *NO_COMPLETION, "raw")
        if c in results
    ]  # raw: part of the no-completion evidence (costs.no_completion)
    if not keys:
        return results[cols]
    ids, first = group_ids(results, ["judge", *keys])  # a missing key is a value of its own, as in a group-by
    if "parse_ok" in results:
        failed = np.bincount(ids, weights=~usable_mask(results), minlength=len(first))
        results = results.assign(parse_ok=failed[ids] == 0)  # every row of the call parsed
    return results.iloc[np.sort(first)][cols]  # the call's first row


def _answered_parse_rate(calls: pd.DataFrame) -> float:
    """Share of the answered calls (a completion came back) whose every row parsed; NaN when none was
    answered. A call the provider failed (rate limit, timeout, error) has no answer to parse: it is counted
    as a provider failure (`analysis.load.completeness.provider_failures`), never as a parse failure."""
    answered = calls.loc[calls["answered"].to_numpy(dtype=bool)] if "answered" in calls else calls
    return float(usable_mask(answered).mean()) if len(answered) else float("nan")


def parse_rate(results: pd.DataFrame) -> float | None:
    """Share of the answered calls whose every row parsed (`_calls`: the manifest's rule, without the calls
    the provider failed); None without a parse_ok column or without an answered call. The leaderboard and the
    judge card both report this number."""
    if "parse_ok" not in results or not len(results):
        return None
    rate = _answered_parse_rate(_calls(results))
    return None if np.isnan(rate) else rate


def _per_judge_usage(results: pd.DataFrame) -> pd.DataFrame:
    """Parse rate (of the answered calls), cost per 1,000 paid judgments (costs.per_1k; NaN = unknown),
    median latency and time per 1,000 judgments (1,000 × the mean latency, alpaca_eval's "time per 1,000") of
    the calls sent and the cached replays that carry their original call's latency (older results recorded
    0 s for a replay: not a latency, left out; the judge card counts the same calls), and the calls the
    provider failed (`provider_failed`, apart from the parse rate)."""
    calls = _calls(results)
    out = []
    for judge, part in calls.groupby("judge", observed=True, sort=True):
        latency = part["latency_s"].astype(float) if "latency_s" in part else pd.Series(dtype=float)
        cached = part["cached"].fillna(False).astype(bool) if "cached" in part else False
        latency = latency.loc[(~cached | latency.gt(0)).to_numpy()]
        parsed = _answered_parse_rate(part) if "parse_ok" in part else np.nan
        out.append(
            {
                "judge": str(judge),
                "judgments": len(part),
                "parse_rate": parsed,
                "cost_per_1k": per_1k(part),
                "median_latency_s": latency.median() if len(latency) else np.nan,
                "time_per_1k_s": 1000 * latency.mean() if len(latency) else np.nan,
            }
        )
    usage = pd.DataFrame(out)
    failed = provider_failures(results)[["judge", "provider_failed"]]
    return usage.merge(failed, on="judge", how="left") if len(usage) else usage


def leaderboard(
    results: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    extra: Sequence[Callable[[dict[str, pd.DataFrame]], pd.DataFrame]] = (),
) -> pd.DataFrame:
    """One row per judge: parse rate, cost per 1,000 judgments (NaN: unknown), median latency, then the
    columns every declared table adds (`TableSpec.leaderboard`, in declaration order: self-consistency α,
    position bias, the pairwise first-shown preference, tie and flip rates, length and self-preference bias,
    κ_w with the experts per dimension and mode as ``kappa_w:<dimension> [<mode>]``, and a plug-in's), then
    the `extra` columns (a frame of judge and columns per part). The rows are sorted by the mean of the κ_w
    columns (`AGREEMENT`), by parse rate without experts."""
    board = _per_judge_usage(results)
    for make in (*leaderboard_parts(), *extra):
        board = board.merge(make(tables).astype({"judge": str}), on="judge", how="left")
    kappas = [c for c in board.columns if c.startswith("kappa_w:")]
    board[AGREEMENT] = board[kappas].mean(axis=1) if kappas else np.nan
    sort = AGREEMENT if kappas else "parse_rate"
    board = board.sort_values(sort, ascending=False, na_position="last").reset_index(drop=True)
    board.attrs["sort_key"] = sort
    return board[_board_order(list(board.columns))]


#: the sort key: the mean of a judge's κ_w columns (every dimension × mode it was compared with the experts on)
AGREEMENT = "agreement"
#: alpaca_eval's per-annotator columns, in its order (human agreement, price and time per 1,000, position
#: and length bias), then the κ_w group, then the rest, provider failures right after the parse rate
LEADING: tuple[str, ...] = (
    "judge",
    AGREEMENT,
    "cost_per_1k",
    "time_per_1k_s",
    "position_bias",
    "length_rho",
)
TRAILING: tuple[str, ...] = ("parse_rate", "provider_failed", "self_alpha", "judgments", "median_latency_s")


def _board_order(columns: Sequence[str]) -> list[str]:
    """judge, the alpaca_eval columns, the κ_w columns together, then parse rate and the rest."""
    kappas = [c for c in columns if c.startswith("kappa_w:")]
    rest = [c for c in columns if c not in (*LEADING, *TRAILING) and c not in kappas]
    return [*[c for c in LEADING if c in columns], *kappas, *[c for c in TRAILING if c in columns], *rest]


LEADERBOARD: TableSpec = TableSpec(
    "leaderboard",
    lambda s, t: leaderboard(s.results, t),  # every call (perturbed ones too), then the tables' columns
    ("judge", "judgments", "parse_rate", "cost_per_1k", "median_latency_s"),
    section=Section.leaderboard,
    reads_all=True,
    meanings={
        "judgments": "judge calls (prompt × sample)",
        "parse_rate": "share of the answered judgments whose answer parsed (a call the provider failed is not counted: see provider_failed; a row of unknown parse status counts as parsed, as the analysis uses it)",
        "provider_failed": "calls the provider failed after their retries (rate limit, timeout, error): no answer to parse, so not in the parse rate",
        "cost_per_1k": "USD per 1,000 paid judgments: the spend over the calls that got a completion with a price of their own (failed calls and twins left out, cached replays in; unknown when any call's cost is unknown)",
        "median_latency_s": "median seconds per call (a cache replay counts with its original call's latency)",
        "time_per_1k_s": "seconds per 1,000 judgments: 1,000 × the mean latency of a call (alpaca_eval's time per 1,000)",
        "agreement": "the mean of the judge's κ_w with the experts over its dimension × mode columns: the leaderboard's sort key",
    },
)
MULTIPLE_TESTING: TableSpec = TableSpec(
    "multiple_testing",  # last of the computed tables: every p-value is in by now
    lambda _, t: multiplicity.add_q_values(t, p_columns(), families=p_families()),
    ("table", "test_family", "p_column", "n_tests", "method"),
    section=Section.multiple_testing,
    reads_all=True,
    meanings={
        "table": "report table",
        "p_column": "the table's p-value column",
        "n_tests": "p-values of that table in the corrected family",
        "test_family": "the family its p-values are corrected within (fixed by the design)",
    },
)
