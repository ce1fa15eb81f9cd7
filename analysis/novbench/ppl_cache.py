"""A disk cache for the perplexities behind NovBench's Fluency (FS), so a rerun costs no model time.

Perplexity is a pure function of (model, text, truncation), so each value is stored under a key made of the
three; a different model or truncation never reuses another's value. The folder is a ``diskcache.Cache``
(SQLite WAL, safe for several processes), by default ``~/.cache/judgescope/ppl``.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import diskcache

from core.paths import user_cache

PplFn = Callable[[list[str]], Sequence[float]]


def default_directory() -> Path:
    """``$JUDGESCOPE_PPL_CACHE``, else judgescope's ``ppl`` cache folder (``core.paths.user_cache``)."""
    env = os.environ.get("JUDGESCOPE_PPL_CACHE")
    return Path(os.path.expanduser(env)) if env else user_cache("ppl")


def model_file_id(path: Path) -> str:
    """The first 16 hex digits of the model file's SHA-256: a file with the same name and size but other
    weights never reuses another's perplexities. Hashed once per process and file version (size, time, inode: a reinstall writes a new file) (~0.2 s for the
    98 MB GGUF)."""
    stat = path.stat()
    return _digest(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino)


@lru_cache(maxsize=8)
def _digest(path: str, size: int, mtime_ns: int, inode: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()[:16]}"


class CachedPerplexity:
    """``fn`` wrapped so each distinct text is computed once, ever, per ``model_id``.

    ``n_computed`` counts texts actually sent to ``fn`` (for tests and reports).
    """

    def __init__(self, fn: PplFn, model_id: str, directory: Path) -> None:
        self.fn = fn
        self.model_id = model_id
        self.model_name = model_id
        self.directory = directory
        self.n_computed = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def __call__(self, texts: list[str]) -> list[float]:
        with diskcache.Cache(str(self.directory)) as cache:
            keys = [self._key(t) for t in texts]
            found: dict[str, float] = {}
            for k in dict.fromkeys(keys):
                value = cache.get(k)
                if isinstance(value, float):
                    found[k] = value
            todo = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
            if todo:
                values = [float(v) for v in self.fn(todo)]
                if len(values) != len(todo):
                    raise ValueError(
                        f"perplexity function returned {len(values)} values for {len(todo)} texts"
                    )
                self.n_computed += len(todo)
                for text, value in zip(todo, values, strict=True):
                    found[self._key(text)] = value
                    if not math.isnan(value):  # NaN = nothing to predict; cheap to recompute, never stored
                        cache.set(self._key(text), value)
            return [found[k] for k in keys]
