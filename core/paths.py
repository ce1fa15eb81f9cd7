"""Where judgescope keeps its caches in the user's home: one rule for all of them (calls, the embedded model,
the packaged MPNet, perplexities), so ``$XDG_CACHE_HOME`` moves every one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def user_cache(*parts: str) -> Path:
    """``$XDG_CACHE_HOME/judgescope/<parts>``, or ``~/.cache/judgescope/<parts>``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base, "judgescope", *parts)


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (the checksums of the cached model files and fetched data)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
