"""Fakes for unit tests only (never used by the framework itself)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from judge.types import Completion, Message


class FakeCompleter:
    """A scripted `Completer`: answers come from `script(messages, params)`; every call is recorded."""

    def __init__(
        self,
        script: Callable[[Sequence[Message], Mapping[str, Any]], str | BaseException],
        model: str = "fake/model",
    ) -> None:
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


class FakeTextStore:
    """A dict standing in for a Redis server behind `CallCache(store=...)` (judge.cache.backends.TextStore): the same
    get/set/delete of text values, so the cache's checks on a store's values run without a redis-server."""

    location = "fake://text-store"

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = {} if values is None else values

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __len__(self) -> int:
        return len(self.values)

    def close(self) -> None:
        pass

    def reopen(self) -> FakeTextStore:
        return FakeTextStore(self.values)


def garbage_paraphraser(
    answers: Mapping[str, Sequence[str]],
) -> Callable[[Sequence[Message], Mapping[str, Any]], str]:
    """A fake paraphrase generator for `FakeCompleter`: for the text between the paraphrase template's markers
    it gives ``answers[text][attempt]`` (attempt = the call's seed, the robustness seed being 0; the last
    answer once they run out), e.g. a rubric answer such as ``{"score": 1}`` where a paraphrase belongs."""

    def script(messages: Sequence[Message], params: Mapping[str, Any]) -> str:
        prompt = str(messages[-1]["content"])
        text = prompt.split("<<<TEXT>>>", 1)[1].split("<<<END TEXT>>>", 1)[0].strip()
        said = answers[text]
        return said[min(int(params.get("seed", 0)), len(said) - 1)]

    return script
