"""Keep API keys out of everything the framework writes or prints: configs, logs, caches, results, errors.

Redaction is by value: every secret the process knows is replaced by a fixed marker in any string before it
is written or printed, whatever the string is (a provider's error echoing the Authorization header, a
manifest, a results cell). The process knows a secret from
- the environment: variables whose names look secret (KEY, TOKEN, AUTH, ...);
- the config (`remember_secrets`): the value of every variable an `*_env` entry names (`api_key_env:
  LLM_AUTH`, whatever its name), every credential entry (`api_key`, `extra.api_key`, headers), and the
  credentials inside any URL (`https://user:PASSWORD@host`, `?key=...`: an `api_base`, a Redis `cache.url`);
- the command line (`experiments.cli.secrets`), before Hydra prints or writes any override.
The set of learnt secrets is process-wide on purpose: a line any library prints must be scrubbed too.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

REDACTED = "***REDACTED***"
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!ORS?(?:_|$))|BEARER|COOKIE)", re.IGNORECASE
)
MIN_SECRET_LEN = 8
_LEARNT: set[str] = set()  # secrets learnt from a config (remember_secrets); see the module doc


def secret_values() -> list[str]:
    """Every secret this process knows (longest first, so a secret's prefix never hides the rest of it)."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LEN}
    values |= _LEARNT
    values.discard("True")
    return sorted(values, key=len, reverse=True)


def _environment() -> Mapping[Any, Any]:
    """A cheap view of the environment to tell whether it changed (os.environ's own dict where it has one:
    comparing it costs ~1 us, decoding every variable ~20 us)."""
    return getattr(os.environ, "_data", None) or dict(os.environ)


@dataclass
class _Forms:
    """The strings `redact` replaces, worked out for one state of the environment and the learnt secrets;
    redaction runs on every answer, and scanning the environment each time was ~60 us of it."""

    # (environment, learnt secrets, forms), replaced as one tuple: a thread never sees a new snapshot with
    # the old forms (it would skip a new secret)
    state: tuple[dict[Any, Any], frozenset[str], tuple[str, ...]] = field(
        default_factory=lambda: ({}, frozenset(), ())
    )

    def current(self) -> tuple[str, ...]:
        environ = _environment()
        seen_environ, seen_learnt, forms = self.state
        if environ != seen_environ or _LEARNT != seen_learnt:
            snapshot, learnt = dict(environ), frozenset(_LEARNT)
            found: dict[str, None] = {}  # ordered: each secret's forms, longest secret first
            for value in secret_values():
                for form in (value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1]):
                    found.setdefault(form)
            forms = tuple(found)
            self.state = (snapshot, learnt, forms)
        return forms


_FORMS = _Forms()


def url_secrets(value: str) -> list[str]:
    """The credentials inside a URL: its password (or a lone user name, as tokens are sent), and the values
    of secret-named query parameters (`?key=`, `?api_key=`, `?token=`). Empty for anything not a URL."""
    if "://" not in value:
        return []
    try:
        parts = urlsplit(value.strip())
        found = [parts.password or parts.username or ""]
    except ValueError:  # a malformed port or bracket: no URL, no credential to find
        return []
    found += [v for k, v in parse_qsl(parts.query, keep_blank_values=False) if _SECRET_NAME.search(k)]
    return [f for f in found if len(f) >= MIN_SECRET_LEN]


def basic_auth_secrets(value: str) -> list[str]:
    """The `Authorization: Basic ...` credential an HTTP client builds from a URL's user-info: a provider that
    echoes the header (a batch error file does) must not show the key base64-encoded either."""
    if "://" not in value or "@" not in value:
        return []
    try:
        parts = urlsplit(value.strip())
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if not (password or user) or len(password or user or "") < MIN_SECRET_LEN:
        return []
    pair = f"{unquote(user or '')}:{unquote(password or '')}"
    return [base64.b64encode(pair.encode()).decode()]


@functools.lru_cache(maxsize=256)
def endpoint(api_base: str | None) -> str | None:
    """The endpoint an `api_base` names, without its credentials (user-info, secret-named query parameters)
    or a trailing slash: what keys a cached answer and a batch journal entry, so a rotated key keeps both and
    no key is written. A plain api_base (no credentials, no trailing slash) is returned unchanged, so the
    cache keys made before this normalisation stay valid."""
    if not api_base:
        return api_base
    if "://" not in api_base:
        return api_base.rstrip("/") or api_base
    try:
        parts = urlsplit(api_base)
    except ValueError:  # a malformed port or bracket: still drop anything that looks like user-info
        return re.sub(r"://[^/?#]*@", "://", api_base).rstrip("/")
    netloc = parts.netloc.rpartition("@")[2]
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if not _SECRET_NAME.search(k)]
    path = parts.path.rstrip("/")
    if netloc == parts.netloc and len(kept) == len(pairs) and path == parts.path:
        return api_base
    query = parts.query if len(kept) == len(pairs) else urlencode(kept)
    return urlunsplit(parts._replace(netloc=netloc, path=path, query=query))


def learn(values: Any) -> None:
    """Learn these strings as secrets (those long enough to be one)."""
    _LEARNT.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN)


def is_secret_name(name: object) -> bool:
    """A name that holds a credential (`api_key`, `Authorization`, `x-api-token`), not a variable's name
    (`api_key_env`) or a count (`max_tokens`)."""
    text = str(name)
    return (
        bool(_SECRET_NAME.search(text)) and not text.endswith("_env") and not text.lower().endswith("tokens")
    )


def remember_secrets(cfg: Any) -> None:
    """Learn the secrets a config tree holds (see the module doc), so `redact` removes them everywhere."""
    if isinstance(cfg, str):
        _LEARNT.update(url_secrets(cfg))
        _LEARNT.update(basic_auth_secrets(cfg))
    elif isinstance(cfg, Mapping):
        for name, value in cfg.items():
            if is_secret_entry(name, value) and len(value) >= MIN_SECRET_LEN:
                _LEARNT.add(value)
            elif str(name).endswith("_env") and isinstance(value, str) and value:
                named = os.environ.get(value, "")
                if len(named) >= MIN_SECRET_LEN and _SECRET_NAME.search(str(name)):
                    _LEARNT.add(named)
            else:
                remember_secrets(value)
    elif isinstance(cfg, list | tuple):
        for value in cfg:
            remember_secrets(value)


def redact(text: str) -> str:
    """`text` with every known secret replaced by the marker (also as it appears inside a JSON string)."""
    for form in _FORMS.current():
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def is_secret_entry(name: object, value: object) -> bool:
    """A config or request entry that holds a credential: a non-empty string under a secret-looking name
    (`api_key`, `Authorization`, ...; `api_key_env` names a variable, it is not one)."""
    text = str(name)
    return (
        isinstance(value, str)
        and bool(value)
        and bool(_SECRET_NAME.search(text))
        and not text.endswith("_env")
    )


def without_secrets(obj: Any) -> Any:
    """A copy of a request or config tree with every credential entry left out (for cache keys: a rotated
    key must not turn every cached answer into a miss, and a key never enters anything derived from it)."""
    if isinstance(obj, Mapping):
        return {k: without_secrets(v) for k, v in obj.items() if not is_secret_entry(k, v)}
    if isinstance(obj, list | tuple):
        return [without_secrets(v) for v in obj]
    return obj


def redact_config(obj: Any) -> Any:
    """A copy of a plain config tree with secret-named entries and secret values replaced."""
    if isinstance(obj, Mapping):
        return {k: REDACTED if is_secret_entry(k, v) else redact_config(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_config(v) for v in obj]
    if isinstance(obj, str):
        return redact(obj)
    return obj


class RedactingStream:
    """A text stream (stdout/stderr) that scrubs known secrets from everything written through it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self._stream, name)


def redact_std_streams() -> None:
    """Route this process's stdout and stderr through `RedactingStream` (once)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs secret values from every record before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install_log_redaction() -> None:
    """Attach the filter to the root logger's handlers and litellm's loggers."""
    filt = RedactingFilter()
    for name in ("", "LiteLLM", "LiteLLM Proxy", "LiteLLM Router", "httpx", "openai"):
        logger = logging.getLogger(name)
        logger.addFilter(filt)
        for handler in logger.handlers:
            handler.addFilter(filt)
