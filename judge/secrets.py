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
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
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


def redact_config(obj: Any) -> Any:
    """A copy of a plain config tree with secret-named entries and secret values replaced."""
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if isinstance(v, str) and v and _SECRET_NAME.search(str(k)) and not str(k).endswith("_env")
                else redact_config(v))
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
