"""The end of a `-m` sweep under `budget_usd`: exit 3 when the sweep's shared budget stopped it.

A job that reaches the sweep's cap writes its outputs (`stopped: budget`) and returns, so the sweep goes on:
its other jobs still replay what is cached and start no new call. This Hydra callback (conf/config.yaml,
`hydra.callbacks`) then reads the sweep's ledger (judge.ledger) in the launching process, whatever the
launcher, and ends the command with exit code 3, as a single run does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from judge.ledger import LEDGER_NAME, LedgerError, read_ledger


def budget_stop(sweep_dir: Path, budget_usd: Any) -> str | None:
    """One line when the sweep in `sweep_dir` stopped at its budget (`budget_usd`, the sweep's cap), else None."""
    path = sweep_dir / LEDGER_NAME
    if not path.exists():  # (a swept budget_usd reaches the callback as None: the ledger alone decides)
        return None
    try:
        ledger = read_ledger(path)
    except LedgerError as exc:
        return str(exc)
    stopped_at = ledger.get("stopped_at_usd")
    try:
        cap = None if budget_usd is None else float(budget_usd)
    except (TypeError, ValueError):  # swept over several caps: any stop counts
        cap = None
    if stopped_at is None or (cap is not None and stopped_at < cap):
        return None  # not stopped, or stopped by an earlier, smaller cap in this folder
    spent = sum(line["spent_usd"] for line in ledger["jobs"].values())
    return (f"the sweep reached budget_usd={stopped_at:g}: spent ${spent:.4f} over {len(ledger['jobs'])} jobs "
            f"({path}); everything paid for is cached: rerun with a larger budget_usd to continue")  # fmt: skip


class SweepBudget(Callback):
    """Exit 3 at the end of a sweep that its shared budget stopped."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        line = budget_stop(Path(str(config.hydra.sweep.dir)), config.get("budget_usd"))
        if line:
            print(f"stopped: {line}", file=sys.stderr)
            sys.exit(3)
