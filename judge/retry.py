"""Which errors are worth retrying, and how long to wait: tenacity with bounded, jittered backoff.

Only transient provider errors are retried; an auth or bad-request error fails at once with a clear
message, because retrying it would only spend time (and, on some providers, money).
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import litellm
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base, wait_random_exponential

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
)
FATAL_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.BadRequestError,
    litellm.NotFoundError,
)


class FatalProviderError(RuntimeError):
    """A non-retryable provider error, reworded as one line that says what to check."""


def is_transient(exc: BaseException) -> bool:
    """True for errors a later attempt may not see (rate limits, timeouts, 5xx, dropped connections)."""
    if isinstance(exc, FATAL_ERRORS):
        return False
    return isinstance(exc, TRANSIENT_ERRORS)


def _headers(exc: BaseException) -> dict[str, str]:
    """Response headers wherever this litellm version keeps them (lower-cased names)."""
    merged: dict[str, str] = {}
    response = getattr(exc, "response", None)
    for source in (getattr(response, "headers", None), getattr(exc, "litellm_response_headers", None),
                   getattr(exc, "headers", None)):  # fmt: skip
        try:
            merged.update({str(k).lower(): str(v) for k, v in dict(source or {}).items()})
        except (TypeError, ValueError):
            continue
    return merged


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Seconds the provider asked us to wait (Retry-After as seconds or HTTP date, or retry-after-ms)."""
    if exc is None:
        return None
    headers = _headers(exc)
    if "retry-after-ms" in headers:
        try:
            return max(0.0, float(headers["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class wait_retry_after(wait_base):
    """Honour Retry-After (capped at `max_s`), else fall back to exponential backoff with jitter."""

    def __init__(self, fallback: wait_base, max_s: float) -> None:
        self.fallback = fallback
        self.max_s = max_s

    def __call__(self, retry_state: RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        asked = retry_after_seconds(exc)
        if asked is not None:
            return min(asked, self.max_s)
        return self.fallback(retry_state)


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded attempts, exponential backoff with full jitter, Retry-After honoured."""

    max_attempts: int = 6
    initial_wait_s: float = 1.0
    max_wait_s: float = 60.0

    def retrying(self) -> AsyncRetrying:
        return AsyncRetrying(
            retry=retry_if_exception(is_transient),
            stop=stop_after_attempt(self.max_attempts),
            wait=wait_retry_after(
                wait_random_exponential(multiplier=self.initial_wait_s, max=self.max_wait_s), self.max_wait_s
            ),
            reraise=True,
        )


def describe_fatal(exc: BaseException, model: str) -> str:
    """One line that says what failed and what to check, without echoing request headers or keys."""
    kind = type(exc).__name__
    hint = {
        "AuthenticationError": "check the API key environment variable for this provider",
        "PermissionDeniedError": "the key has no access to this model",
        "NotFoundError": "check the model name and api_base",
        "BadRequestError": "the provider rejected the request (model name, parameters or prompt length)",
    }.get(kind, "see the message")
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else kind
    return f"{model}: {kind}: {hint}: {first_line[:300]}"
