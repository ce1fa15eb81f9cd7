"""The end of a `-m` sweep: exit 3 when the sweep's shared budget stopped it, 4 or 1 when a job failed.

A job that reaches the sweep's cap writes its outputs (`stopped: budget`) and returns, so the sweep goes on:
its other jobs still replay what is cached and start no new call. This Hydra callback (conf/config.yaml,
`hydra.callbacks`) then reads the sweep's ledger (judge.spend.ledger) in the launching process, whatever the
launcher, and ends the command with exit code 3, as a single run does.

A job whose parse rate falls below `min_parse_rate` (exit 4 alone) or whose every call failed at the provider
(exit 1 alone) writes its outputs and a `failed.json` in its folder, and returns: a `sys.exit` inside a job
would end the whole sweep at the first such job. The callback names every failed job and exits with the most
serious code (4 before 1), after the budget's line if there is one. Before them it names every pair of the
sweep's judges that are one rater (experiments.duplicates): same model and endpoint, or identical answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

from judge.spend.ledger import LEDGER_NAME, LedgerError, read_ledger


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
    return (
        f"the sweep reached budget_usd={stopped_at:g}: spent ${spent:.4f} over {len(ledger['jobs'])} jobs "
        f"({path}); everything paid for is cached: rerun with a larger budget_usd to continue"
    )


FAILED_NAME = "failed.json"


def mark_failed(job_dir: Path, code: int, line: str) -> None:
    """Record that this sweep job failed (its outputs are written) for the end-of-sweep callback."""
    (job_dir / FAILED_NAME).write_text(json.dumps({"exit_code": code, "error": line}), encoding="utf-8")


def clear_failed(job_dir: Path) -> None:
    """A job run again in the same folder starts with no failure on record."""
    (job_dir / FAILED_NAME).unlink(missing_ok=True)


def failed_jobs(sweep_dir: Path) -> list[tuple[str, int, str]]:
    """(job folder, exit code, error line) of every job of the sweep that recorded a failure."""
    out = []
    for path in sorted(sweep_dir.glob(f"*/{FAILED_NAME}")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            out.append((path.parent.name, int(record["exit_code"]), str(record["error"])))
        except (OSError, ValueError, KeyError, TypeError):
            out.append((path.parent.name, 1, f"{path}: unreadable failure record"))
    return out


class SweepBudget(Callback):
    """At the end of a sweep: exit 3 if its shared budget stopped it; 4 or 1 if a job failed (named)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """The sweep claims its folder (experiments.outputs.claim_sweep_folder): one a live sweep holds (two
        started in the same second) makes it take `<folder>-2` - its jobs are told through Hydra's overrides.
        A sweep run again into the same folder (as every failure line advises) answers for itself only: the
        failure records of an earlier sweep there are removed (its outputs stay)."""
        # pandas (via experiments.outputs): this callback is imported by every run before Hydra starts
        from experiments.outputs import OutputError, claim_sweep_folder  # noqa: PLC0415

        folder = Path(str(config.hydra.sweep.dir))
        try:
            own = claim_sweep_folder(folder)
        except OutputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        if own != folder:
            print(f"note: a sweep still running holds {folder}; this sweep writes to {own}", file=sys.stderr)
            move_sweep(config, own)
        for path in own.glob(f"*/{FAILED_NAME}"):
            path.unlink(missing_ok=True)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # pandas (via experiments.outputs), pyarrow (via experiments.duplicates): see on_multirun_start
        from experiments.duplicates import duplicate_lines  # noqa: PLC0415
        from experiments.outputs import release_sweep_folder  # noqa: PLC0415

        sweep_dir = Path(str(config.hydra.sweep.dir))
        release_sweep_folder(sweep_dir)
        line = budget_stop(sweep_dir, config.get("budget_usd"))
        if line:
            print(f"stopped: {line}", file=sys.stderr)
        for warning in duplicate_lines(sweep_dir):  # two judge YAMLs that are one rater (issue 33 item 4)
            print(warning, file=sys.stderr)
        failed = failed_jobs(sweep_dir)
        for job, _, error in failed:
            print(f"error: job {job}: {error}", file=sys.stderr)
        if failed:
            sys.exit(4 if any(code == 4 for _, code, _ in failed) else 1)
        if line:
            sys.exit(3)


def move_sweep(config: DictConfig, folder: Path) -> None:
    """Make `folder` the sweep's folder: in its config (the sweeper writes multirun.yaml there) and in the
    overrides every job's config is composed from (each job's folder and ledger are under it)."""
    quoted = "'" + str(folder).replace("\\", "\\\\").replace("'", "\\'") + "'"
    with read_write(config), open_dict(config):
        config.hydra.sweep.dir = str(folder)
        overrides = [str(o) for o in config.hydra.overrides.hydra]
        kept = [o for o in overrides if not o.lstrip("+~").startswith("hydra.sweep.dir=")]
        config.hydra.overrides.hydra = [*kept, f"hydra.sweep.dir={quoted}"]
