"""One spend account for every job of a `-m` sweep: a JSON file in the sweep folder, read and written under a
file lock, so jobs run one after another or side by side (joblib, submitit) never spend more together than
`budget_usd`.

Each job keeps its own line (its spend and the reservations of its calls in flight); the cap is checked
against the sum over all lines. A job that starts again in the same sweep folder (a rerun of that job) drops
the reservations its killed predecessor left and keeps what it spent. A sweep into a new folder starts a new
account: what earlier sweeps paid for is in the call cache and costs nothing again.
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

LEDGER_NAME = "spend.json"
LOCK_TIMEOUT_S = 60.0


class LedgerError(RuntimeError):
    """The sweep's spend file cannot be read or written; the message names it."""


class Fit(enum.Enum):
    """Whether a call's worst case fits under the cap: now (reserved), later (only the reservations of calls
    in flight are in the way: they may cost less), or never (what is spent already leaves no room)."""

    NOW = "now"
    LATER = "later"
    NEVER = "never"


def fit(spent: float, reserved: float, amount: float, limit: float) -> Fit:
    """Whether `amount` fits under `limit` next to what is `spent` and `reserved` (one run's or a sweep's)."""
    if spent + reserved + amount <= limit:
        return Fit.NOW
    return Fit.LATER if reserved > 0 and spent + amount <= limit else Fit.NEVER


class SharedSpend:
    """The sweep's spend ledger as seen by one job (`job`: its folder name, unique within the sweep)."""

    def __init__(self, path: Path, job: str) -> None:
        self.path = path
        self.job = job
        self._lock = FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT_S)
        # this job's threads (the budget runs ledger updates in threads) queue here, so only other jobs ever
        # wait on the file lock, which polls
        self._local = threading.Lock()
        self.blocking_usd = (
            0.0  # what live jobs held reserved at the last `reserve` (a waiting call watches it)
        )
        with self._locked() as data:
            line = data["jobs"].setdefault(job, {"spent_usd": 0.0, "reserved_usd": 0.0})
            # a rerun of this job: its predecessor's calls in flight are over, and may have been billed, so
            # their reservations count as spent (a kill never frees budget it may have used)
            line["spent_usd"] += line["reserved_usd"]
            line["reserved_usd"] = 0.0
            line["host"], line["pid"] = socket.gethostname(), os.getpid()

    def reserve(self, amount: float, limit_usd: float) -> Fit:
        """Reserve `amount` for one call if the sweep's spend and reservations leave room under the cap (NOW);
        LATER if only calls in flight are in the way; NEVER marks the sweep stopped (at this cap: a job with a
        larger one may go on)."""
        with self._locked() as data:
            stop = data.get("stopped_at_usd")
            spent, reserved = _totals(data["jobs"].values())
            self.blocking_usd = reserved
            answer = (
                Fit.NEVER
                if stop is not None and limit_usd <= stop
                else fit(spent, reserved, amount, limit_usd)
            )
            if answer is Fit.NOW:
                data["jobs"][self.job]["reserved_usd"] += amount
            elif answer is Fit.NEVER:
                data["stopped_at_usd"] = limit_usd  # no later call of the sweep starts, even a cheaper one
            return answer

    def mark_stopped(self, limit_usd: float) -> None:
        """This job stopped at `limit_usd` for another reason than a NEVER answer (a batch that does not fit
        now, a wait that gave up): the sweep stops too, and ends with exit 3."""
        with self._locked() as data:
            stop = data.get("stopped_at_usd")
            data["stopped_at_usd"] = limit_usd if stop is None else max(stop, limit_usd)

    def settle(self, reserved: float, cost: float) -> None:
        """Replace a reservation by what the call cost (0 for a call that was not answered)."""
        with self._locked() as data:
            line = data["jobs"][self.job]
            line["reserved_usd"] = max(0.0, line["reserved_usd"] - reserved)
            line["spent_usd"] += cost

    def spent_usd(self) -> float | None:
        """What the whole sweep has spent so far (None if the file cannot be read now)."""
        try:
            return _totals(read_ledger(self.path)["jobs"].values())[0]
        except LedgerError:
            return None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The ledger's content under the lock, written back (atomically) when the block ends cleanly."""
        with self._local:
            try:
                self._lock.acquire()
            except (Timeout, OSError) as exc:
                raise LedgerError(f"{self.path}: cannot lock the sweep's spend file ({exc})") from None
            try:
                data = read_ledger(self.path)
                before = json.dumps(data, indent=1)
                yield data
                after = json.dumps(data, indent=1)
                if after != before or not self.path.exists():  # a check that changed nothing writes nothing
                    self._write(after)
            finally:
                self._lock.release()

    def _write(self, text: str) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")  # one writer per process (`_local`)
        try:
            tmp.write_text(text)
            os.replace(tmp, self.path)  # a reader never sees half a file
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot write the sweep's spend file ({exc})") from None


def _totals(lines: Any) -> tuple[float, float]:
    """(spent, reserved) over job lines; a dead job's reservations count as spent: its calls may have been
    billed, and nobody will settle them."""
    lines = list(lines)
    alive = [_alive(line) for line in lines]
    spent = sum(
        line["spent_usd"] + (0.0 if ok else line["reserved_usd"])
        for line, ok in zip(lines, alive, strict=True)
    )
    return spent, sum(line["reserved_usd"] for line, ok in zip(lines, alive, strict=True) if ok)


def _alive(line: dict[str, Any]) -> bool:
    """False for the line of a job on this machine whose process has gone (killed with calls in flight): its
    reservations are no longer in flight (they count as spent). Jobs on other machines are taken as alive."""
    pid = line.get("pid")
    if line.get("host") != socket.gethostname() or not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists (another user's process)
        return True
    return True


def read_ledger(path: Path) -> dict[str, Any]:
    """The ledger's content (an empty one if the file does not exist yet); a damaged file is a LedgerError."""
    if not path.exists():
        return {"jobs": {}, "stopped_at_usd": None}
    try:
        data = json.loads(path.read_text())
        problem = ledger_problem(data)
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not JSON, nested past the parser
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if problem:
        raise LedgerError(
            f"{path}: the sweep's spend file is damaged ({problem}); it is the only record of what this sweep "
            "spent: fix it, or run the sweep into a new folder"
        )
    data.setdefault("stopped_at_usd", None)
    return data


def _amount(value: Any) -> bool:
    """A dollar amount the ledger can hold: a finite number, not negative (a bool is not a number here)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0


def ledger_problem(data: Any) -> str | None:
    """What is wrong with a ledger's parsed content, as a short phrase; None when it is sound.

    Every amount is a finite, non-negative number: a negative `spent_usd` would hand its job's budget to the
    others (issue 25: -100 let a sweep capped at $0.20 spend $0.80)."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
        return "no jobs mapping"
    stop = data.get("stopped_at_usd")
    if stop is not None and not _amount(stop):
        return f"stopped_at_usd={stop!r} is not an amount"
    for job, line in data["jobs"].items():
        if not isinstance(line, dict):
            return f"job {job!r}: not a mapping"
        for name in ("spent_usd", "reserved_usd"):
            if not _amount(line.get(name)):
                return f"job {job!r}: {name}={line.get(name)!r} is not a non-negative amount"
    return None
