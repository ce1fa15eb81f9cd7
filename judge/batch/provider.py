"""`batch=true`: the uncached calls of a run go through the provider's batch API (about half the live price).

Through litellm's `create_file` / `create_batch` / `retrieve_batch` / `file_content` (and `list_batches` to
recover a batch whose id was never recorded). litellm 1.110 creates batches for `openai` (and
OpenAI-compatible servers), `azure` (on Azure's `/openai/...` paths, endpoint `/chat/completions`), `vertex_ai`
(litellm turns each line into a Gemini `GenerateContentRequest` on GCS and the predictions back into chat
completions) and `hosted_vllm`. Anthropic and Gemini (AI Studio) batches cannot be created, and Bedrock's
output comes back in each model's own format, so those judges are refused with one line.

Requests are keyed by their cache key (`custom_id`), so an answer lands in the call cache under the key a live
call would have used: a replay, and the results table, are the same as after a live run. Every step is
recorded in the cache folder first (`judge.batch.journal`): a killed run polls the same batches on rerun and
never submits a request twice. Error-file entries and the unanswered requests of an expired, cancelled or
failed batch are submitted again in a new batch (up to `rounds` submissions), then come back unscored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import litellm

from judge.completer import answer_text, token_count
from judge.expected import from_response
from judge.spend.pricing import Prices
from judge.types import Completion, Message

BATCH_PROVIDERS = frozenset({"openai", "azure", "vertex_ai", "hosted_vllm"})
# why a provider litellm has batch functions for still cannot run batch=true here
REFUSED = {
    "bedrock": "litellm 1.110 hands back Bedrock's output records in each model's own format (`modelOutput`), "
    "not as chat completions, and a Bedrock batch job needs an IAM service role",
}
OPENAI_FORMAT = frozenset({"openai", "azure", "hosted_vllm"})  # bodies sent as mapped; others: litellm maps
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
ENDPOINT = "/v1/chat/completions"
# Azure OpenAI's batch files and batches name the endpoint without the version (its documented JSONL: "url":
# "/chat/completions"); every line's url must equal the batch's endpoint
ENDPOINTS = {"azure": "/chat/completions"}


@dataclass(frozen=True)
class BatchLimits:
    """What one batch submission may hold (None: no limit known): requests and bytes per input file, and
    the tokens (prompt + output budget, as OpenAI counts them) a model may have enqueued in unfinished batches
    at once, which is per organisation and tier, so only the user knows it."""

    max_requests: int | None = None
    max_file_bytes: int | None = None
    max_enqueued_tokens: int | None = None


MB = 1_000_000
#: The providers' published per-file limits (OpenAI's and Azure OpenAI's batch guides: 50,000 requests and
#: 200 MB per input file). Providers not listed have no known limit beyond the user's settings.
PROVIDER_LIMITS: Mapping[str, BatchLimits] = {
    "openai": BatchLimits(max_requests=50_000, max_file_bytes=200 * MB),
    "azure": BatchLimits(max_requests=50_000, max_file_bytes=200 * MB),
}


def batch_limits(
    provider: str,
    max_per_batch: int | None = None,
    max_file_mb: float | None = None,
    max_enqueued_tokens: int | None = None,
) -> BatchLimits:
    """The provider's limits, each tightened (or, where the provider has none, set) by the user's setting."""
    known = PROVIDER_LIMITS.get(provider, BatchLimits())

    def tighter(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else min(a, b)

    return BatchLimits(
        tighter(known.max_requests, max_per_batch),
        tighter(known.max_file_bytes, None if max_file_mb is None else int(max_file_mb * MB)),
        tighter(known.max_enqueued_tokens, max_enqueued_tokens),
    )


class BatchError(RuntimeError):
    """Batch mode cannot run for this judge, or the provider refused a batch call; one line."""


@dataclass(frozen=True)
class BatchRequest:
    key: str
    messages: Sequence[Message]
    params: Mapping[str, Any]


@dataclass
class BatchStats:
    """What the manifest reports: batches submitted and resumed, requests, failures, cost at batch prices."""

    batches: int = 0
    resumed: int = 0
    requests: int = 0
    failures: int = 0
    answered: int = 0
    ignored: int = 0  # output lines with an unknown or repeated custom_id: neither counted nor cached again
    cost_usd: float = 0.0
    cost_known: bool = True
    statuses: dict[str, int] = field(default_factory=dict)


class BatchClient:
    """litellm's batch and file functions for one judge (model, endpoint, credentials from the environment)."""

    def __init__(
        self, model: str, api_base: str | None, api_key: str | None, body_params: Callable[..., dict]
    ) -> None:
        try:
            self.provider_model, self.provider, _, _ = litellm.get_llm_provider(
                model=model, api_base=api_base
            )
        except Exception as exc:  # noqa: BLE001
            raise BatchError(f"{model}: litellm does not know this model's provider ({exc})") from None
        if self.provider not in BATCH_PROVIDERS:
            why = REFUSED.get(self.provider, f"litellm cannot create {self.provider} batches")
            raise BatchError(
                f"{model}: {why} (batch=true supports: {', '.join(sorted(BATCH_PROVIDERS))}); run it "
                "live (batch=false)"
            )
        self.kwargs: dict[str, Any] = {"custom_llm_provider": self.provider}
        if api_base:
            self.kwargs["api_base"] = api_base
        if api_key:
            self.kwargs["api_key"] = api_key
        self.body_params = body_params
        self.endpoint = ENDPOINTS.get(self.provider, ENDPOINT)

    def line(self, request: BatchRequest) -> str:
        body = {
            "model": self.provider_model,
            "messages": [dict(m) for m in request.messages],
            **self.body_params(request.params, self.provider in OPENAI_FORMAT),
        }
        return json.dumps({"custom_id": request.key, "method": "POST", "url": self.endpoint, "body": body})

    def upload(self, lines: Sequence[str]) -> str:
        data = ("\n".join(lines) + "\n").encode()
        return str(
            litellm.create_file(file=("judgescope-batch.jsonl", data), purpose="batch", **self.kwargs).id
        )

    def create(self, input_file_id: str) -> Any:
        return litellm.create_batch(
            completion_window="24h",
            endpoint=self.endpoint,
            input_file_id=input_file_id,
            metadata={"source": "judgescope"},
            **self.kwargs,
        )

    def retrieve(self, batch_id: str) -> Any:
        return litellm.retrieve_batch(batch_id=batch_id, **self.kwargs)

    def find(self, input_file_id: str) -> str | None:
        """The batch already created from this input file, if the provider lists one."""
        try:
            listed = litellm.list_batches(limit=100, **self.kwargs)
        except Exception:  # noqa: BLE001  (no listing: fall back to creating it)
            return None
        for batch in getattr(listed, "data", None) or []:
            if getattr(batch, "input_file_id", None) == input_file_id:
                return str(batch.id)
        return None

    def lines_of(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        content = litellm.file_content(file_id=file_id, **self.kwargs)
        raw = content.content if hasattr(content, "content") else bytes(content)
        return [_json_line(x) for x in raw.decode("utf-8", "replace").splitlines() if x.strip()]


def _json_line(text: str) -> Any:
    """One JSONL line, or None where it is not JSON (its request then counts as unanswered, never a crash)."""
    try:
        return json.loads(text)
    except ValueError:
        return None


def completion_of(body: Mapping[str, Any], prices: Prices, latency_s: float) -> Completion:
    """A batch output's chat-completion body as the cache stores it, priced at batch prices: the text,
    token counts and log-probabilities kept exactly as the live path keeps them (judge.completer), so a
    cached answer is the same whichever path fetched it."""
    choice = body["choices"][0]
    usage = body.get("usage") or {}
    prompt, completion = token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))
    finish = choice.get("finish_reason")
    return Completion(
        text=answer_text((choice.get("message") or {}).get("content")),
        finish_reason=None if finish is None else str(finish),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=prices.cost(prompt, completion, batch=True),
        latency_s=latency_s,
        logprobs=from_response(choice.get("logprobs")),
    )
