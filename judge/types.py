"""Types the call path shares, in one low module that imports no other judge module.

A chat message and the cache's key -> text store are named by the completer, the pricing, the budget, the
batch path and the cache alike; defined here, no two of those modules import each other, even for type
checking (issue 36, item 3).
"""

from __future__ import annotations

from collections.abc import Mapping
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
