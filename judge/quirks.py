"""What litellm actually sends a provider for the parameters a run asks for (its own parameter mapping).

`litellm.utils.get_optional_params` with `drop_params=True` is the mapping every live call goes through:
it renames (`max_tokens` -> `max_completion_tokens` for reasoning models, `max_output_tokens` for Gemini,
`num_predict` for Ollama), translates the response format, and drops what a provider refuses (gpt-5 and the
o-series take no `temperature` other than 1, Anthropic has no `seed`). Calling it builds the request without
sending it, so the batch bodies, the offline request-shape tests and the manifest all use the same mapping.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import litellm
from litellm.utils import get_optional_params


@functools.lru_cache(maxsize=1)
def openai_param_names() -> frozenset[str]:
    """The OpenAI-style parameters `get_optional_params` understands (its keyword arguments)."""
    skip = {
        "model",
        "custom_llm_provider",
        "drop_params",
        "additional_drop_params",
        "messages",
        "kwargs",
        "api_version",
        "base_model",
        "extra_headers",
        "max_retries",
        "model_info",
        "allowed_openai_params",
    }
    return frozenset(inspect.signature(get_optional_params).parameters) - skip


def provider_of(model: str, api_base: str | None = None) -> tuple[str, str]:
    """(the provider's own model name, litellm's provider name)."""
    name, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    return str(name), str(provider)


def mapped_params(model: str, api_base: str | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """The provider-format parameters litellm builds for `params` (unknown names and `stream` left out)."""
    name, provider = provider_of(model, api_base)
    asked = {k: v for k, v in params.items() if k in openai_param_names()}
    mapped = dict(get_optional_params(model=name, custom_llm_provider=provider, drop_params=True, **asked))
    mapped.pop("stream", None)
    mapped.update(mapped.pop("extra_body", None) or {})
    return mapped


# Where litellm puts a parameter under another name for some providers: present under any of them = sent.
RENAMED: Mapping[str, tuple[str, ...]] = {
    "max_tokens": (
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "num_predict",
        "max_new_tokens",
    ),
    "response_format": (
        "response_format",
        "output_format",
        "response_mime_type",
        "response_json_schema",
        "response_schema",
        "format",
        "json_mode",
    ),
}
# The temperature a provider uses when none is sent: OpenAI's reasoning models (the ones that refuse any other)
# run at 1; elsewhere the default is the provider's and not known here.
TEMPERATURE_WHEN_DROPPED = {"openai": 1.0, "azure": 1.0}


@dataclass(frozen=True)
class RequestShape:
    """What a judge's requests carry after litellm's mapping, and what that changed from what was asked."""

    sent: dict[str, Any]
    changes: list[dict[str, Any]]
    temperature: float | None  # the temperature the provider actually uses (None = not known)


def _summary(value: Any) -> Any:
    """A manifest-sized view of a sent value (a schema becomes its type, a list its length)."""
    if isinstance(value, Mapping):
        return f"<{value.get('type', 'object')}>"
    if isinstance(value, list):
        return f"<{len(value)} items>"
    return value


def request_shape(model: str, api_base: str | None, asked: Mapping[str, Any]) -> RequestShape:
    """Build (never send) the request litellm would make for `asked`, and compare the two."""
    as_asked = RequestShape({k: _summary(v) for k, v in asked.items()}, [], _float(asked.get("temperature")))
    try:
        provider = provider_of(model, api_base)[1]
        sent = mapped_params(model, api_base, asked)
    except Exception:  # noqa: BLE001  (a provider litellm does not know: sent as asked)
        return as_asked
    if provider in {entry.get("provider") for entry in litellm.custom_provider_map or []}:
        return as_asked  # a custom provider (the embedded model) receives the parameters as asked
    changes = []
    for name, value in asked.items():
        if name not in openai_param_names():
            continue
        names = RENAMED.get(name, (name,))
        if not any(n in sent for n in names):
            changes.append(
                {
                    "param": name,
                    "asked": _summary(value),
                    "sent": None,
                    "note": f"dropped: {provider} does not accept it for {model}",
                }
            )
        elif name in sent and sent[name] != value and not isinstance(value, Mapping):
            changes.append({"param": name, "asked": value, "sent": sent[name], "note": "changed by litellm"})
    if (
        isinstance(asked.get("response_format"), Mapping)
        and asked["response_format"].get("type") == "json_schema"
    ):
        name, _ = provider_of(model, api_base)
        if not litellm.supports_response_schema(model=name, custom_llm_provider=provider):
            changes.append(
                {
                    "param": "response_format",
                    "asked": "<json_schema>",
                    "sent": "<json_schema>",
                    "note": f"litellm lists no JSON-schema support for {model}: the server may ignore it",
                }
            )
    temperature = _float(sent.get("temperature"))
    if "temperature" in asked and "temperature" not in sent:
        temperature = TEMPERATURE_WHEN_DROPPED.get(provider)
    return RequestShape({k: _summary(v) for k, v in sent.items()}, changes, temperature)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def build_request(
    model: str, api_base: str | None, messages: list[dict[str, Any]], asked: Mapping[str, Any]
) -> dict[str, Any]:
    """The HTTP body litellm would send for this call, built with its provider transformation, never sent."""
    from litellm.utils import ProviderConfigManager  # noqa: PLC0415

    name, provider = provider_of(model, api_base)
    params = mapped_params(model, api_base, asked)
    if provider in ("gemini", "vertex_ai"):  # Gemini's transformation lives outside its config class
        from litellm.llms.vertex_ai.gemini.transformation import _transform_request_body  # noqa: PLC0415

        body = _transform_request_body(
            messages=messages,  # type: ignore[arg-type]
            model=name,
            optional_params=params,  # type: ignore[arg-type]
            custom_llm_provider=provider,  # type: ignore[arg-type]
            litellm_params={},
            cached_content=None,
        )
        return dict(body)
    config = ProviderConfigManager.get_provider_chat_config(
        model=name, provider=litellm.LlmProviders(provider)
    )
    if config is None:
        raise ValueError(f"{model}: litellm has no request transformation for provider {provider}")
    return dict(
        config.transform_request(
            model=name,
            messages=messages,  # type: ignore[arg-type]
            optional_params=params,  # type: ignore[arg-type]
            litellm_params={},
            headers={},
        )
    )
