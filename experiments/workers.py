"""Spread a run's provider calls over worker processes (two per CPU core, up to 4, by default).

litellm spends several milliseconds of CPU per call, so on a small machine one Python process tops out well
below what a fast provider (or a local server) answers. `run_in_workers` forks N workers after the cache has
been read; each takes the next uncached call from a counter they share whenever one of its runners is free
(so no worker idles while another still has a queue), runs it through the same `Judge.call_provider` path
(retry policy, its own connection to the shared cache folder, its share of the concurrency limit) on its own
event loop, and sends the `CallResult`s back through a pipe (bundled every 50 ms). The parent turns results
into rows as they arrive.

Failure handling: a fatal provider error or a cache error in a worker stops the run with that message (the
other workers are stopped; what they finished is cached); a worker that dies is reported with its exit code.
Workers die with their parent (PR_SET_PDEATHSIG on Linux, plus a parent-pid watchdog), so a killed run never
leaves orphans that keep calling the provider. Fork only (Linux): elsewhere the calls stay in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from judge.cache.store import CacheError
from judge.calls import Call, call_taken
from judge.client import CallResult, Judge
from judge.retry import FatalProviderError
from judge.secrets import redact
from judge.speedups import frozen_heap

_PR_SET_PDEATHSIG = 1
_WATCHDOG_S = 0.5
FLUSH_S = 0.05  # how long a worker holds results before sending them to the parent together


def fork_available() -> bool:
    """Workers are forked (they inherit the loaded modules and prompts at no cost); Linux only."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def in_process_provider(model: str) -> bool:
    """True when litellm serves `model` inside this process (a registered custom provider)."""
    import litellm  # noqa: PLC0415

    prefix = model.split("/", 1)[0]
    return any(entry.get("provider") == prefix for entry in getattr(litellm, "custom_provider_map", []) or [])


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; then check it has not died already."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


async def _watch_parent(parent_pid: int) -> None:
    while True:
        await asyncio.sleep(_WATCHDOG_S)
        if os.getppid() != parent_pid:
            os._exit(1)


def _taker(calls: Sequence[Call], counter: Any) -> Callable[[], Call | None]:
    """`take()`: the next call no process has taken yet (`counter` is shared by the workers), None at the end."""

    def take() -> Call | None:
        with counter.get_lock():
            index = counter.value
            if index >= len(calls):
                return None
            counter.value = index + 1
        return calls[index]

    return take


class _Outbox:
    """Results on their way to the parent, sent together at most every FLUSH_S: one pipe write per call woke the
    parent each time, and on a busy machine the writing worker then lost its CPU to it (~0.7 ms a call, with its
    event loop stopped). The answers themselves are already cached when they wait here."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.items: list[tuple[int, CallResult]] = []
        self.timer: asyncio.TimerHandle | None = None

    def add(self, call: Call, result: CallResult) -> None:
        self.items.append((call.index, result))
        if self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.items:
            items, self.items = self.items, []
            self.conn.send(("results", items, None))


def _worker(
    judge: Judge, calls: Sequence[Call], counter: Any, concurrency: int, conn: Connection, parent_pid: int
) -> None:
    """Body of one worker process: calls taken from the shared queue on its own event loop, the results sent to
    the parent in small bundles."""
    _die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it stops us
    # a fresh connection to the cache folder: SQLite connections must not cross a fork
    mine = Judge(
        judge.completer,
        judge.cache.reopen(),
        policy=judge.policy,
        concurrency=concurrency,
        api_base=judge.api_base,
    )

    outbox = _Outbox(conn)

    async def main() -> None:
        watchdog = asyncio.create_task(_watch_parent(parent_pid))
        try:
            # one runner per request slot: a call waiting out a retry's back-off keeps its slot empty, so a
            # provider that asked for patience gets fewer requests meanwhile
            await call_taken(mine, _taker(calls, counter), concurrency, outbox.add)
        finally:
            watchdog.cancel()
            outbox.flush()  # everything answered reaches the parent, before "done" or the error

    try:
        asyncio.run(main())
        mine.cache.close()
        conn.send(("done", None, None))
    except (FatalProviderError, CacheError) as exc:
        conn.send(("fatal", type(exc).__name__, str(exc)))
    except BaseException as exc:  # noqa: BLE001  (reported to the parent, which raises it)
        conn.send(("crash", type(exc).__name__, redact("".join(traceback.format_exception(exc))[-4000:])))
    finally:
        conn.close()


@contextlib.contextmanager
def _reaped(procs: dict[Connection, Any]) -> Iterator[None]:
    """On the way out (normally or on an error) no worker is left running."""
    try:
        yield
    finally:
        for proc in procs.values():
            proc.kill()
        for proc in procs.values():
            proc.join(timeout=5)


def run_in_workers(
    judge: Judge, calls: Sequence[Call], n_workers: int, settle: Callable[[Call, CallResult], None]
) -> None:
    """Make `calls` in `n_workers` forked processes; `settle(call, result)` runs here as each one finishes."""
    ctx = multiprocessing.get_context("fork")
    by_index = {c.index: c for c in calls}
    shares = [judge.concurrency // n_workers + (w < judge.concurrency % n_workers) for w in range(n_workers)]
    procs: dict[Connection, Any] = {}
    parent_pid = os.getpid()
    counter = ctx.Value("q", 0)  # the index of the next call to take, shared by the workers
    # objects that exist now (litellm's lazily imported state included) go to a permanent GC generation
    # (judge.speedups.frozen_heap, nested in the study's), so a worker's collections do not touch (and
    # copy-on-write) the parent's whole heap
    with frozen_heap(), _reaped(procs):
        for w in range(n_workers):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=_worker,
                args=(judge, calls, counter, max(1, shares[w]), writer, parent_pid),
                name=f"judgescope-worker-{w}",
                daemon=True,
            )
            proc.start()
            writer.close()
            procs[reader] = proc
        while procs:
            for conn in wait(list(procs)):
                assert isinstance(conn, Connection)
                try:
                    kind, a, b = conn.recv()
                except EOFError:
                    proc = procs.pop(conn)
                    proc.join()
                    raise RuntimeError(
                        f"{proc.name} died (exit code {proc.exitcode}); rerun the same command "
                        "to resume from the cache"
                    ) from None
                if kind == "results":
                    for index, result in a:
                        settle(by_index[index], result)
                elif kind == "done":
                    procs.pop(conn).join()
                elif kind == "fatal":
                    raise (FatalProviderError if a == "FatalProviderError" else CacheError)(b)
                else:
                    raise RuntimeError(f"a worker failed with {a}:\n{b}")
