"""A run's output folder: its own (never another run's), writable before the first paid call, and written
all or nothing.

- `claim_folder`: Hydra names a run's folder after the second it started, so two runs started in the same
  second get the same name. A run claims its folder by creating `.judgescope-run` exclusively (O_EXCL, atomic
  on every local file system); a folder another run holds makes this run take `<name>-2`, `<name>-3`, ...
  Creating the claim is also the check that the folder can be written, before any call is paid for.
- `write_outputs`: every output goes to a hidden temporary file first; only when all were written are they
  renamed into place. A failed write (disk full, a vanished folder) removes every temporary file and raises
  `OutputError`, so a run folder never holds half a run. The call cache keeps every answer paid for, so the
  same command reruns at no cost once there is room.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from filelock import FileLock, Timeout

from experiments.inputs import StudyError

CLAIM = ".judgescope-run"
MAX_SIBLINGS = 1000
LOCK_TIMEOUT_S = 60.0


class OutputError(StudyError):
    """The output folder cannot be used or written; the message is one line naming it and what to do."""


def _reason(exc: OSError) -> str:
    """The system's words for the error (Arrow puts its own message where strerror usually is)."""
    if isinstance(exc.errno, int) and exc.errno > 0:
        return os.strerror(exc.errno)
    return (str(exc).splitlines() or [type(exc).__name__])[0][:120]


def _try_claim(folder: Path) -> bool:
    """Create the claim in `folder` (made if missing); False when another run already holds it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{folder}: the output folder is a file; choose another hydra.run.dir") from None
    except OSError as exc:
        raise OutputError(
            f"{folder}: cannot create the output folder ({_reason(exc)}); choose another hydra.run.dir"
        ) from None
    try:
        fd = os.open(folder / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return (folder / CLAIM).read_text(errors="replace").strip() == str(os.getpid())  # ours already
    except OSError as exc:
        raise OutputError(
            f"{folder}: the output folder cannot be written ({_reason(exc)}); nothing was "
            "called; choose another hydra.run.dir"
        ) from None
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(str(os.getpid()))
    except OSError as exc:
        release_folder(folder)
        raise OutputError(
            f"{folder}: the output folder cannot be written ({_reason(exc)}); nothing was "
            "called; free some space or choose another hydra.run.dir"
        ) from None
    return True


def claim_folder(folder: Path, *, exact: bool = False) -> Path:
    """This run's own output folder: `folder`, else the first free `<folder>-N` (see the module doc).

    With `exact`, only `folder` itself will do (a caller that chose it): another run's folder is an error."""
    for n in range(1, MAX_SIBLINGS + 1):
        candidate = folder if n == 1 else folder.with_name(f"{folder.name}-{n}")
        if _try_claim(candidate):
            return candidate
        if exact:
            raise OutputError(f"{folder}: another run's output folder; choose another one")
    raise OutputError(
        f"{folder}: {MAX_SIBLINGS} runs already hold this folder name; choose another hydra.run.dir"
    )


def release_folder(folder: Path) -> None:
    """Undo a claim whose run wrote nothing: drop the claim, then the folder if that left it empty."""
    with contextlib.suppress(OSError):
        (folder / CLAIM).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


SWEEP_CLAIM = ".judgescope-sweep"


def _holder(folder: Path) -> str | None:
    """`host:pid` of the live sweep that holds `folder`, or None (free, or its sweep has ended)."""
    try:
        text = (folder / SWEEP_CLAIM).read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return None
    except OSError:
        return "unknown"
    host, _, pid = text.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return text or "unknown"  # another machine's sweep (or a claim being written): taken as live
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return None  # that sweep ended without releasing (killed): its folder may be reused, as a rerun does
    except OSError:
        return text
    return None if int(pid) == os.getpid() else text


def claim_sweep_folder(folder: Path) -> Path:
    """This sweep's own folder: `folder`, else the first `<folder>-N` no live sweep holds. Hydra names a sweep
    folder after the second it started, so two sweeps started in the same second shared one folder, its
    spend.json (one's budget stopped the other) and multirun.yaml. A sweep rerun into the folder of a sweep
    that has ended takes it over (its ledger goes on)."""
    for n in range(1, MAX_SIBLINGS + 1):
        candidate = folder if n == 1 else folder.with_name(f"{folder.name}-{n}")
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            with FileLock(str(candidate / f"{SWEEP_CLAIM}.lock"), timeout=LOCK_TIMEOUT_S):
                if _holder(candidate) is not None:
                    continue
                owner = f"{socket.gethostname()}:{os.getpid()}"
                (candidate / SWEEP_CLAIM).write_text(owner, encoding="utf-8")
        except (OSError, Timeout) as exc:
            line = f"{candidate}: cannot claim the sweep folder ({exc}); choose another hydra.sweep.dir"
            raise OutputError(line) from None
        return candidate
    raise OutputError(f"{folder}: {MAX_SIBLINGS} sweeps already hold this folder name; choose another one")


def release_sweep_folder(folder: Path) -> None:
    """The sweep has ended: its folder may be claimed by a rerun."""
    if _holder(folder) is None:
        with contextlib.suppress(OSError):
            (folder / SWEEP_CLAIM).unlink()


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Write through a temporary file and rename, so a crash never leaves a half-written output."""
    write_outputs(path.parent, {path.name: write})


def write_outputs(folder: Path, writers: Mapping[str, Callable[[Path], object]]) -> None:
    """Write every `name -> writer(path)` into `folder`, all or nothing (see the module doc)."""
    done: list[tuple[Path, Path]] = []
    try:
        for name, write in writers.items():
            tmp = folder / f".{name}.tmp"
            done.append((tmp, folder / name))
            write(tmp)
    except OSError as exc:
        for tmp, _ in done:
            with contextlib.suppress(OSError):
                tmp.unlink()
        raise OutputError(
            f"{folder}: could not write {done[-1][1].name} ({_reason(exc)}); nothing of this run "
            "was written; every answer is cached: rerun the same command once the folder can be "
            "written (no call is paid twice)"
        ) from None
    for tmp, path in done:
        os.replace(tmp, path)
