"""The litellm speed-ups (judge.speedups) rely on litellm internals: this fails loudly when an upgrade
removes or changes one, instead of the speed-ups silently turning themselves off."""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
import pytest

from judge import speedups
from tests.openai_server import ScriptedServer, Step


def test_litellm_still_has_what_the_speedups_rely_on() -> None:
    assert speedups.missing() == [], f"litellm {litellm.__version__ if hasattr(litellm, '__version__') else ''} " \
        "changed: update judge/speedups.py"  # fmt: skip
    assert speedups.install() is True
    for name in ("update_response_metadata", "dispatch_success_logging"):
        assert getattr(getattr(litellm.utils, name), "judgescope_lean", False), name


def test_inline_setup_recognises_litellms_request_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm.acompletion must still hand its set-up to the loop's default executor in the shape we match."""
    seen: list[bool] = []
    original = speedups._is_litellm_setup

    def spy(fn: Any) -> bool:
        seen.append(original(fn))
        return seen[-1]

    monkeypatch.setattr(speedups, "_is_litellm_setup", spy)

    async def one(api_base: str) -> str:
        speedups.use_inline_setup()
        token = speedups.INLINE_SETUP.set(True)
        try:
            response = await litellm.acompletion(model="openai/test", api_base=api_base, api_key="no-key",
                                                 messages=[{"role": "user", "content": "hi"}], max_retries=0)
        finally:
            speedups.INLINE_SETUP.reset(token)
        return str(response.choices[0].message.content)

    with ScriptedServer(lambda body: Step(200, "hello")).running() as server:
        assert asyncio.run(one(server.api_base)) == "hello"
    assert True in seen, "litellm.acompletion no longer submits litellm.main.completion as we expect"
