"""The completion backend: a typed Protocol and its litellm implementation.

Every judge - the embedded local model, an API model, a local OpenAI-compatible server - is reached through
`LiteLLMCompleter`, so the pipeline never special-cases a provider.
"""

from __future__ import annotations

import contextvars
import copy
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import litellm

from judge import speedups
from judge.expected import from_response
from judge.secrets import redact, without_secrets
from judge.spend.pricing import Prices, prices_for
from judge.types import Completion, Message


class MalformedResponseError(RuntimeError):
    """A 200 whose body holds no usable completion (e.g. `"choices": []`): transient, like a 5xx."""


def token_count(value: Any) -> int:
    """A token count as reported; a provider's nonsense (None, "abc", -3, 1e400) counts as 0."""
    try:
        count = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return count if 0 <= count < 2**53 else 0


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (JSON `"\\ud800"`, which no UTF-8 file can hold) becomes
    U+FFFD; well-formed text is returned as is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _text(content: Any) -> str:
    """The answer's text: a string as sent; content parts joined; any other JSON value as its JSON (so an
    odd answer is kept, unscored, with its raw text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("text"), str) for p in content
    ):
        return "".join(p["text"] for p in content)
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)


def answer_text(content: Any) -> str:
    """The text kept for an answer's message content, live or from a batch: joined, valid Unicode, and with
    any secret the provider echoed redacted (a key is never stored)."""
    return redact(valid_text(_text(content)))


class Completer(Protocol):
    """What a judge needs from a model: one chat completion, sync or async."""

    model: str

    def complete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion: ...

    async def acomplete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion: ...

    def request_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Everything the request for `params` sends besides the model, messages and endpoint (config extras
        included): what the cache key covers, so no parameter that reaches the provider is left out of it."""
        ...


# Options that change how a request travels, never what it asks for: left out of the cache key. A value the
# completer always sends is left out while it has its default, so caches from before the key covered the whole
# request stay valid for the requests that did not change.
TRANSPORT_OPTIONS = frozenset({"timeout", "num_retries", "max_retries"})
COMPLETER_DEFAULTS: Mapping[str, Any] = {"drop_params": True}


# The last response's HTTP headers in this task (lower-case, without litellm's "llm_provider-" prefix), for
# a rate-limited judge: set only by completers with `read_headers`, so other calls skip the work.
RESPONSE_HEADERS: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "judgescope_response_headers", default=None
)


def response_headers(response: Any) -> dict[str, str]:
    """The provider's response headers as litellm keeps them on a response."""
    raw = (getattr(response, "_hidden_params", None) or {}).get("additional_headers") or {}
    return {str(k).lower().removeprefix("llm_provider-"): str(v) for k, v in raw.items()}


def _provider(model: str, api_base: str | None) -> str | None:
    try:
        return str(litellm.get_llm_provider(model=model, api_base=api_base)[1])
    except Exception:  # noqa: BLE001  (an unknown provider only loses the optimisation)
        return None


class LiteLLMCompleter:
    """A `Completer` over `litellm.completion` / `acompletion`.

    Retries are NOT done here (litellm's and the OpenAI SDK's own retries are switched off) so the
    framework's retry policy is the only one and every provider request is counted once.
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        timeout_s: float = 120.0,
        extra: Mapping[str, Any] | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.model = model
        # what a completion costs: the judge's prices (judge.spend.pricing, config overrides included), the same ones
        # the plan and the budget use; None = litellm's map for the model, looked up on the first answer
        self.prices = prices
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.extra = dict(extra or {})
        # the speed-ups are installed once by the entry points (speedups.install), not here: constructing a
        # completer changes no process-wide litellm state; its calls are marked lean for hooks installed or not
        self.lean = speedups.lean_enabled()
        self.read_headers = False  # set by a rate-limited judge (judge.ratelimit reads RESPONSE_HEADERS)
        self.inline_setup = self.lean and _provider(model, api_base) in speedups.INLINE_SETUP_PROVIDERS

    def _kwargs(self, messages: Sequence[Message], params: Mapping[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
            **self.extra,
            **params,
        }
        if isinstance(kwargs.get("response_format"), dict):
            # the caller's cache key covers this schema and litellm's transforms may edit it in place
            kwargs["response_format"] = copy.deepcopy(kwargs["response_format"])
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key_env:
            kwargs["api_key"] = os.environ.get(self.api_key_env)
        elif self.api_base and self.model.startswith("openai/") and not kwargs.get("api_key"):
            kwargs["api_key"] = (
                "no-key"  # a keyless OpenAI-compatible server (vLLM, llama.cpp): the SDK needs a value
            )
        return kwargs

    def request_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The request `_kwargs` builds, less the model, messages and endpoint (unless `extra` overrides
        them), transport options, the completer's defaults and credentials (see `Completer`)."""
        sent = self._kwargs((), params)
        del sent["messages"]
        own = {"model": self.model, "api_base": self.api_base, **COMPLETER_DEFAULTS}
        for name, value in own.items():
            if name in sent and sent[name] == value:
                del sent[name]
        for name in TRANSPORT_OPTIONS:
            sent.pop(name, None)
        return without_secrets(sent)

    def _completion(self, response: Any, started: float) -> Completion:
        latency = time.perf_counter() - started
        choices = getattr(response, "choices", None)
        if not choices:  # a 200 without an answer is a gateway fault, not the model's answer: retried
            raise MalformedResponseError(f"{self.model}: the provider answered 200 with no choices")
        choice = choices[0]
        usage = getattr(response, "usage", None)
        prompt_tokens = token_count(getattr(usage, "prompt_tokens", 0))
        completion_tokens = token_count(getattr(usage, "completion_tokens", 0))
        content = getattr(getattr(choice, "message", None), "content", None)
        finish = getattr(choice, "finish_reason", None)
        return Completion(
            text=answer_text(content),
            finish_reason=None if finish is None else str(finish),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.price_list().cost(prompt_tokens, completion_tokens),
            latency_s=latency,
            logprobs=from_response(getattr(choice, "logprobs", None)),
        )

    def price_list(self) -> Prices:
        """The prices this completer's answers are charged at (see `prices`)."""
        if (
            self.prices is None
        ):  # looked up once, at the first answer (a local provider is registered by then)
            self.prices = prices_for(self.model)
        return self.prices

    def complete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        started = time.perf_counter()
        token = speedups.LEAN_CALL.set(self.lean)
        try:
            response = litellm.completion(**self._kwargs(messages, params))
        finally:
            speedups.LEAN_CALL.reset(token)
        return self._completion(response, started)

    async def acomplete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        started = time.perf_counter()
        token, inline = speedups.LEAN_CALL.set(self.lean), speedups.INLINE_SETUP.set(self.inline_setup)
        try:
            response = await litellm.acompletion(**self._kwargs(messages, params))
        finally:
            speedups.INLINE_SETUP.reset(inline)
            speedups.LEAN_CALL.reset(token)
        if self.read_headers:
            RESPONSE_HEADERS.set(response_headers(response))
        return self._completion(response, started)
