"""Cost in the Runs table and the leaderboard (review 9 F1, F2): an unknown price stays unknown, and cost per
1,000 judgments divides the spend by the judgments that were paid for, not by failed calls or twins."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.load.collect import load_results
from analysis.report.build import UNKNOWN, overview
from analysis.report.summary import leaderboard
from analysis.stats.costs import call_costs
from experiments.datasets.loader import Candidate, Instance, Paper
from experiments.modes import build_prompts
from experiments.modes.independent import Independent
from experiments.rows import rows_for, to_frame
from judge.client import CallResult
from judge.rubric import rubric_from_config
from judge.types import Completion

ANSWER = '{"originality": 3, "gap_addressing": 2, "non_obviousness": 1}'
OK = Completion(ANSWER, "stop", 10, 5, 0.01, 0.5)  # every completed judgment below costs $0.01
FAILED = CallResult(None, cached=False, retries=2, error="provider: 503")


def judged(judge: str, results: list[CallResult]) -> pd.DataFrame:
    """The results rows (rows_for, as the study writes them) of one independent call per result."""
    rubric = rubric_from_config(yaml.safe_load(Path("conf/rubric/novelty.yaml").read_text()))
    cands = tuple(Candidate(f"i1:g:{k}", "g", f"question {k}?") for k in range(len(results) - 1))
    inst = Instance("i1", "nlp", (Paper("T", "text"),), Candidate("i1:ref", "reference", "ref?"), cands)
    meta = {
        "run_id": judge,
        "judge": judge,
        "model": "m",
        "mode": "independent",
        "rubric": "novelty",
        "rubric_version": "v",
        "temperature": 0.0,
    }
    rows = []
    for prompt, result in zip(build_prompts([inst], rubric, Independent(), seed=0), results, strict=True):
        rows += rows_for(prompt, 0, result, rubric, meta)
    return to_frame(rows)


def test_a_completed_call_of_unknown_price_stays_unknown_even_with_no_text_and_no_latency(
    tmp_path: Path,
) -> None:
    """F1: a batch answer without created_at has latency 0, a null content gives empty text; 812 + 256 tokens
    were billed at a price nobody knows. It was read as a failed call ($0), so the run's cost showed $0.00."""
    empty = Completion("", "length", 812, 256, None, 0.0)
    frame = judged("j", [CallResult(empty, cached=False, retries=0)] * 2)
    assert frame["raw"].eq("").all() and frame["latency_s"].eq(0.0).all() and frame["cost_usd"].isna().all()
    assert call_costs(frame).isna().all()
    assert overview(frame).iloc[0]["cost_usd"] == UNKNOWN
    assert np.isnan(leaderboard(frame, {}).iloc[0]["cost_per_1k"])
    (tmp_path / "r").mkdir()
    frame.to_parquet(tmp_path / "r" / "results.parquet", index=False)
    assert overview(load_results(tmp_path)).iloc[0]["cost_usd"] == UNKNOWN


def test_an_old_files_failed_call_still_costs_nothing_after_loading(tmp_path: Path) -> None:
    """Files written before rows.call_cost hold NaN for a call that got no completion; its row says so (no
    finish reason, no tokens), and the loader must read those columns for the analysis to see it."""
    frame = judged("j", [CallResult(OK, cached=False, retries=0), FAILED])
    failed = frame["finish_reason"].isna().to_numpy()
    assert failed.sum() == 3 and (frame.loc[failed, "cost_usd"] == 0.0).all()
    old = frame.assign(cost_usd=frame["cost_usd"].mask(failed))
    for name, table in (("parquet", old), ("csv", old)):
        (tmp_path / name).mkdir()
        table.to_parquet(
            tmp_path / name / "results.parquet", index=False
        ) if name == "parquet" else table.to_csv(tmp_path / name / "results.csv", index=False)
        loaded = load_results(tmp_path / name)
        assert overview(loaded).iloc[0]["cost_usd"] == pytest.approx(0.01)
        assert leaderboard(loaded, {}).iloc[0]["cost_per_1k"] == pytest.approx(10.0)


def test_cost_per_1k_is_per_paid_judgment_whatever_failed_shared_or_replayed() -> None:
    """F2: by hand every completed judgment costs $0.01, so $10 per 1,000 for every judge. Dividing by every
    call gave the judge that failed half its calls and the one with a twin $5; a cached replay keeps the
    price of the answer it replays (as the manifest and the Runs table count it), so it is a paid judgment."""
    live = CallResult(OK, cached=False, retries=0)
    twin = CallResult(OK, cached=False, retries=0, shared=True)
    frame = pd.concat(
        [
            judged("reliable", [live] * 4),
            judged("flaky", [live, live, FAILED, FAILED]),
            judged("twin", [live, twin]),
            judged("replay", [live, CallResult(OK, True, 0)]),
        ]
    )
    board = leaderboard(frame, {}).set_index("judge")
    assert board["cost_per_1k"].to_dict() == pytest.approx(dict.fromkeys(board.index, 10.0))
    # the parse rate is over answered calls; the provider's failures are a column of their own (issue 33)
    assert board.loc["flaky", "judgments"] == 4 and board.loc["flaky", "parse_rate"] == 1.0
    assert board.loc["flaky", "provider_failed"] == 2
    runs = overview(frame).set_index("run_id")["cost_usd"]
    assert runs.to_dict() == pytest.approx({"reliable": 0.04, "flaky": 0.02, "twin": 0.01, "replay": 0.02})


def test_cost_per_1k_of_a_free_model_is_zero_and_of_a_judge_with_no_completion_unknown() -> None:
    """A local model's answers cost $0.00 (known): $0 per 1,000; a judge whose every call failed has no paid
    judgment to price: unknown, not $0."""
    free = CallResult(Completion(ANSWER, "stop", 10, 5, 0.0, 0.5), cached=False, retries=0)
    frame = pd.concat([judged("free", [free] * 2), judged("down", [FAILED] * 2)])
    board = leaderboard(frame, {}).set_index("judge")
    assert board.loc["free", "cost_per_1k"] == 0.0 and np.isnan(board.loc["down", "cost_per_1k"])


class Poison:
    """A cell that must not be read: converting it raises."""

    def __str__(self) -> str:
        raise AssertionError("a row of known cost was inspected")

    __float__ = __str__  # type: ignore[assignment]


def test_call_costs_inspects_only_the_rows_of_missing_cost() -> None:
    """F5: every row's answer text was converted on every call (1M rows: 0.55 s of a 1.2 s Runs table); only
    a row of missing cost can change. The known rows here hold cells that raise when read."""
    frame = pd.DataFrame(
        {
            "cost_usd": [0.01, 0.02, np.nan],
            "raw": [Poison(), Poison(), ""],
            "latency_s": [0.5, 0.5, 0.0],
            "cached": [False, False, False],
            "finish_reason": [Poison(), Poison(), None],
            "prompt_tokens": [Poison(), Poison(), 0],
            "completion_tokens": [Poison(), Poison(), 0],
        }
    )
    assert call_costs(frame).tolist() == [0.01, 0.02, 0.0]


def test_an_answer_without_usage_or_finish_reason_keeps_an_unknown_price_unknown() -> None:
    """Review 10, F1: a completed call whose provider reported no usage and no finish reason, with an answer and
    no price, looked like a failed call and was costed $0; the answer text is the evidence it was completed."""
    unpriced = CallResult(Completion(ANSWER, None, 0, 0, None, 0.0), cached=False, retries=0)
    rows = judged("j", [unpriced, FAILED])
    rows["cost_usd"] = np.nan  # an older file: no cost written for either call
    cost = call_costs(rows)
    assert np.isnan(cost[rows["raw"] != ""]).all() and (cost[rows["raw"] == ""] == 0).all()


def test_a_free_model_that_answers_without_usage_costs_0_per_1k_not_unknown() -> None:
    """Review 11, F4: cost per 1,000 judgments took every call without usage or finish reason for a failed one
    (the leaderboard's calls table had no answer text), so a $0 model that answered that way read "unknown"."""
    free = CallResult(Completion(ANSWER, None, 0, 0, 0.0, 0.2), cached=False, retries=0)
    board = leaderboard(judged("free", [free, free]), {})
    assert board.set_index("judge").loc["free", "cost_per_1k"] == 0.0
