"""litellm provider ``local/``: the embedded SmolLM2-135M judge (see :mod:`judge.local.model`).

After :func:`register`::

    litellm.completion(model="local/smollm2-135m", messages=[...], temperature=0.1, seed=1, max_tokens=64)
    await litellm.acompletion(model="local/smollm2-135m", ...)

Supported parameters: ``temperature`` (<= 0 is greedy; default 0.0), ``top_p``, ``max_tokens`` /
``max_completion_tokens`` (default 256), ``seed`` (same messages + seed -> same text; sampling without
a seed is not reproducible), ``stop`` (str or list; the stop string is not returned), ``n`` (choice
``i`` uses ``seed + i``), ``stream`` (the whole answer arrives as one chunk), and ``response_format``.

JSON mode (like other providers' ``response_format`` JSON modes): ``response_format={"type":
"json_object"}`` (or ``"json_schema"`` without a usable schema) pre-fills the assistant turn with
``{"`` (see ``JSON_PREFILL``) and ends the answer as soon as that first JSON object is closed, so the
returned content is ``{"...}`` and nothing after it. It makes valid JSON likely, not certain: a 135M
model can still emit a malformed object, wrong keys or string values, or run out of ``max_tokens``
(then ``finish_reason == "length"``). Validate what you parse. A ``json_schema`` request that
carries a schema is decoded constrained to it instead (:mod:`judge.local.schema`).

A trailing ``assistant`` message is treated as a pre-fill of the answer (as Anthropic does); the
returned content starts with it.

Importing this module does not import torch or transformers; the model loads on the first call
(a one-off ~1 min GGUF -> safetensors conversion the very first time on a machine, ~2-5 s after).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.llms.custom_llm import CustomLLMError
from litellm.types.utils import GenericStreamingChunk

from judge.local import model as local_model
from judge.local.schema import UnsupportedSchema, generate_structured

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "JSON_PREFILL",
    "KNOWN_MODELS",
    "LOCAL_MODEL",
    "PROVIDER",
    "LocalLLM",
    "handler",
    "register",
]

PROVIDER = "local"
KNOWN_MODELS = (local_model.MODEL_NAME,)
LOCAL_MODEL = f"{PROVIDER}/{local_model.MODEL_NAME}"  # "local/smollm2-135m"
DEFAULT_MAX_TOKENS = 256
# JSON mode pre-fills '{"', not just '{': after a bare '{' SmolLM2-135M often writes a set such as
# "{1, 2, 3}"; forcing the first key's opening quote raised json.loads success from 0-5/10 to 8-10/10
# on a judging prompt (10 seeds, T=0.7).
JSON_PREFILL = '{"'
_UNSUPPORTED_PARAMS = {
    "tools",
    "tool_choice",
    "functions",
    "function_call",
    "audio",
    "modalities",
    "prediction",
}


_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judgescope-local-llm")


def _bad_request(message: str) -> CustomLLMError:
    return CustomLLMError(status_code=400, message=message)


def _check_model(model: str) -> str:
    name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
    if name not in KNOWN_MODELS:
        known = ", ".join(f"{PROVIDER}/{m}" for m in KNOWN_MODELS)
        raise CustomLLMError(
            status_code=404, message=f"unknown local model {PROVIDER}/{name}; known: {known}"
        )
    return name


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: only text is understood
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif isinstance(part, str):
                parts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise _bad_request(f"the local model only reads text; got a {kind!r} content part")
        return "".join(parts)
    raise _bad_request(f"unsupported message content of type {type(content).__name__}")


def _prepare_messages(messages: list[Any]) -> tuple[list[dict[str, str]], str]:
    """Plain ``{"role", "content": str}`` messages, plus the trailing assistant pre-fill if any."""
    out: list[dict[str, str]] = []
    for msg in messages:
        msg = dict(msg)
        role = {"developer": "system"}.get(msg.get("role", ""), msg.get("role", ""))
        if role not in ("system", "user", "assistant"):
            raise _bad_request(f"the local model handles system/user/assistant messages, not {role!r}")
        out.append({"role": role, "content": _text_of(msg.get("content"))})
    prefill = ""
    if out and out[-1]["role"] == "assistant":
        prefill = out.pop()["content"]
    if not out:
        raise _bad_request("messages must contain at least one system or user message")
    return out, prefill


def _json_schema(response_format: Any) -> dict[str, Any] | None:
    """The schema of a ``{"type": "json_schema", "json_schema": {"schema": ...}}`` request, else None."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema") or {}
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


class LocalLLM(CustomLLM):
    """litellm ``CustomLLM`` serving ``local/smollm2-135m`` from :mod:`judge.local.model`."""

    def _run(self, model: str, messages: list, optional_params: dict, model_response: Any) -> Any:
        name = _check_model(model)
        params = dict(optional_params or {})
        unsupported = sorted(k for k in params if k in _UNSUPPORTED_PARAMS and params[k] is not None)
        if unsupported:
            raise _bad_request(f"the local model does not support {unsupported}")
        chat, prefill = _prepare_messages(messages)

        max_tokens = params.get("max_completion_tokens") or params.get("max_tokens") or DEFAULT_MAX_TOKENS
        temperature = params.get("temperature")
        temperature = 0.0 if temperature is None else float(temperature)
        top_p = params.get("top_p")
        top_p = 1.0 if top_p is None else float(top_p)
        seed = params.get("seed")
        stop = params.get("stop")
        if isinstance(stop, str):
            stop = [stop]
        n = int(params.get("n") or 1)
        if n < 1:
            raise _bad_request(f"n must be >= 1, got {n}")

        response_format = params.get("response_format")
        schema = _json_schema(response_format)
        json_mode = False
        if schema is not None:
            pass  # structured output: decoding constrained to the schema (judge.local.schema)
        elif response_format is not None:
            kind = response_format.get("type") if isinstance(response_format, dict) else None
            if kind in ("json_object", "json_schema"):
                json_mode = True
                if not prefill.lstrip().startswith("{"):
                    prefill = prefill + JSON_PREFILL
            elif kind != "text":
                raise _bad_request(f"unsupported response_format {response_format!r}")

        results = []
        for i in range(n):
            sample_seed = None if seed is None else int(seed) + i
            try:
                if schema is not None:
                    results.append(
                        generate_structured(
                            chat,
                            schema,
                            temperature=temperature,
                            seed=sample_seed,
                            logprobs=bool(params.get("logprobs")),
                        )
                    )
                    continue
                results.append(
                    local_model.generate(
                        chat,
                        max_tokens=int(max_tokens),
                        temperature=temperature,
                        seed=sample_seed,
                        prefill=prefill,
                        top_p=top_p,
                        stop=stop,
                        json_object=json_mode,
                    )
                )
            except UnsupportedSchema as exc:
                raise _bad_request(f"response_format: {exc}") from exc
            except local_model.PromptTooLong as exc:
                raise litellm.ContextWindowExceededError(
                    message=str(exc), model=LOCAL_MODEL, llm_provider=PROVIDER
                ) from exc
            except local_model.LocalModelMissing as exc:  # not retryable: a 404, with the pip command
                raise CustomLLMError(status_code=404, message=str(exc)) from exc

        choices = []
        for i, res in enumerate(results):
            choices.append(
                litellm.Choices(
                    index=i,
                    finish_reason=res.finish_reason,
                    message=litellm.Message(role="assistant", content=res.text),
                    logprobs={"content": res.logprobs} if res.logprobs else None,
                )
            )
        model_response.choices = choices
        model_response.model = name
        model_response.created = int(time.time())
        prompt_tokens = results[0].prompt_tokens
        completion_tokens = sum(r.completion_tokens for r in results)
        model_response.usage = litellm.Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )
        return model_response

    # -- litellm entry points (signature: litellm/llms/custom_llm.py; everything is passed by keyword)

    def completion(self, *args: Any, **kwargs: Any) -> Any:
        return self._run(
            kwargs["model"], kwargs["messages"], kwargs["optional_params"], kwargs["model_response"]
        )

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        # Like asyncio.to_thread, but on a dedicated one-thread executor: the event loop stays free
        # while the model runs, and queued local calls (generation is serialised by a lock anyway)
        # do not occupy the loop's default executor that other code relies on.
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, self.completion, *args, **kwargs)
        return await loop.run_in_executor(_EXECUTOR, call)

    @staticmethod
    def _as_chunks(response: Any) -> list[GenericStreamingChunk]:
        choice = response.choices[0]
        usage = response.usage
        return [
            GenericStreamingChunk(
                text=choice.message.content or "",
                tool_use=None,
                is_finished=True,
                finish_reason=choice.finish_reason,
                usage={
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "total_tokens": usage.total_tokens,
                },
                index=0,
            )
        ]

    def streaming(self, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:
        return iter(self._as_chunks(self.completion(*args, **kwargs)))

    # litellm declares astreaming as a coroutine returning an iterator, yet calls it without await and iterates
    # the result (main.py: CustomStreamWrapper); an async generator is what it needs, so its stub is wrong here
    async def astreaming(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        for chunk in self._as_chunks(await self.acompletion(*args, **kwargs)):
            yield chunk


handler = LocalLLM()
_REGISTER_LOCK = threading.Lock()


def register() -> None:
    """Make ``local/smollm2-135m`` callable through litellm (idempotent; keeps other custom providers)."""
    with _REGISTER_LOCK:
        entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != PROVIDER]
        entries.append({"provider": PROVIDER, "custom_handler": handler})
        litellm.custom_provider_map = entries
        litellm.utils.custom_llm_setup()  # litellm also runs this on every call; do it now for get_llm_provider
        zero_cost = {
            "litellm_provider": PROVIDER,
            "mode": "chat",
            "max_tokens": local_model.CONTEXT_LENGTH,
            "max_input_tokens": local_model.CONTEXT_LENGTH,
            "max_output_tokens": local_model.CONTEXT_LENGTH,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
            "cache_read_input_token_cost": 0.0,
            "cache_creation_input_token_cost": 0.0,
        }
        if LOCAL_MODEL not in litellm.model_cost:  # completion_cost() -> 0.0 rather than an error
            litellm.register_model({LOCAL_MODEL: zero_cost})
