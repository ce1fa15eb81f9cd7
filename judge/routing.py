"""How a judge's calls are spread over its replicas (`judge.pool`): plain settings, no litellm import, so the
typed config (experiments.config) can use them; judge.pool hands them to litellm's Router."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional  # noqa: UP035  (OmegaConf reads Optional, not `X | None`, on 3.10)

ROUTINGS = ("least-busy", "simple-shuffle", "latency-based-routing", "usage-based-routing-v2")


@dataclass  # not frozen: Hydra merges overrides (judge.pool.rpm=...) into this node inside a judge YAML
class PoolSettings:
    """How calls are spread over the replicas (the judge YAML's `pool:`); limits are per replica."""

    routing: str = "least-busy"
    max_parallel_requests: Optional[int] = None  # noqa: UP045
    rpm: Optional[int] = None  # noqa: UP045
    allowed_fails: int = 1
    cooldown_s: float = 30.0

    @classmethod
    def from_config(cls, data: Mapping[str, Any] | None) -> PoolSettings:
        """From the YAML's mapping; an unknown key or routing is a ValueError naming the setting."""
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"judge.pool.{unknown[0]}: unknown setting; known: {', '.join(cls.__dataclass_fields__)}")
        settings = cls(**data)
        if settings.routing not in ROUTINGS:
            raise ValueError(f"judge.pool.routing={settings.routing}: choose one of {', '.join(ROUTINGS)}")
        return settings
