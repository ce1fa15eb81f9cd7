"""How a judge's calls are spread over its replicas (`judge.pool`): plain settings, no litellm import, so the
typed config (experiments.config) can use them; judge.pool hands them to litellm's Router."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional  # noqa: UP035  (OmegaConf reads Optional, not `X | None`, on 3.10)

ROUTINGS = ("least-busy", "simple-shuffle", "latency-based-routing", "usage-based-routing-v2")


def _range(default: Any, low: float, *, above: bool = False) -> Any:
    """A setting with its valid range, in the form the typed config checks (experiments.config.bounded):
    `low <= value`, or `low < value` with `above`; None means "not set"."""
    return field(default=default, metadata={"low": low, "high": None, "above": above})


@dataclass  # not frozen: Hydra merges overrides (judge.pool.rpm=...) into this node inside a judge YAML
class PoolSettings:
    """How calls are spread over the replicas (the judge YAML's `pool:`); limits are per replica."""

    routing: str = field(default="least-busy", metadata={"choices": ROUTINGS})
    max_parallel_requests: Optional[int] = _range(None, 1)  # noqa: UP045
    rpm: Optional[int] = _range(None, 1)  # noqa: UP045
    allowed_fails: int = _range(1, 0)
    cooldown_s: float = _range(30.0, 0)

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> PoolSettings:
        """From the YAML's mapping; an unknown key or routing is a ValueError naming the setting."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"judge.pool.{unknown[0]}: unknown setting; known: {', '.join(cls.__dataclass_fields__)}"
            )
        settings = cls(**data)
        problem = settings.problem()
        if problem:
            raise ValueError(problem)
        return settings

    def problem(self) -> str | None:
        """The first setting litellm's Router would fail on (with a traceback, or by failing every call), as
        one line; None when all are valid. Also checked by the typed config (its `bounded` metadata)."""
        if self.routing not in ROUTINGS:
            return f"judge.pool.routing={self.routing}: choose one of {', '.join(ROUTINGS)}"
        for name in ("max_parallel_requests", "rpm", "allowed_fails", "cooldown_s"):
            value, low = getattr(self, name), self.__dataclass_fields__[name].metadata["low"]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                return f"judge.pool.{name}={value!r}: must be a number"
            if value < low:
                return f"judge.pool.{name}={value}: must be at least {low:g}"
        return None
