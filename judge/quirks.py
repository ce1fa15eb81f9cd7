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
import os
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm: no price-map download

import litellm  # noqa: E402
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
