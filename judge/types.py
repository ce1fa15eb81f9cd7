"""Types the call path shares, in one low module that imports no other judge module.

A chat message, a provider's answer (`Completion`, with its token log-probabilities) and the cache's key ->
text store are named by the completer, the pricing, the budget, the batch path and the cache alike; defined
here, no two of those modules import each other, even for type checking (issue 36, item 3), and the cache
and its command (`python -m judge.cache`) load without litellm (seconds of import per command).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: One chat message as litellm takes it: {"role": ..., "content": ...}.
Message = Mapping[str, str]


class TextStore(Protocol):
    """The few operations `judge.cache.store.CallCache` needs from a key -> text store (disk or Redis)."""

    location: str

    def get(self, key: str) -> Any: ...

    def set(self, key: str, value: str) -> Any: ...

    def delete(self, key: str) -> Any: ...

    def __contains__(self, key: str) -> bool: ...

    def __len__(self) -> int: ...

    def close(self) -> None: ...

    def reopen(self) -> TextStore: ...


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token and its top alternatives (token, log-probability), the sampled one included."""

    token: str
    top: tuple[tuple[str, float], ...]

    def to_list(self) -> list[Any]:
        return [self.token, [list(t) for t in self.top]]

    @classmethod
    def from_list(cls, data: Sequence[Any]) -> TokenLogprob:
        return cls(str(data[0]), tuple((str(t), float(lp)) for t, lp in data[1]))


@dataclass(frozen=True)
class Completion:
    """One provider answer with its accounting; what the cache stores."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    logprobs: tuple[TokenLogprob, ...] | None = None  # only when asked for (expected_scores=true)

    def to_dict(self) -> dict[str, Any]:
        # the fields in declaration order, as `dataclasses.asdict` gives them (without its deep copies: every
        # field but logprobs is a str, int, float or None)
        out: dict[str, Any] = {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
        }
        if self.logprobs is not None:  # entries without them stay byte-identical to earlier versions'
            out["logprobs"] = [t.to_list() for t in self.logprobs]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Completion:
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k != "logprobs"}
        tokens = data.get("logprobs")
        return cls(**fields, logprobs=tuple(TokenLogprob.from_list(t) for t in tokens) if tokens else None)
