"""budget_usd across a `-m` sweep: one ledger in the sweep folder (judge.spend.ledger) that every job reserves
against, so the jobs together spend at most the cap; a real multirun (basic launcher) against a local
OpenAI-compatible server, then a rerun with a larger budget that repeats no call."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from experiments.sweep_budget import budget_stop
from judge.spend.ledger import Fit, LedgerError, SharedSpend, read_ledger
from tests.support.cli import run as run_cli
from tests.support.hostile import JSON, one_line
from tests.support.openai_server import ScriptedServer, Step, rubric_answer

ROOT = Path(__file__).resolve().parent.parent
PRICES = ["judge.input_cost_per_token=1e-5", "judge.output_cost_per_token=1e-5"]


def test_ledger_is_one_account_for_every_job(tmp_path: Path) -> None:
    path = tmp_path / "spend.json"
    a, b = SharedSpend(path, "0_a"), SharedSpend(path, "1_b")
    assert a.reserve(0.4, 1.0) is Fit.NOW and b.reserve(0.4, 1.0) is Fit.NOW
    assert b.reserve(0.3, 1.0) is Fit.LATER  # 0.8 reserved by the two jobs: 0.3 more must wait for them
    a.settle(0.4, 0.1)  # answered for 0.1
    b.settle(0.4, 0.0)  # failed: not billed
    assert a.spent_usd() == pytest.approx(0.1)
    assert b.reserve(0.3, 1.0) is Fit.NOW and b.reserve(0.65, 1.0) is Fit.LATER
    b.settle(0.3, 0.35)
    assert a.reserve(0.6, 1.0) is Fit.NEVER  # 0.45 spent: 0.6 can never fit, and the sweep stops here ...
    assert b.reserve(0.01, 1.0) is Fit.NEVER  # ... so no later call starts, even a cheap one
    assert a.reserve(0.5, 2.0) is Fit.NOW  # ... unless the cap is larger (a rerun into the same folder)
    again = SharedSpend(path, "0_a")  # job 0 started again: its predecessor's call in flight (0.5 reserved)
    line = read_ledger(path)["jobs"]["0_a"]  # may have been billed, so it counts as spent, never as freed
    assert (
        line["spent_usd"] == pytest.approx(0.6)
        and line["reserved_usd"] == 0
        and again.spent_usd() == pytest.approx(0.95)
    )

    # a job on this machine that died with calls in flight holds nothing back, and its reservations are spent
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    data = read_ledger(path)
    data["jobs"]["2_dead"] = {
        "spent_usd": 0.0,
        "reserved_usd": 0.5,
        "host": socket.gethostname(),
        "pid": dead.pid,
    }
    path.write_text(json.dumps(data))
    assert again.spent_usd() == pytest.approx(1.45)
    assert again.reserve(1.0, 3.0) is Fit.NOW and again.reserve(1.6, 3.0) is Fit.NEVER  # 1.45 spent + 1.6 > 3

    path.write_text('{"jobs": {"0_a": {"spent_usd": "lots"}}}')
    with pytest.raises(LedgerError, match=r"spend.json: the sweep's spend file is damaged"):
        a.reserve(0.1, 5.0)
    assert a.spent_usd() is None


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def _sweep(
    server: ScriptedServer, tmp_path: Path, sweep: str, budget: float, seeds: str = "0,10,20"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"JUDGESCOPE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)})
    args = [
        "-m",
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "judge.concurrency=1",
        "limit=1",
        "n_samples=2",
        "max_tokens=40",
        f"seed={seeds}",
        f"budget_usd={budget}",
        *PRICES,
        "progress=false",
        f"hydra.sweep.dir={tmp_path / sweep}",
    ]
    return run_cli(
        [sys.executable, "-m", "experiments.run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _manifests(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*/manifest.json"))]


@pytest.mark.slow  # a three-job sweep through the CLI, twice
def test_a_sweep_shares_one_budget_and_resumes_without_repeats(
    server: ScriptedServer, tmp_path: Path
) -> None:
    before = len(server.requests)
    # a job: 22 calls answered with 19 tokens each (0.0042 USD); a call reserves at most (625 prompt tokens by
    # Qwen's tokenizer + 40) * 1e-5 = 0.0067 before it starts: one job fits 0.013 on its own, two do not
    done = _sweep(server, tmp_path, "sweep1", 0.013)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "stopped: the sweep reached budget_usd=0.013" in done.stderr
    jobs = _manifests(tmp_path / "sweep1")
    assert len(jobs) == 3  # every job ran and wrote its folder
    made = len(server.requests) - before
    assert made == sum(j["calls_made"] for j in jobs) < 66  # the server saw what the manifests count
    spent = sum(j["spend_usd"] for j in jobs)
    assert 0 < spent <= 0.013 and spent == pytest.approx(made * 19 * 1e-5)
    assert all(j["budget_scope"] == "sweep" and j["sweep_spend_usd"] <= 0.013 for j in jobs)
    assert jobs[-1]["stopped"] == "budget" and jobs[-1]["sweep_spend_usd"] == pytest.approx(spent)
    assert jobs[0]["stopped"] is None and jobs[0]["calls_made"] == 22  # the first job fit
    assert 0 < jobs[1]["calls_made"] < 22 and jobs[2]["calls_made"] == 0  # the second ran into the cap
    ledger = read_ledger(tmp_path / "sweep1" / "spend.json")
    assert sum(line["spent_usd"] for line in ledger["jobs"].values()) == pytest.approx(spent)
    assert all(line["reserved_usd"] == pytest.approx(0) for line in ledger["jobs"].values())

    # the same sweep with a larger budget (a new sweep folder) continues: no call is asked twice
    again = _sweep(server, tmp_path, "sweep2", 1.0)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = _manifests(tmp_path / "sweep2")
    assert [j["stopped"] for j in resumed] == [None, None, None]
    assert sum(j["calls_cached"] for j in resumed) == made
    assert len(server.requests) - before == 66
    ids = Counter(
        json.dumps([r["messages"], r.get("seed")], sort_keys=True) for r in server.requests[before:]
    )
    assert max(ids.values()) == 1
    assert budget_stop(tmp_path / "sweep2", 1.0) is None
    assert budget_stop(tmp_path / "sweep1", 0.013) is not None


def test_reservations_of_a_job_on_another_machine_stop_the_run_instead_of_hanging_it(tmp_path: Path) -> None:
    """A job on another host that died with calls in flight: its reservations can't be released from here, so a
    call that waits on them gives up after `max_wait_s` and stops the run (never overspending, never hanging)."""
    import asyncio  # noqa: PLC0415

    from judge.spend.budget import Budget
    from judge.spend.pricing import Prices

    path = tmp_path / "spend.json"
    path.write_text(
        json.dumps(
            {
                "jobs": {
                    "9_elsewhere": {
                        "spent_usd": 0.0,
                        "reserved_usd": 0.999,
                        "host": "another-machine",
                        "pid": 1,
                    }
                }
            }
        )
    )
    shared = SharedSpend(path, "0_here")
    budget = Budget(
        1.0, "gpt-4o", Prices(1e-5, 1e-5, source="config"), max_tokens=100, shared=shared, max_wait_s=0.2
    )
    messages = [{"role": "user", "content": "word " * 50}]
    assert budget.bound(messages) > 0.001  # it fits the cap alone, but not next to the foreign reservation
    assert asyncio.run(budget.wait_start(messages)) is None
    assert budget.stopped and budget.not_started == 1
    ledger = read_ledger(path)
    assert ledger["jobs"]["0_here"]["reserved_usd"] == 0
    assert ledger["stopped_at_usd"] == 1.0  # the sweep stops with it: later jobs start nothing, and ...
    line = budget_stop(tmp_path, None)  # ... the sweep exits 3, even when budget_usd was swept (None here)
    assert line is not None and line.startswith("the sweep reached budget_usd=1")


def test_a_call_interrupted_in_flight_counts_its_reservation_as_spent() -> None:
    from judge.spend.budget import Budget
    from judge.spend.pricing import Prices

    budget = Budget(1.0, "gpt-4o", Prices(1e-5, 1e-5, source="config"), max_tokens=100)
    reserved = budget.start([{"role": "user", "content": "hello"}])
    assert reserved is not None
    budget.finish(reserved, None, interrupted=True)  # Ctrl-C: the provider may have billed it
    assert budget.spent_usd == pytest.approx(reserved) and budget.reserved_usd == 0
    failed = budget.start([{"role": "user", "content": "hello"}])
    assert failed is not None
    budget.finish(failed, None)  # a provider error after its attempts: not billed
    assert budget.spent_usd == pytest.approx(reserved)


def test_another_job_holding_the_ledger_lock_does_not_stall_this_jobs_event_loop(tmp_path: Path) -> None:
    """The ledger's lock and I/O run in a thread: while another job holds the lock, this job's other
    coroutines (calls in flight, their answers) keep running. On the event loop itself the lock wait froze
    them all, for up to the lock's 60 s timeout."""
    import asyncio
    import threading

    from judge.spend.budget import Budget
    from judge.spend.pricing import Prices

    path = tmp_path / "spend.json"
    other = SharedSpend(path, "1_other")
    budget = Budget(
        1.0, "gpt-4o", Prices(1e-5, 1e-5, source="config"), max_tokens=100, shared=SharedSpend(path, "0_here")
    )
    loop_ran, held = threading.Event(), threading.Event()
    ran_while_held: list[bool] = []

    def hold_the_lock() -> None:  # the other job, mid-update
        with other._locked():
            held.set()
            ran_while_held.append(
                loop_ran.wait(timeout=10)
            )  # released once this job's loop ran, or after 10 s

    async def main() -> float | None:
        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        await asyncio.to_thread(held.wait)
        reserve = asyncio.ensure_future(budget.wait_start([{"role": "user", "content": "hello"}]))
        await asyncio.sleep(0.01)  # the reservation is now waiting on the lock
        loop_ran.set()  # ... and the loop still runs this coroutine
        reserved = await reserve
        await asyncio.to_thread(holder.join)
        return reserved

    reserved = asyncio.run(main())
    assert ran_while_held == [True]
    assert reserved is not None and read_ledger(path)["jobs"]["0_here"]["reserved_usd"] == pytest.approx(
        reserved
    )
    asyncio.run(budget.afinish(reserved, None))
    assert read_ledger(path)["jobs"]["0_here"]["reserved_usd"] == 0


@pytest.mark.parametrize("cancels", [1, 2])
def test_a_call_cancelled_while_its_reservation_waits_on_the_lock_leaves_none_in_the_ledger(
    tmp_path: Path, cancels: int
) -> None:
    """Review 3, finding 8: the reservation runs in a thread; a task cancelled (Ctrl-C, shutdown) while that
    thread waits on the ledger's lock never sends its call, so what the thread reserves once the lock is free is
    settled at 0. It stayed reserved, and a rerun of the job counted it as spent. A second cancel during the
    wait (a second Ctrl-C) changes nothing."""
    import asyncio
    import threading

    from judge.spend.budget import Budget
    from judge.spend.pricing import Prices

    path = tmp_path / "spend.json"
    other = SharedSpend(path, "1_other")
    shared = SharedSpend(path, "0_here")
    budget = Budget(1.0, "gpt-4o", Prices(1e-5, 1e-5, source="config"), max_tokens=100, shared=shared)
    held, release, asked = threading.Event(), threading.Event(), threading.Event()
    reserve = shared.reserve

    def reserve_after_asking(amount: float, limit_usd: float) -> Fit:
        asked.set()  # this job's thread is about to wait on the lock the other job holds
        return reserve(amount, limit_usd)

    shared.reserve = reserve_after_asking  # type: ignore[method-assign]

    def hold_the_lock() -> None:  # the other job, mid-update, until the test lets go (or 10 s)
        with other._locked():
            held.set()
            release.wait(timeout=10)

    async def main() -> None:
        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        await asyncio.to_thread(held.wait)
        task = asyncio.ensure_future(budget.wait_start([{"role": "user", "content": "hello"}]))
        await asyncio.to_thread(asked.wait)
        for _ in range(cancels):
            task.cancel()
            await asyncio.sleep(0)  # let the task take the cancellation before the next one
        release.set()  # the thread now reserves (NOW): the budget is far from spent
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(holder.join)

    asyncio.run(main())  # returns once every thread of this run has finished
    line = read_ledger(path)["jobs"]["0_here"]
    assert line["reserved_usd"] == 0 and line["spent_usd"] == 0, line
    assert budget.reserved_usd == 0 and budget.spent_usd == 0


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"jobs": {"0_a": {"spent_usd": -100.0, "reserved_usd": 0}}}, "spent_usd=-100.0 is not a non-neg"),
        ({"jobs": {"0_a": {"spent_usd": 0.0, "reserved_usd": -1}}}, "reserved_usd=-1 is not a non-negative"),
        ({"jobs": {"0_a": {"spent_usd": True, "reserved_usd": 0}}}, "spent_usd=True is not"),
        ({"jobs": {"0_a": 3}}, "job '0_a': not a mapping"),
        ({"jobs": {}, "stopped_at_usd": "soon"}, "stopped_at_usd='soon' is not an amount"),
        ([1, 2], "no jobs mapping"),
    ],
)
def test_a_damaged_ledger_is_refused_in_one_line(tmp_path: Path, content: object, problem: str) -> None:
    """Issue 25 #12: a negative spent_usd was accepted (budget 0.2, the sweep spent 0.80 and sweep_spend_usd read
    -99.2): every amount must be a finite, non-negative number, else one line naming the file."""
    path = tmp_path / "spend.json"
    path.write_text(json.dumps(content))
    with pytest.raises(LedgerError) as caught:
        SharedSpend(path, "1_b")
    line = str(caught.value)
    assert line.startswith(f"{path}: the sweep's spend file is damaged") and problem in line
    assert "\n" not in line
    assert json.loads(path.read_text()) == content  # refused, never rewritten


@pytest.mark.slow  # two two-job sweeps through the CLI
def test_a_sweep_started_while_another_holds_its_folder_takes_its_own(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Issue 25 #9: two sweeps started in the same second shared one folder, its spend.json (one made 0 calls
    yet stopped on budget, carrying the other's spend) and multirun.yaml. A folder a live sweep holds (here:
    a running process's claim) makes this sweep take `<folder>-2`, jobs, ledger and multirun.yaml included."""
    from experiments.outputs import SWEEP_CLAIM

    held = tmp_path / "sweep"
    held.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (held / SWEEP_CLAIM).write_text(f"{socket.gethostname()}:{other.pid}")
        out = _sweep(server, tmp_path, "sweep", 5.0, seeds="0,10")
    finally:
        other.kill()
        other.wait()
    assert out.returncode == 0, out.stderr[-2000:]
    own = tmp_path / "sweep-2"
    assert f"this sweep writes to {own}" in out.stderr
    assert not [p for p in held.iterdir() if not p.name.startswith(SWEEP_CLAIM)]  # the other's: untouched
    assert (own / "multirun.yaml").exists() and (own / "spend.json").exists()
    jobs = read_ledger(own / "spend.json")["jobs"]
    assert len(jobs) == 2 and len(_manifests(own)) == 2
    assert not (own / SWEEP_CLAIM).exists()  # released at the end


def test_a_sweep_folder_is_claimed_unless_a_live_sweep_holds_it(tmp_path: Path) -> None:
    """Issue 25 #9, the rule: a live holder sends the sweep to `<folder>-2`; a holder that has ended (killed,
    or released at its end) leaves the folder to a rerun, which continues its ledger."""
    from experiments.outputs import SWEEP_CLAIM, claim_sweep_folder, release_sweep_folder

    folder = tmp_path / "sweep"
    assert claim_sweep_folder(folder) == folder and claim_sweep_folder(folder) == folder  # ours already
    release_sweep_folder(folder)
    assert not (folder / SWEEP_CLAIM).exists()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (folder / SWEEP_CLAIM).write_text(f"{socket.gethostname()}:{live.pid}")
        assert claim_sweep_folder(folder) == tmp_path / "sweep-2"
        assert claim_sweep_folder(folder) == tmp_path / "sweep-2"  # ours now
    finally:
        live.kill()
        live.wait()
    assert claim_sweep_folder(folder) == folder  # its holder was killed: a rerun takes it over
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / SWEEP_CLAIM).write_text("another-machine:12")  # can't be checked: taken as live
    assert claim_sweep_folder(tmp_path / "other") == tmp_path / "other-2"


# --- a hostile ledger (issue 25): a sweep's spend.json, whatever it holds ---

AMOUNT = st.one_of(
    st.floats(allow_nan=True), st.integers(-(10**6), 10**6), st.booleans(), st.none(), st.text(max_size=4)
)
LEDGER_LINE = st.fixed_dictionaries(
    {"spent_usd": AMOUNT, "reserved_usd": AMOUNT}, optional={"pid": JSON, "host": JSON}
)
LEDGERS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"jobs": st.dictionaries(st.text(max_size=6), LEDGER_LINE | JSON, max_size=3)},
        optional={"stopped_at_usd": AMOUNT},
    ),
)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(content=LEDGERS)
def test_a_hostile_ledger_is_sound_or_refused_in_one_line(
    content: object, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A sweep's spend.json, whatever it holds: read with every amount a finite, non-negative number (so no
    job's spend can hand budget to another), or refused in one line naming the file."""
    import math

    from judge.spend.ledger import LedgerError, SharedSpend, read_ledger

    path = tmp_path_factory.mktemp("ledger") / "spend.json"
    path.write_text(json.dumps(content))
    try:
        ledger = read_ledger(path)
        SharedSpend(path, "0_job").reserve(0.01, 1.0)
    except LedgerError as exc:
        assert one_line(str(exc)) and str(exc).startswith(str(path)), exc
        return
    amounts = [line[k] for line in ledger["jobs"].values() for k in ("spent_usd", "reserved_usd")]
    amounts += [] if ledger["stopped_at_usd"] is None else [ledger["stopped_at_usd"]]
    assert all(
        isinstance(a, int | float) and not isinstance(a, bool) and math.isfinite(a) and a >= 0
        for a in amounts
    )
