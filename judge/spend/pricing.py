"""Prices and token estimates for a judge, before any call is made (the plan, the budget, batch accounting).

Prices come from litellm's bundled price map under litellm's own names (`input_cost_per_token`,
`output_cost_per_token` and their `_batches` variants); a judge config may override any of them with the same
names. A price nobody knows stays None - a cost computed from it is unknown, never 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import litellm

from judge.spend import price_map
from judge.types import Message

PRICE_FIELDS = (
    "input_cost_per_token",
    "output_cost_per_token",
    "input_cost_per_token_batches",
    "output_cost_per_token_batches",
)


@dataclass(frozen=True)
class Prices:
    """USD per token, live and batch; None = unknown. `source` says where each came from."""

    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    input_cost_per_token_batches: float | None = None
    output_cost_per_token_batches: float | None = None
    source: str = "unknown"

    def per_token(self, batch: bool) -> tuple[float, float] | None:
        """(input, output) USD per token for live or batch calls, None when either is unknown."""
        pair = (
            (self.input_cost_per_token_batches, self.output_cost_per_token_batches)
            if batch
            else (self.input_cost_per_token, self.output_cost_per_token)
        )
        return None if pair[0] is None or pair[1] is None else (pair[0], pair[1])

    def cost(self, prompt_tokens: float, completion_tokens: float, *, batch: bool = False) -> float | None:
        """USD for these token counts, None when the price is unknown."""
        pair = self.per_token(batch)
        return None if pair is None else pair[0] * prompt_tokens + pair[1] * completion_tokens


_KNOWN: dict[str, dict[str, float | None]] = {}  # litellm's prices per model, looked up once


def _litellm_prices(model: str) -> dict[str, float | None]:
    """litellm's prices for `model`; a model it does not know is asked again next time (a provider registered
    later, such as the embedded model's, then finds its prices)."""
    if model in _KNOWN:
        return _KNOWN[model]
    try:
        info: Mapping[str, Any] = dict(litellm.get_model_info(model))
    except Exception:  # noqa: BLE001  (litellm raises a bare Exception for unmapped models)
        return {}
    _KNOWN[model] = {
        name: (float(info[name]) if info.get(name) is not None else None) for name in PRICE_FIELDS
    }
    return _KNOWN[model]


def prices_for(model: str, overrides: Mapping[str, Any] | None = None) -> Prices:
    """litellm's prices for `model`, each replaced by the judge config's value where it sets one.

    A bad override value is a ValueError naming the setting."""
    found = _litellm_prices(model)
    values: dict[str, float | None] = {name: found.get(name) for name in PRICE_FIELDS}
    overridden = []
    for name in PRICE_FIELDS:
        value = (overrides or {}).get(name)
        if value is None:
            continue
        try:
            values[name] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"judge.{name}: {value!r} is not a number (USD per token)") from None
        if values[name] < 0:  # type: ignore[operator]
            raise ValueError(f"judge.{name}: {value!r} is negative")
        overridden.append(name)
    known = any(v is not None for v in values.values())
    source = (
        "judge config"
        if overridden and len(overridden) == len(PRICE_FIELDS)
        else ("litellm + judge config" if overridden else ("litellm" if known else "unknown"))
    )
    return Prices(**values, source=source)


def prompt_tokens(model: str, messages: Sequence[Message]) -> int:
    """Prompt tokens of `messages` with litellm's tokenizer support for `model` (tiktoken as its fallback)."""
    return int(litellm.token_counter(model=model, messages=[dict(m) for m in messages]))


_PIECES: dict[
    tuple[int, str], int
] = {}  # (encoding, piece of text) -> its tokens, while `pieces_counted_once`


@contextlib.contextmanager
def pieces_counted_once() -> Iterator[None]:
    """Within: litellm's token counts of the same piece of text are computed once.

    `litellm.token_counter` counts a message's text with tiktoken in fixed-size pieces (1,024 characters); a
    study's prompts repeat most of theirs (the template's instructions, an instance's papers come before the
    texts judged), so the plan of a study counted the same pieces tens of times. The memo wraps litellm's own
    per-piece count (same function, same input: the same counts); a litellm without it is left as it is."""
    module = sys.modules.get("litellm.litellm_core_utils.token_counter")
    original = getattr(module, "_encoding_count", None)
    if module is None or original is None:
        yield
        return

    def count(encoding: Any, text: str) -> int:
        key = (id(encoding), text)
        found = _PIECES.get(key)
        if found is None:
            found = _PIECES[key] = original(encoding, text)
        return found

    module._encoding_count = count  # type: ignore[attr-defined]
    try:
        yield
    finally:
        module._encoding_count = original  # type: ignore[attr-defined]
        _PIECES.clear()


#: a prompt counted from its texts is also counted by litellm whole every this many prompts (and the first of
#: each message layout): a difference means this litellm counts otherwise, and the caller counts all again
CHECK_EVERY = 32
#: the message keys whose text litellm counts on its own (with a fixed count per message and per `name`)
_TEXT_KEYS = frozenset(("role", "content", "name"))


class PromptCounter:
    """`prompt_tokens` of many prompts of one model, without litellm's per-call set-up.

    `litellm.token_counter` counts a list of text messages as a fixed number per message (and per `name`) plus
    its text count function over each text (role, content, name), plus a fixed number for the whole prompt;
    building that function and the fixed numbers anew for each prompt (the tokenizer's choice, the model's
    accounting) was half of a full-size plan's counting. Here the function is taken from litellm once, and the
    fixed part is litellm's own count of the first prompt of each message layout minus its texts' counts.
    That prompt, and every CHECK_EVERY-th, is counted by litellm whole and compared: on any difference
    `exact` turns false (and every later prompt is counted by litellm); the caller then counts all its
    prompts again with `prompt_tokens`. A litellm without the function, or a message with other keys or
    non-text parts, is counted by `prompt_tokens`."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.exact = True
        module = sys.modules.get("litellm.litellm_core_utils.token_counter")
        factory = getattr(module, "_get_count_function", None)
        self._text: Any = None
        if factory is not None:
            try:
                self._text = factory(model, None)
            except Exception:  # noqa: BLE001  (a model litellm cannot choose a tokenizer for: counted whole)
                self._text = None
        self._fixed: dict[
            tuple[tuple[str, ...], ...], int
        ] = {}  # message layout -> the count beside the texts
        self._counted = 0

    def __call__(self, messages: Sequence[Message]) -> int:
        if self._text is None or not all(
            set(m) <= _TEXT_KEYS and all(isinstance(v, str) for v in m.values()) for m in messages
        ):
            return prompt_tokens(self.model, messages)
        self._counted += 1
        layout = tuple((str(m.get("role")), *sorted(m)) for m in messages)
        texts = sum(self._text(v) for m in messages for v in m.values())
        fixed = self._fixed.get(layout)
        if fixed is not None and self._counted % CHECK_EVERY:
            return texts + fixed
        whole = prompt_tokens(self.model, messages)
        if fixed is None:
            self._fixed[layout] = whole - texts
        elif whole != texts + fixed:
            self.exact, self._text = False, None
        return whole


@contextlib.contextmanager
def prompts_counted(model: str) -> Iterator[PromptCounter]:
    """A `PromptCounter` for `model`, with litellm's counts of repeated pieces of text computed once
    (`pieces_counted_once`): the plan of a whole study."""
    with pieces_counted_once():
        yield PromptCounter(model)


def price_record(model: str, prices: Prices) -> dict[str, Any]:
    """Which price map priced a run, for plan.json and manifest.json (judge.spend.price_map): `map` as chosen
    (bundled / remote), where litellm says it loaded it from (a failed download falls back to the bundled
    copy), its revision where this litellm tells it, the litellm version, and a hash of the judge's prices."""
    try:
        from litellm.litellm_core_utils.get_model_cost_map import get_model_cost_map_source_info  # noqa: PLC0415

        info: Mapping[str, Any] = dict(get_model_cost_map_source_info())
    except (ImportError, AttributeError):  # an older litellm does not say
        info = {}
    used = {name: getattr(prices, name) for name in PRICE_FIELDS}
    digest = hashlib.sha256(json.dumps({"model": model, **used}, sort_keys=True).encode()).hexdigest()
    return {
        "map": price_map.in_use(),
        "loaded_from": info.get("source"),
        "fallback_reason": info.get("fallback_reason"),
        "revision": info.get("source_revision"),
        "litellm_version": metadata.version("litellm"),
        "prices_sha256": digest,
    }
