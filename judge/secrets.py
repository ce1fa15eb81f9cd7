"""Keep API keys out of everything the framework writes: configs, logs, caches, results.

Keys come from the environment only; before anything is written we replace the values of secret-looking
environment variables, and any config entry whose name looks like a secret, with a fixed marker.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***REDACTED***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH(?!ORS?(?:_|$))|BEARER|COOKIE)", re.IGNORECASE)
_MIN_SECRET_LEN = 8


def secret_values() -> list[str]:
    """Values of environment variables whose names look secret (longest first, so prefixes go last)."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    values.discard("True")
    return sorted(values, key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every secret environment value replaced by the marker."""
    for value in secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def is_secret_entry(name: object, value: object) -> bool:
    """A config or request entry that holds a credential: a non-empty string under a secret-looking name
    (`api_key`, `Authorization`, ...; `api_key_env` names a variable, it is not one)."""
    text = str(name)
    return isinstance(value, str) and bool(value) and bool(_SECRET_NAME.search(text)) and not text.endswith("_env")


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
        return {
            k: REDACTED if is_secret_entry(k, v) else redact_config(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_config(v) for v in obj]
    if isinstance(obj, str):
        return redact(obj)
    return obj


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
