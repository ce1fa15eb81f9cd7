"""litellm speed-ups for judge calls, installed explicitly (`install`) by the entry points.

Three things, each scoped to calls a `LiteLLMCompleter` makes (context variables), each switchable off with
JUDGESCOPE_LEAN_LITELLM=0: (1) litellm's per-call INFO log at WARNING (the price map litellm loads at import
is chosen before, by the entry points: judge.spend.price_map); (2) litellm's per-call post-processing hooks skipped when nothing reads them;
(3) litellm's request set-up run inline on the framework's event loops instead of in a thread pool.
They rely on litellm internals; `missing()` lists what this litellm lacks, and tests/test_speedups.py fails
loudly when an upgrade removes one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import logging
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import litellm


def prepare_import() -> None:
    """Settings litellm reads: its bundled price map (offline, when litellm is not imported yet and no entry
    point chose one) and a quiet per-call log. Called by `install`, never at import (importing a judge module
    changes no process-wide state)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if not os.environ.get(
        "LITELLM_LOG"
    ):  # litellm logs one INFO line per call; keep the progress bar readable
        logging.getLogger("LiteLLM").setLevel(logging.WARNING)


def install() -> bool:
    """Install every speed-up (entry points call this once); False when this litellm lacks a hook."""
    prepare_import()
    return lean_enabled() and install_lean_litellm()


def missing() -> list[str]:
    """The litellm internals the speed-ups rely on that this litellm does not have."""
    utils, main = getattr(litellm, "utils", None), getattr(litellm, "main", None)
    wanted = {f"litellm.utils.{name}": getattr(utils, name, None) for name in _LEAN_HOOKS}
    wanted["litellm.main.completion"] = getattr(main, "completion", None)
    wanted["litellm.acompletion"] = getattr(litellm, "acompletion", None)
    return [name for name, found in wanted.items() if not callable(found)]


# --- lean litellm calls -----------------------------------------------------------------------------------
# litellm post-processes every successful call twice in ways the framework never reads: it prices the
# response (`update_response_metadata` -> cost map look-ups with model-name generalisation, the largest
# per-call CPU cost in a profile) and it builds a standard logging payload for success callbacks
# (`dispatch_success_logging`). judgescope prices calls itself from token counts (the judge's `Prices`,
# judge.spend.pricing, one look-up per model) and registers no callbacks, so calls made by a `LiteLLMCompleter` skip
# both - unless the user has configured litellm callbacks or a budget, which need them. The skip is scoped by
# a context variable: any other litellm call in the same process is untouched. Set JUDGESCOPE_LEAN_LITELLM=0
# to turn it off.

LEAN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("judgescope_lean_litellm", default=False)
_LEAN_HOOKS = ("update_response_metadata", "dispatch_success_logging")


def _litellm_observed() -> bool:
    """True when the user configured litellm callbacks or a budget (which read cost and success logs)."""
    names = ("success_callback", "_async_success_callback", "callbacks", "input_callback")
    return any(getattr(litellm, n, None) for n in names) or bool(getattr(litellm, "max_budget", None))


def _lean_wrapper(original: Any) -> Any:
    @functools.wraps(original)
    def hook(*args: Any, **kwargs: Any) -> Any:
        if LEAN_CALL.get() and not _litellm_observed():
            return None
        return original(*args, **kwargs)

    hook.judgescope_lean = True  # type: ignore[attr-defined]
    return hook


@functools.lru_cache(maxsize=1)
def install_lean_litellm() -> bool:
    """Wrap litellm's per-call post-processing hooks once per process; False if this litellm lacks them."""
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner printed for every retried error
    module = getattr(litellm, "utils", None)
    hooks = [getattr(module, name, None) for name in _LEAN_HOOKS]
    if module is None or not all(callable(h) for h in hooks):
        return False
    for name, original in zip(_LEAN_HOOKS, hooks, strict=True):
        if not getattr(original, "judgescope_lean", False):
            setattr(module, name, _lean_wrapper(original))
    return True


def lean_enabled() -> bool:
    return os.environ.get("JUDGESCOPE_LEAN_LITELLM", "1").strip().lower() not in ("0", "false", "no", "off")


# `litellm.acompletion` runs its synchronous request set-up (`litellm.main.completion`, a few ms of pure CPU
# for HTTP providers) in the event loop's default thread pool, then awaits the request on the loop. With
# dozens of calls in flight the pool threads and the loop thread fight over the GIL, which costs more CPU
# and latency than the set-up itself. The framework's own event loops (`use_inline_setup`) run that set-up
# inline instead - only for providers whose set-up does no blocking I/O (a static API key, no credential
# refresh) and only for calls made by a `LiteLLMCompleter`; anything else still goes to a thread.
INLINE_SETUP_PROVIDERS = frozenset(
    {
        "openai",
        "hosted_vllm",
        "deepseek",
        "openrouter",
        "together_ai",
        "groq",
        "fireworks_ai",
        "mistral",
        "anthropic",
        "gemini",
        "xai",
        "cerebras",
        "deepinfra",
        "perplexity",
        "lm_studio",
        "llamafile",
    }
)
INLINE_SETUP: contextvars.ContextVar[bool] = contextvars.ContextVar("judgescope_inline_setup", default=False)


def _is_litellm_setup(fn: Any) -> bool:
    """`partial(ctx.run, partial(litellm.main.completion, ...))`, as litellm.acompletion submits it."""
    inner = fn.args[0] if isinstance(fn, functools.partial) and fn.args else None
    target = getattr(getattr(litellm, "main", None), "completion", None)
    return isinstance(inner, functools.partial) and target is not None and inner.func is target


class InlineSetupExecutor(ThreadPoolExecutor):
    """A default executor that runs litellm's request set-up inline for judge calls (see above)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        if INLINE_SETUP.get() and _is_litellm_setup(fn):
            future: Future[Any] = Future()
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001  (handed to the awaiting coroutine, as a thread would)
                future.set_exception(exc)
            return future
        return super().submit(fn, *args, **kwargs)


def use_inline_setup() -> None:
    """Make the running event loop (one the framework owns) run litellm's set-up inline for judge calls."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(InlineSetupExecutor(max_workers=4, thread_name_prefix="judgescope"))


# --- the garbage collector during the calls ---------------------------------------------------------------
# litellm's import leaves a heap of a few hundred thousand objects, and every call allocates enough to trigger
# collections; each full collection walks that whole heap again (a quarter of a one-process run's CPU went to
# it). The heap that exists when the calls start is moved out of the collector's sight (`gc.freeze`) for as
# long as they run, then handed back, so nothing is leaked past the run.


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the objects that exist now out of the garbage collector's passes until the block ends.

    Nested inside another freeze (an enclosing block; a host application that froze its own heap) it freezes
    what was created since, and leaves the unfreezing to that outer freeze: unfreezing here would hand the
    caller's frozen objects back to the collector. (The workers rely on this: they freeze the heap again just
    before forking, inside the study's block, so litellm's lazily imported state is frozen too.)"""
    global _OPEN
    # inside a block of ours the heap is frozen already: gc.get_freeze_count walks the whole frozen heap
    # (~30 ms once litellm is imported), and a replay opens one block per chunk of cached calls
    outermost = _OPEN == 0 and gc.get_freeze_count() == 0
    gc.freeze()
    _OPEN += 1
    try:
        yield
    finally:
        _OPEN -= 1
        if outermost:
            gc.unfreeze()


_OPEN = 0  # frozen_heap blocks open in this process (a forked worker inherits its parent's)
