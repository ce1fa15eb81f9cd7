"""Which litellm price map a study prices its calls with, chosen by the entry points before litellm's import.

litellm loads its price map once, at import: the copy bundled with the installed litellm when
LITELLM_LOCAL_MODEL_COST_MAP is "True", else a download of the latest map (retried, then the bundled copy).
A downloaded map makes a study's plan and cost depend on the day it ran, and an offline machine spends its
start-up on retries, so the study uses the bundled map unless its config says `prices=remote`. The entry
points (`experiments.run`, `experiments.cli.entry.typed_config`) call `choose` with that setting once the
config is read and before anything imports litellm; `record` (judge.spend.pricing) then writes which map priced the
run, with the litellm version and a hash of the judge's prices, into plan.json and manifest.json.

This module imports nothing heavy: it must be importable before litellm.
"""

from __future__ import annotations

import os
import sys

ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
SOURCES = ("bundled", "remote")


def choose(source: str) -> None:
    """Make litellm load the bundled map (`bundled`, the default) or download the latest (`remote`).

    Set explicitly, so a shell's own LITELLM_LOCAL_MODEL_COST_MAP does not decide a study's prices. litellm
    reads it at import: once litellm is loaded (a later job of a -m sweep) the map it loaded stays, and
    `in_use` says which one that is."""
    if source not in SOURCES:
        raise ValueError(f"prices={source}: choose one of {', '.join(SOURCES)}")
    if "litellm" in sys.modules:
        return
    os.environ[ENV] = "True" if source == "bundled" else "False"


def in_use() -> str:
    """`bundled` or `remote`: the map litellm loads (or loaded) under the current setting."""
    return "bundled" if os.environ.get(ENV, "").strip().lower() == "true" else "remote"
