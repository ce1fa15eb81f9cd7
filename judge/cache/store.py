"""On-disk cache of completions, keyed so that a rerun with the same config makes zero provider calls.

The key covers everything that changes an answer: model (and endpoint), rendered messages, every parameter
of the request actually sent (`Completer.request_params`: decoding parameters, the response format, the
judge's `extra`), the sample index and the rubric version. Secrets never enter the key or the value. The key
format has not changed since v0.1: a request that sends nothing new keeps its old key (its cached answer).

Each value is stored as `<checksum>\n<completion JSON>`, the checksum covering the key and the JSON, so an
entry damaged on disk - or one that an index corruption hands back for another key - is detected, dropped and
asked for again, never used. A cache whose database cannot be read at all raises `CacheError` with the folder
and what to do. Several processes may share one folder (SQLite in WAL mode, one connection per process).

An answer the cache cannot take (Redis gone, the disk cache full) is not dropped: it goes to a local journal
(`journal_dir`, one JSON line per answer, flushed to disk) before the one-line CacheError stops the run, and the
next run that opens the same cache imports the journal first - so the answers received or in flight when the
run stopped are never asked for (and paid) again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import sqlite3
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import diskcache

from core.paths import user_cache
from judge.secrets import endpoint
from judge.types import Completion, Message, TextStore, TokenLogprob

# keys per bulk read (SQLite's default limit on a query's parameters is 32,766; older builds 999)
READ_PER_QUERY = 900
_UNREAD = object()  # read_many: an entry the bulk query leaves to `read`

# the entry's member holding the parsed scores beside the answer (older readers ignore it: entry_completion)
PARSED = "parsed"
SECRET_PARAMS = frozenset({"api_key", "api_token", "azure_ad_token", "aws_secret_access_key"})


class CacheError(RuntimeError):
    """The cache folder cannot be used; the message names the folder and what to do."""


class EntryError(ValueError):
    """A cache entry that is not a valid completion; the message names the field and what is wrong."""


KEEP_PER_TRANSACTION = 2000  # entries written back per SQLite transaction (CallCache.keep_parsed)
MAX_TOKENS = 2**53  # a token count at or above this is no count (as judge.completer.token_count)


def _count(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if type(value) is not int or not 0 <= value < MAX_TOKENS:
        raise EntryError(f"{name} must be a whole number of tokens >= 0, not {value!r:.40}")
    return value


def _amount(data: Mapping[str, Any], name: str, *, optional: bool) -> float | None:
    value: Any = data.get(name)
    if value is None and optional:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        allowed = "a finite number >= 0" + (" or null" if optional else "")
        raise EntryError(f"{name} must be {allowed}, not {value!r:.40}")
    return float(value) if type(value) is int else value


def _logprobs(value: Any) -> tuple[TokenLogprob, ...] | None:
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise EntryError(f"logprobs must be a list, not {type(value).__name__}")
    out = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)) or not _pairs(
            item[1]
        ):
            raise EntryError(f"logprobs: {item!r:.60} is not [token, [[token, logprob], ...]]")
        out.append(TokenLogprob(item[0], tuple((t, float(lp)) for t, lp in item[1])))
    return tuple(out)


def _pairs(value: Any) -> bool:
    """A list of [token, log-probability] pairs."""
    return isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and type(p[1]) in (int, float)
        for p in value
    )


_REQUIRED_ORDER = tuple(k for k in Completion.__dataclass_fields__ if k != "logprobs")
_REQUIRED = frozenset(_REQUIRED_ORDER)  # the members every entry has


def entry_completion(data: Any) -> Completion:
    """The one schema of a cache entry, wherever it is stored (a folder, Redis, an export): a JSON object
    with a text, a finish reason (text or null), token counts >= 0, a cost >= 0 (or null), a latency >= 0 and
    optional log-probabilities. Anything else is an EntryError naming the field: never a Completion that a
    later step trips over, and never a negative cost in the totals."""
    if type(data) is not dict and not isinstance(data, Mapping):  # a JSON object is a dict: no ABC check
        raise EntryError(f"not a JSON object but {type(data).__name__}")
    if not data.keys() >= _REQUIRED:
        raise EntryError(f"missing {', '.join(k for k in _REQUIRED_ORDER if k not in data)}")
    if not isinstance(data["text"], str):
        raise EntryError(f"text must be text, not {type(data['text']).__name__}")
    finish = data["finish_reason"]
    if finish is not None and not isinstance(finish, str):
        raise EntryError(f"finish_reason must be text or null, not {type(finish).__name__}")
    return Completion(
        text=data["text"],
        finish_reason=finish,
        prompt_tokens=_count(data, "prompt_tokens"),
        completion_tokens=_count(data, "completion_tokens"),
        cost_usd=_amount(data, "cost_usd", optional=True),
        latency_s=_amount(data, "latency_s", optional=False) or 0.0,
        logprobs=_logprobs(data.get("logprobs")),
    )


def parse_entry(key: str, value: Any, *, checksummed: bool = False) -> Completion:
    """A stored value (`<checksum>\n<completion JSON>`) as a Completion, verified against `key`; an
    EntryError says why not. `checksummed`: a value without its checksum line is refused (every Redis
    value and export line has one; only folders written before checksums existed hold bare JSON)."""
    return read_entry(key, value, checksummed=checksummed)[0]


def read_entry(key: str, value: Any, *, checksummed: bool = False) -> tuple[Completion, Any]:
    """`parse_entry`, with the parsed scores stored beside the answer (the entry's `parsed` member, None when
    absent): what a study keeps so that a replay does not parse the same answer again (experiments.rows)."""
    if not isinstance(value, str):
        raise EntryError(f"not text but {type(value).__name__}")
    checksum, sep, payload = value.partition("\n")
    if not sep and checksummed:
        raise EntryError("no checksum line")
    if sep and checksum != _checksum(key, payload):
        raise EntryError("checksum mismatch")
    try:
        data = json.loads(payload if sep else value)
    except ValueError as exc:
        raise EntryError(f"not JSON ({exc})") from None
    return entry_completion(data), data.get(PARSED)  # entry_completion refused anything but a mapping


def default_cache_dir() -> Path:
    """`$JUDGESCOPE_CACHE_DIR`, else the user's cache dir (never the repository)."""
    env = os.environ.get("JUDGESCOPE_CACHE_DIR")
    return Path(env).expanduser() if env else user_cache("calls")


def journal_dir(location: str) -> Path:
    """The local folder keeping the answers a cache at `location` could not take: `$JUDGESCOPE_JOURNAL_DIR`,
    else beside the default cache folder (`calls-journal`), one subfolder per cache."""
    env = os.environ.get("JUDGESCOPE_JOURNAL_DIR")
    default = default_cache_dir()
    root = Path(env).expanduser() if env else default.with_name(f"{default.name}-journal")
    return root / hashlib.sha256(location.encode()).hexdigest()[:16]


def _alive(pid: int) -> bool:
    """Whether another process with this id still runs (its journal may still be growing)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours
        return True
    return True


# one encoder: json.dumps with non-default options builds a new JSONEncoder on every call
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
_dumps = _ENCODER.encode  # == json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_params(params: Mapping[str, Any]) -> str:
    """The decoding parameters as they enter the key: canonical JSON, secrets dropped.

    A study asks for it once per distinct (parameters, sample) pair and passes it to `cache_key`, instead of
    re-serialising the same structured-output schema for every call."""
    return _dumps({k: v for k, v in params.items() if k not in SECRET_PARAMS})


def _head_text(api_base: str | None, messages: Sequence[Any], model: str) -> bytes:
    """The key's JSON up to the parameters; `messages` are mappings or their `items()` tuples."""
    messages_json = _dumps([dict(m) for m in messages])
    return f'{{"api_base":{_dumps(api_base)},"messages":{messages_json},"model":{_dumps(model)},"params":'.encode()


@functools.lru_cache(maxsize=4096)
def _head_hash(api_base: str | None, messages: tuple[tuple[tuple[str, Any], ...], ...], model: str) -> Any:
    return hashlib.sha256(_head_text(api_base, messages, model))


def _head(api_base: str | None, messages: Sequence[Message], model: str) -> Any:
    """SHA-256 state after everything up to the parameters (most of the bytes): memoised, since every sample
    of a prompt sends the same messages."""
    items = tuple(tuple(m.items()) for m in messages)
    # the memo key need not be canonical (the hashed text sorts the keys), but it must tell apart what the
    # JSON tells apart: only all-string messages are memoised (1, 1.0 and True are equal as memo keys)
    if all(type(k) is str and type(v) is str for m in items for k, v in m):
        return _head_hash(api_base, items, model)
    return hashlib.sha256(_head_text(api_base, messages, model))  # e.g. a list of content parts


def cache_key(
    model: str,
    messages: Sequence[Message],
    params: Mapping[str, Any],
    sample_idx: int,
    rubric_version: str,
    api_base: str | None = None,
    *,
    params_json: str | None = None,
) -> str:
    """SHA-256 over a canonical JSON of what determines the answer (secrets dropped).

    The JSON is `json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))` of
    {"api_base", "messages", "model", "params", "rubric_version", "sample_idx"}, hashed field by field so that
    the messages are serialised and hashed once per prompt, not once per sample. `params_json`, when given,
    must be `canonical_params(params)`.
    """
    return cache_keys(model, [(messages, params, sample_idx, params_json)], rubric_version, api_base)[0]


KeyedCall = tuple[
    Sequence[Message], Mapping[str, Any], int, "str | None"
]  # messages, params, sample, params JSON


def cache_keys(
    model: str, calls: Sequence[KeyedCall], rubric_version: str, api_base: str | None = None
) -> list[str]:
    """`cache_key` of each (messages, params, sample index, params JSON or None) call of one model, endpoint and
    rubric version: the same keys (one definition: `cache_key` is this for one call), with what a replay's
    calls share worked out once - the endpoint, the version's JSON, the hash state of a messages list for the
    consecutive calls that send that same list object (a prompt's samples), and each (parameters, sample) tail."""
    base = endpoint(api_base)
    version = _dumps(rubric_version)
    tails: dict[tuple[str, int], bytes] = {}
    keys: list[str] = []
    last: Any = None
    head: Any = None
    for messages, params, sample_idx, params_json in calls:
        if messages is not last or head is None:
            head, last = _head(base, messages, model), messages
        part = params_json or canonical_params(params)
        memo = type(sample_idx) is int  # 1, True and 1.0 are one dict key but three JSON texts
        tail = tails.get((part, sample_idx)) if memo else None
        if tail is None:
            index = str(sample_idx) if memo else _dumps(sample_idx)  # the JSON of an int, faster
            tail = f'{part},"rubric_version":{version},"sample_idx":{index}}}'.encode()
            if memo:
                tails[(part, sample_idx)] = tail
        digest = head.copy()
        digest.update(tail)
        keys.append(digest.hexdigest())
    return keys


def _value(key: str, completion: Completion, parsed: Any = None) -> str:
    """The stored text of an entry: checksum line, then the completion's JSON (and its parsed scores)."""
    data = completion.to_dict()
    if parsed is not None:
        data[PARSED] = parsed
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if not payload.isascii() and not _is_utf8(payload):  # a lone surrogate ("\ud800"): stored escaped
        payload = json.dumps(data, separators=(",", ":"))
    return f"{_checksum(key, payload)}\n{payload}"


def _checksum(key: str, payload: str) -> str:
    return hashlib.sha256(f"{key}\n{payload}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _is_utf8(text: str) -> bool:
    """False for text holding a lone surrogate, which neither UTF-8 nor SQLite can store."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class CallCache:
    """A diskcache.Cache of `Completion`s; safe for several processes sharing one folder (SQLite WAL)."""

    def __init__(self, directory: str | Path | None = None, *, store: TextStore | None = None) -> None:
        """A folder (diskcache), or `store` (see judge.cache.backends: a Redis server) holding the same entries."""
        self.directory = Path(directory) if directory else default_cache_dir()
        self.damaged = 0  # entries found damaged (dropped and treated as misses) since this object was opened
        self.noted = False  # the one-line note about a damaged entry has been printed
        self.journaled = 0  # answers this object put in the local journal (the cache refused them)
        self.store = store
        if store is not None:
            self.location = store.location
            self._cache: Any = store
            return
        self.location = str(self.directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(self.directory), size_limit=2**40, eviction_policy="none")
        except (sqlite3.DatabaseError, OSError) as exc:
            raise CacheError(
                f"{self.directory}: cannot open the call cache ({exc}); move the folder aside to rebuild it"
            ) from exc

    @property
    def journal(self) -> Path:
        """Where this cache's answers go when it cannot take them (see `journal_dir`)."""
        location = self.location if self.store is not None else str(self.directory.resolve())
        return journal_dir(location)

    def replay_journal(self) -> int:
        """Import the answers an earlier run journaled when this cache could not take them (then delete the
        journal): how many. An entry whose checksum fails is skipped; a cache that still cannot write raises."""
        folder = self.journal
        try:
            files = sorted(folder.glob("*.jsonl"))
        except OSError:
            return 0
        imported = 0
        for path in files:
            pid = path.stem.split("-", 1)[0]
            if pid.isdigit() and _alive(int(pid)):
                continue  # a run still stopping: its journal is imported by a later one
            try:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue
            for line in lines:
                try:
                    item = json.loads(line)
                    key, value = item["key"], item["value"]
                    parse_entry(key, value, checksummed=True)
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by the crash: that one answer is asked for again
                self._store_value(key, value)
                imported += 1
            path.unlink(missing_ok=True)
        if imported:
            print(
                f"note: {imported} answers an earlier run could not cache (kept in {folder}) imported into "
                f"{self.location}",
                file=sys.stderr,
            )
        return imported

    def _to_journal(self, key: str, value: str) -> str:
        """Keep an answer the cache refused in the local journal; the clause the CacheError adds."""
        folder = self.journal
        try:
            folder.mkdir(parents=True, exist_ok=True)
            line = json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n"
            with open(folder / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            return f"; this answer could not be kept locally either ({exc.strerror or exc}) and will be asked again"
        self.journaled += 1
        return f"; the answers received meanwhile are kept in {folder} and imported by the next run"

    def _damaged(self, where: str, exc: BaseException) -> CacheError:
        return CacheError(
            f"{self.directory}: the call cache is damaged ({where}: {exc}); move the folder aside to rebuild "
            "it (finished calls will be asked for again)"
        )

    def _drop(self, key: str, why: str) -> None:
        self.damaged += 1
        if not self.noted:  # one line per cache, not one per entry; the manifest counts them all
            self.noted = True
            print(
                f"note: {self.location}: cache entry {key[:16]}... is invalid ({why}); treated as a miss and "
                "asked for again (cache_damaged_entries in the manifest counts them)",
                file=sys.stderr,
            )
        try:
            self._cache.delete(key)
        except sqlite3.DatabaseError as exc:
            raise self._damaged("delete", exc) from exc

    def get(self, key: str) -> Completion | None:
        """The stored completion, or None; a damaged entry is dropped and treated as a miss."""
        entry = self.read(key)
        return None if entry is None else entry[0]

    def read(self, key: str) -> tuple[Completion, Any] | None:
        """The stored completion and the parsed scores kept beside it (None when none are), or None; a
        damaged entry is dropped and treated as a miss."""
        try:
            value = self._cache.get(key)
        except sqlite3.DatabaseError as exc:
            raise self._damaged("read", exc) from exc
        except CacheError:  # a store that cannot be reached: never a miss (that would re-ask every call)
            raise
        except Exception as exc:  # a corrupt value file (pickle/zlib/OSError): recompute rather than trust it
            self._drop(key, type(exc).__name__)
            return None
        if value is None:
            return None
        try:
            return read_entry(key, value, checksummed=self.store is not None)
        except EntryError as exc:
            self._drop(key, str(exc))
            return None

    def read_many(self, keys: Sequence[str]) -> list[tuple[Completion, Any] | None]:
        """`read` of each key, in order: a folder's entries fetched with one SQLite query per
        READ_PER_QUERY keys instead of one per key (a replay reads every call of a study). Any entry the
        bulk query cannot hand over as stored (a value in a file, a store without SQLite, expiry or
        statistics switched on) is read by `read`, so the checks, drops and errors are `read`'s."""
        found = self._fetch_many(keys)
        out: list[tuple[Completion, Any] | None] = []
        seen: dict[str, tuple[Completion, Any] | None] = {}
        for key in keys:
            if key in seen:  # the same call twice in one run: read (and a damaged entry dropped) once
                out.append(seen[key])
                continue
            value = found.get(key, _UNREAD) if found is not None else _UNREAD
            if value is _UNREAD:
                entry = self.read(key)
            elif value is None:
                entry = None
            else:
                try:
                    entry = read_entry(key, value, checksummed=self.store is not None)
                except EntryError as exc:
                    self._drop(key, str(exc))
                    entry = None
            seen[key] = entry
            out.append(entry)
        return out

    def _fetch_many(self, keys: Sequence[str]) -> dict[str, Any] | None:
        """Stored text per key (None: no entry; absent: let `read` fetch it), or None where a bulk query does
        not apply. diskcache has no multi-get; this is its own `get` query (`Cache.get`'s fast path: no
        statistics, no eviction bookkeeping, str keys stored raw) for many keys at once."""
        cache = self._cache
        if self.store is not None or not isinstance(cache, diskcache.Cache):
            return None
        if cache.statistics or diskcache.core.EVICTION_POLICY[cache.eviction_policy]["get"] is not None:
            return None
        distinct = list(dict.fromkeys(keys))
        found: dict[str, Any] = dict.fromkeys(distinct)
        try:
            for start in range(0, len(distinct), READ_PER_QUERY):
                chunk = distinct[start : start + READ_PER_QUERY]
                rows = cache._sql(  # noqa: SLF001 (see above)
                    "SELECT key, mode, value FROM Cache WHERE raw = 1 AND key IN "
                    f"({','.join('?' * len(chunk))}) AND (expire_time IS NULL OR expire_time > ?)",
                    (*chunk, time.time()),
                ).fetchall()
                for key, mode, value in rows:
                    # a text kept inline; anything else (a value in a file, a pickle) is left to `read`
                    found[key] = value if mode == diskcache.core.MODE_RAW and type(value) is str else _UNREAD
        except sqlite3.DatabaseError as exc:
            raise self._damaged("read", exc) from exc
        return found

    def set(self, key: str, completion: Completion) -> None:
        """Store a completion as checksummed JSON text (no pickles: readable and safe to load)."""
        value = _value(key, completion)
        try:
            self._store_value(key, value)
        except CacheError as exc:  # an answer already paid for: kept locally before the run stops
            raise CacheError(f"{exc}{self._to_journal(key, value)}") from None

    def keep_parsed(self, entries: Sequence[tuple[str, Completion, Any]]) -> int:
        """Store each (key, completion, parsed scores) again with its parsed scores beside the answer, all in
        one transaction where the store has them: how many. Only a shortcut for later replays (the answers are
        already stored), so a store that refuses them costs nothing but the parsing next time: one note line."""
        if not entries:
            return 0
        transact = getattr(self._cache, "transact", None)
        try:
            if transact is None:
                for key, completion, parsed in entries:
                    self._store_value(key, _value(key, completion, parsed))
                return len(entries)
            for start in range(0, len(entries), KEEP_PER_TRANSACTION):
                with (
                    transact()
                ):  # one commit per chunk, not per entry; other processes wait one chunk at most
                    for key, completion, parsed in entries[start : start + KEEP_PER_TRANSACTION]:
                        self._cache.set(key, _value(key, completion, parsed))
        except (CacheError, sqlite3.DatabaseError, OSError, diskcache.Timeout) as exc:
            print(
                f"note: {self.location}: parsed scores not kept ({exc}); a replay parses again",
                file=sys.stderr,
            )
            return 0
        return len(entries)

    def _store_value(self, key: str, value: str) -> None:
        try:
            self._cache.set(key, value)
        except (sqlite3.DatabaseError, OSError) as exc:  # disk full, a damaged database, ...
            raise CacheError(
                f"{self.directory}: cannot write the call cache ({exc}); free disk space, or move the folder "
                "aside if it is damaged"
            ) from exc

    def __contains__(self, key: str) -> bool:
        return key in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    def close(self) -> None:
        self._cache.close()

    def reopen(self) -> CallCache:
        """A new connection to the same cache, for a forked worker (connections must not cross a fork)."""
        if self.store is not None:
            return CallCache(store=self.store.reopen())
        return CallCache(self.directory)
