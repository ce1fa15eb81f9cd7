"""Where the call cache's entries live: a folder (diskcache, the default) or a Redis server.

diskcache is SQLite, safe for many processes on one host but not on a network filesystem shared by many hosts;
several machines share a Redis server instead (`cache.backend=redis cache.url=redis://host:6379/0`). Both hold
the same keys and the same checksummed values (`judge.cache.store.CallCache` writes and verifies them), so entries
move between them unchanged. A Redis that cannot be reached is a `CacheError` with one line - at start-up and
at any later call - never a miss: a dead cache must not turn into a storm of paid provider calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from judge.cache.store import CacheError, CallCache

BACKENDS = ("disk", "redis")


def public_url(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


class RedisStore:
    """Entries in a Redis database: one string value per key, exactly as the disk cache stores it."""

    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        import redis  # noqa: PLC0415 (only Redis users need it)
        from redis.backoff import ExponentialBackoff  # noqa: PLC0415
        from redis.retry import Retry  # noqa: PLC0415

        self.url = url
        self.location = public_url(url)
        self._errors: tuple[type[BaseException], ...] = (redis.exceptions.RedisError, OSError)
        try:
            # a short blip is retried (3 times, backoff up to 1 s); a dead server fails within seconds
            self._redis = redis.Redis.from_url(
                url,
                decode_responses=True,
                socket_connect_timeout=timeout_s,
                socket_timeout=timeout_s,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.1), 3),
                retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
            )
            self._redis.ping()
        except (ValueError, *self._errors) as exc:
            raise self._error("cannot reach", exc) from None

    def _error(self, what: str, exc: BaseException) -> CacheError:
        reason = str(exc).replace(self.url, self.location).splitlines()[0] if str(exc) else type(exc).__name__
        return CacheError(
            f"{self.location}: {what} the Redis call cache ({reason}); start the server or fix "
            "cache.url (cache.backend=disk uses a local folder instead)"
        )

    def get(self, key: str) -> Any:
        try:
            return self._redis.get(key)
        except self._errors as exc:
            raise self._error("cannot read", exc) from None

    def set(self, key: str, value: str) -> None:
        try:
            self._redis.set(key, value)
        except self._errors as exc:
            raise self._error("cannot write", exc) from None

    def delete(self, key: str) -> None:
        try:
            self._redis.delete(key)
        except self._errors as exc:
            raise self._error("cannot write", exc) from None

    def __contains__(self, key: str) -> bool:
        try:
            return bool(self._redis.exists(key))
        except self._errors as exc:
            raise self._error("cannot read", exc) from None

    def __len__(self) -> int:
        try:
            return int(self._redis.dbsize())
        except self._errors as exc:
            raise self._error("cannot read", exc) from None

    def close(self) -> None:
        self._redis.close()

    def reopen(self) -> RedisStore:
        return RedisStore(self.url)


def open_cache(
    backend: str = "disk", url: str | None = None, directory: str | Path | None = None
) -> CallCache:
    """The call cache a config asks for: `cache.backend` disk (the `cache_dir` folder) or redis (a server at
    `cache.url`); a wrong setting or an unreachable cache is a one-line CacheError. The answers an earlier run
    could not write to it (its journal, judge.cache.store) are imported first."""
    if backend not in BACKENDS:
        raise CacheError(f"cache.backend={backend}: unknown backend; choose one of {', '.join(BACKENDS)}")
    if backend == "redis" and not url:
        raise CacheError(
            "cache.url: cache.backend=redis needs a server URL, e.g. cache.url=redis://127.0.0.1:6379/0"
        )
    cache = CallCache(directory) if backend == "disk" else CallCache(store=RedisStore(str(url)))
    try:
        cache.replay_journal()
    except CacheError:
        cache.close()
        raise
    return cache
