"""A run's spend: the judge's prices from its config and the `budget_usd` cap with its manifest fields."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from core.schema import BudgetRecord
from experiments.config import JudgeConfig, StudyConfig
from experiments.inputs import StudyError
from judge.rubric import MIN_ANSWER_TOKENS
from judge.spend.budget import Budget, BudgetError
from judge.spend.ledger import LEDGER_NAME, LedgerError, SharedSpend
from judge.spend.pricing import Prices, prices_for


def judge_prices(jcfg: JudgeConfig) -> Prices:
    """The judge's prices (litellm's map, the config's overrides); a bad override is a StudyError."""
    overrides = {
        "input_cost_per_token": jcfg.input_cost_per_token,
        "output_cost_per_token": jcfg.output_cost_per_token,
        "input_cost_per_token_batches": jcfg.input_cost_per_token_batches,
        "output_cost_per_token_batches": jcfg.output_cost_per_token_batches,
    }
    try:
        return prices_for(jcfg.model, overrides)
    except ValueError as exc:
        raise StudyError(f"judge={jcfg.name}: {exc}") from None


def budget_for(cfg: StudyConfig, largest_output: int | None = None) -> Budget | None:
    """The run's spend cap (`budget_usd`), or None; one that cannot be enforced is a StudyError. A call's
    worst case is `largest_output` tokens (the run's largest output budget), else `max_tokens`."""
    if cfg.budget_usd is None:
        return None
    max_tokens = largest_output if largest_output is not None else cfg.max_tokens or MIN_ANSWER_TOKENS
    try:
        return Budget(cfg.budget_usd, cfg.judge.model, judge_prices(cfg.judge), max_tokens, batch=cfg.batch)
    except (BudgetError, TypeError, ValueError) as exc:
        raise StudyError(f"budget_usd={cfg.budget_usd!r}: {exc}") from None


def budget_manifest(budget: Budget | None, not_started: int) -> BudgetRecord | None:
    """The manifest's budget fields (none without a budget)."""
    if budget is None:
        return None
    stopped = "budget" if budget.stopped else None
    record = BudgetRecord(budget.limit_usd, round(budget.spent_usd, 6), stopped, not_started)
    if budget.shared is not None:  # a -m sweep: the cap is the sweep's
        sweep = budget.shared.spent_usd()
        spend = None if sweep is None else round(sweep, 6)
        ledger = str(budget.shared.path)
        record = replace(record, budget_scope="sweep", sweep_spend_usd=spend, sweep_ledger=ledger)
    return record


def budget_message(budget: Budget, not_started: int) -> str:
    spent = f"spent ${budget.spent_usd:.4f}"
    if budget.shared is not None:
        sweep = budget.shared.spent_usd()
        spent += f" (the sweep: {'unknown' if sweep is None else f'${sweep:.4f}'}, {budget.shared.path})"
    return (
        f"budget_usd={budget.limit_usd:g} reached: {spent}; {not_started} calls not started (everything paid "
        "for is cached: rerun with a larger budget_usd to continue)"
    )


def share_budget(budget: Budget | None, sweep_dir: Path | None, job: str) -> None:
    """In a -m sweep, make the run's budget the sweep's (judge.spend.ledger); a ledger that cannot be used is a
    StudyError."""
    if budget is None or sweep_dir is None:
        return
    try:
        budget.shared = SharedSpend(sweep_dir / LEDGER_NAME, job)
    except LedgerError as exc:
        raise StudyError(str(exc)) from None
