"""Which errors are worth retrying, and how long to wait: tenacity with bounded, jittered backoff.

Only transient provider errors are retried; an auth or bad-request error fails at once with a clear
message, because retrying it would only spend time (and, on some providers, money).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from dataclasses import dataclass
from typing import Any

import litellm
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base, wait_random_exponential

from judge import retry_defaults
from judge.completer import MalformedResponseError


def _optional(module: Any, *names: str) -> tuple[type[BaseException], ...]:
    """The named exception classes this version of a library has (older litellm lacks some)."""
    found = (getattr(module, n, None) for n in names)
    return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Raw network errors, in case one escapes litellm's exception mapping."""
    errors: list[type[BaseException]] = [ConnectionError, TimeoutError, asyncio.TimeoutError]
    try:
        import httpx  # noqa: PLC0415

        errors.append(httpx.TransportError)
    except ImportError:  # pragma: no cover
        pass
    try:
        import aiohttp  # noqa: PLC0415

        errors += [aiohttp.ClientConnectionError, aiohttp.ClientPayloadError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


# Transient: a later attempt may well succeed. Besides rate limits, timeouts, 5xx and dropped connections this
# covers a 200 whose body is not a chat completion (not JSON, cut off, no `choices`): litellm raises that as
# an InternalServerError, and it is a transport/gateway fault, not the model's answer.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
    MalformedResponseError,
    *_optional(litellm, "BadGatewayError"),
    *_optional(openai, "APITimeoutError", "APIConnectionError", "RateLimitError", "InternalServerError"),
    *_transport_errors(),
)
# An attempt the client gave up on: the provider may still complete it, and bill it (judge.client keeps its
# budget reservation as spent)
TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.Timeout,
    *_optional(openai, "APITimeoutError"),
    TimeoutError,
    asyncio.TimeoutError,
)
# HTTP statuses worth another attempt whatever exception class litellm maps them to (it maps e.g. 502 to
# BadGatewayError and 409/425/520-529 to a bare APIError): timeouts, conflicts, too early, rate limits and
# server-side failures - except 501 Not Implemented and 505, which a retry cannot fix.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
PERMANENT_5XX = frozenset({501, 505})
# Permanent for this one prompt, not for the study: recorded unscored with the error, never retried or cached.
PER_CALL_ERRORS: tuple[type[BaseException], ...] = _optional(
    litellm, "ContextWindowExceededError", "ContentPolicyViolationError"
)
# Fatal for the whole study: every other call would fail the same way.
FATAL_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.BadRequestError,
    litellm.NotFoundError,
)


PROVIDER_ERRORS: tuple[type[BaseException], ...] = (
    openai.OpenAIError,
    *_optional(litellm, "APIError"),
    *_optional(litellm.exceptions, "OpenAIError"),
)


class FatalProviderError(RuntimeError):
    """A non-retryable provider error, reworded as one line that says what to check."""


def status_code(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (litellm and the OpenAI SDK both set `status_code`)."""
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


def is_transient(exc: BaseException) -> bool:
    """True for errors a later attempt may not see (rate limits, timeouts, 5xx, dropped connections)."""
    if isinstance(exc, FATAL_ERRORS) or isinstance(exc, PER_CALL_ERRORS):
        return False
    if isinstance(exc, TRANSIENT_ERRORS):
        return True
    if not is_provider_error(exc):
        return False
    code = status_code(exc)
    return code is not None and (code in TRANSIENT_STATUS or (code >= 500 and code not in PERMANENT_5XX))


def is_provider_error(exc: BaseException) -> bool:
    """An error raised by the provider layer (litellm / the OpenAI SDK), as opposed to a bug in our code."""
    return isinstance(exc, PROVIDER_ERRORS) or isinstance(exc, TRANSIENT_ERRORS)


def _headers(exc: BaseException) -> dict[str, str]:
    """Response headers wherever this litellm version keeps them (lower-cased names)."""
    merged: dict[str, str] = {}
    response = getattr(exc, "response", None)
    for source in (
        getattr(response, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
    ):
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
        pass
    try:  # an HTTP date; anything else ("soon", "1.5s", an ISO date) falls back to the backoff
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None
    except (TypeError, ValueError, OverflowError):
        return None


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

    max_attempts: int = retry_defaults.MAX_ATTEMPTS
    initial_wait_s: float = retry_defaults.INITIAL_WAIT_S
    max_wait_s: float = retry_defaults.MAX_WAIT_S

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
    return f"{model}: {kind}: {hint}: {brief(exc, 300)}"


def brief(exc: BaseException, limit: int) -> str:
    """An error's message as one short line: its first line, without the traceback text litellm sometimes
    embeds in it ("... Invalid response object Traceback (most recent call last): ...")."""
    text = str(exc).split("Traceback (most recent call last)", 1)[0].strip()
    return (text.splitlines() or [type(exc).__name__])[0][:limit]
