"""Fakes for unit tests only (never used by the framework itself)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from judge.completer import Completion, Message


class FakeCompleter:
    """A scripted `Completer`: answers come from `script(messages, params)`; every call is recorded."""

    def __init__(self, script: Callable[[Sequence[Message], Mapping[str, Any]], str | BaseException],
                 model: str = "fake/model") -> None:  # fmt: skip
        self.model = model
        self.script = script
        self.calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    def _answer(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        self.calls.append(([dict(m) for m in messages], dict(params)))
        out = self.script(messages, params)
        if isinstance(out, BaseException):
            raise out
        return Completion(out, "stop", prompt_tokens=10, completion_tokens=5, cost_usd=None, latency_s=0.001)

    def request_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return dict(params)

    def complete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        return self._answer(messages, params)

    async def acomplete(self, messages: Sequence[Message], params: Mapping[str, Any]) -> Completion:
        return self._answer(messages, params)
