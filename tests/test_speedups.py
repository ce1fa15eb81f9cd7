"""The litellm speed-ups (judge.speedups) rely on litellm internals: this fails loudly when an upgrade
removes or changes one, instead of the speed-ups silently turning themselves off."""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
import pytest

from judge import speedups
from tests.support.openai_server import ScriptedServer, Step


def test_litellm_still_has_what_the_speedups_rely_on() -> None:
    assert speedups.missing() == [], (
        f"litellm {litellm.__version__ if hasattr(litellm, '__version__') else ''} "
        "changed: update judge/speedups.py"
    )
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
            response = await litellm.acompletion(
                model="openai/test",
                api_base=api_base,
                api_key="no-key",
                messages=[{"role": "user", "content": "hi"}],
                max_retries=0,
            )
        finally:
            speedups.INLINE_SETUP.reset(token)
        return str(response.choices[0].message.content)

    with ScriptedServer(lambda body: Step(200, "hello")).running() as server:
        assert asyncio.run(one(server.api_base)) == "hello"
    assert True in seen, "litellm.acompletion no longer submits litellm.main.completion as we expect"


def test_completion_to_dict_is_dataclass_asdict() -> None:
    """`Completion.to_dict` lists its fields by hand (no deep copies): a field added later must be listed too,
    or the cache would drop it."""
    import dataclasses  # noqa: PLC0415

    from judge.types import Completion, TokenLogprob  # noqa: PLC0415

    plain = Completion("{}", "stop", 3, 2, None, 0.5)
    assert plain.to_dict() == {k: v for k, v in dataclasses.asdict(plain).items() if k != "logprobs"}
    assert list(plain.to_dict()) == [f.name for f in dataclasses.fields(Completion) if f.name != "logprobs"]
    token = TokenLogprob("1", (("1", -0.1), ("2", -2.5)))
    rich = Completion("1", "stop", 3, 1, 0.25, 0.5, logprobs=(token,))
    assert Completion.from_dict(rich.to_dict()) == rich


def test_redaction_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`redact` memoises the secrets it looks for: a key set (or removed) later must still be seen (or
    forgotten)."""
    from judge.secrets import REDACTED, redact  # noqa: PLC0415

    assert redact("echo sk-late-key-123456") == "echo sk-late-key-123456"
    monkeypatch.setenv("LATE_API_KEY", "sk-late-key-123456")
    assert redact('echo sk-late-key-123456 "sk-late-key-123456"') == f'echo {REDACTED} "{REDACTED}"'
    monkeypatch.delenv("LATE_API_KEY")
    assert redact("echo sk-late-key-123456") == "echo sk-late-key-123456"


def test_frozen_heap_hands_the_heap_back() -> None:
    import gc  # noqa: PLC0415

    before = gc.get_freeze_count()
    with speedups.frozen_heap():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0 or gc.get_freeze_count() == before == 0


def test_frozen_heap_inside_another_freeze_leaves_it_alone() -> None:
    import gc  # noqa: PLC0415

    gc.freeze()  # a host application (or an enclosing block) froze its heap
    try:
        outer = gc.get_freeze_count()
        with speedups.frozen_heap(), speedups.frozen_heap():
            pass
        assert gc.get_freeze_count() >= outer > 0  # still frozen: the caller's to unfreeze
    finally:
        gc.unfreeze()


def test_workers_take_every_call_once_from_the_shared_counter() -> None:
    """Forked workers take calls from one shared counter: each call exactly once, whoever asks."""
    import multiprocessing  # noqa: PLC0415

    from experiments.workers import _taker  # noqa: PLC0415
    from judge.calls import Call  # noqa: PLC0415

    calls = [Call(i, [], {}, f"k{i}") for i in range(7)]
    counter = multiprocessing.get_context("fork").Value("q", 0)
    first, second = _taker(calls, counter), _taker(calls, counter)
    taken = [first(), second(), second(), first(), first(), second(), first(), second(), first()]
    assert [c.index for c in taken if c is not None] == list(range(7))
    assert taken[-2:] == [None, None]


_NO_GLOBAL_STATE = """
import importlib, json, logging, os, pkgutil, sys
import judge
env = dict(os.environ)
for info in pkgutil.walk_packages(judge.__path__, "judge."):
    importlib.import_module(info.name)
from judge.completer import LiteLLMCompleter
LiteLLMCompleter("openai/x")
import litellm
print(json.dumps({
    "env_changed": sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)),
    "log_level": logging.getLogger("LiteLLM").level,
    "hooks_wrapped": getattr(litellm.utils.update_response_metadata, "judgescope_lean", False),
    "suppress_debug_info": bool(litellm.suppress_debug_info),
    "heavy": [m for m in ("torch", "transformers") if m in sys.modules],
}))
"""


def test_importing_judge_modules_changes_no_global_state(tmp_path: Any) -> None:
    """Importing every judge module and constructing a completer leaves the environment and litellm's settings
    as they were: the speed-ups are the entry points' to install (`speedups.install`), once. The same fresh
    interpreter checks that importing them (judge.local.provider and judge.local.model among them) loads
    neither torch nor transformers: the embedded model's libraries load when it first answers (this was
    tests/test_local_model.py's test_import_is_cheap, a fresh interpreter of its own)."""
    import json  # noqa: PLC0415
    import logging  # noqa: PLC0415
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("LITELLM_LOG", "JUDGESCOPE_LEAN_LITELLM")}
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="true", PYTHONPATH=str(root)
    )  # offline, in a spelling no one writes
    done = subprocess.run(
        [sys.executable, "-c", _NO_GLOBAL_STATE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    state = json.loads(done.stdout.strip().splitlines()[-1])
    expected = {
        "env_changed": [],
        "log_level": logging.NOTSET,
        "hooks_wrapped": False,
        "suppress_debug_info": False,
        "heavy": [],
    }
    assert state == expected
