"""What every command-line entry point does around Hydra, so no stage leaks a key or shows a traceback.

Before Hydra reads the command line (`start`): stdout and stderr scrub every known secret, each credential
on the command line is learnt and moved out of Hydra's sight (experiments.cli.secrets), and a
problem with the command line is one line, exit 2. Inside the task function (`run_stage`): the config's
secrets are learnt, library logs are scrubbed, and every problem a user can cause or meet is one line:
exit 2 for the inputs or a fatal provider answer, 130 for Ctrl-C (every answer received is cached), with
no empty run folder left behind.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

from omegaconf import DictConfig

from experiments.config import as_dict, command_line_problem, load
from judge.secrets import install_log_redaction, redact_std_streams, remember_secrets
from judge.spend.price_map import choose

T = TypeVar("T")
C = TypeVar("C")
INTERRUPTED = (
    "interrupted: every answer received so far is cached; rerun the same command to resume (no call "
    "is paid twice)"
)


def start(config_name: str, *checks: Callable[[list[str]], str | None]) -> None:
    """The `__main__` of an entry point, before Hydra: scrubbed streams, credentials hidden from Hydra, and
    `checks` (then the typed model's `command_line_problem`) answered in one line."""
    # hydra's override parser: only an entry point's `__main__` needs it
    from experiments.cli.secrets import hide_secret_overrides

    redact_std_streams()
    try:
        sys.argv[1:] = hide_secret_overrides(
            sys.argv[1:], os.environ
        )  # Hydra prints and writes its overrides
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    for check in (*checks, lambda argv: command_line_problem(argv, config_name)):
        problem = check(sys.argv[1:])
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            sys.exit(2)


def typed_config(cfg: DictConfig, schema: type[C]) -> C:
    """The composed config as its frozen, typed object (experiments.config), its secrets learnt and library
    logs scrubbed; litellm's price map chosen (`prices`, judge.spend.price_map) before litellm is imported."""
    typed = load(cfg, schema)
    remember_secrets(as_dict(typed))
    choose(typed.prices.value)  # type: ignore[attr-defined]
    install_log_redaction()
    from judge import speedups  # after `choose`: this imports litellm

    speedups.install()
    return typed


def run_stage(body: Callable[[C], T], cfg: DictConfig, out_dir: Path, schema: type[C]) -> T:
    """`body(typed config)` with every user-facing failure as one line (see the module doc)."""
    # litellm (judge.cache.store, judge.retry) and pandas (experiments.inputs): after `start`'s checks
    from experiments.inputs import StudyError
    from judge.cache.store import CacheError
    from judge.retry import FatalProviderError

    try:
        return body(typed_config(cfg, schema))
    except KeyboardInterrupt:
        _fail(out_dir, INTERRUPTED, 130)
    except (
        StudyError,
        ValueError,
        FatalProviderError,
        CacheError,
        OSError,
    ) as exc:  # ConfigError: ValueError
        _fail(out_dir, f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", 2)


def _fail(out_dir: Path, line: str, code: int) -> NoReturn:
    remove_if_empty(out_dir)
    print(line, file=sys.stderr)
    sys.exit(code)


def remove_if_empty(folder: Path) -> None:
    """Nothing partial is left behind: drop the run folder Hydra made if the stage wrote nothing, and the
    date folders above it that this left empty (never the working folder or anything outside it)."""
    here = Path.cwd().resolve()
    for path in [folder.resolve(), *folder.resolve().parents]:
        if path == here or here not in path.parents:
            return
        try:
            path.rmdir()
        except OSError:
            return
