"""The retry defaults in one place, in a module that imports nothing: judge.retry's `RetryPolicy` (which
imports litellm) and the config's `RetryConfig` (loaded before litellm is) both read them."""

from __future__ import annotations

MAX_ATTEMPTS = 6  # attempts in all, the first included
INITIAL_WAIT_S = 1.0  # the backoff's multiplier: the first wait is up to this long (full jitter)
MAX_WAIT_S = 60.0  # the longest wait, a provider's Retry-After included
