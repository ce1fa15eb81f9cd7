"""Structured output for the embedded model: decoding constrained to a JSON schema of enum values.

What OpenAI's structured outputs, Ollama's `format` and vLLM's guided decoding do for their models: the
JSON skeleton (braces, keys, commas) is forced, and at every value the model chooses among the schema's
allowed values only, by its own probabilities (sampled at the requested temperature with a seeded
generator, or greedy at 0). A 135M model cannot reliably write valid JSON by itself; with this every answer
parses, and the scores are still the model's choices.

Supported schemas: objects (properties in declared order, nested objects allowed) whose leaves are `enum`s
of integers or strings — exactly what `judge.rubric.response_format` produces.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.local import model as local_model


class UnsupportedSchema(ValueError):
    """The schema uses something this decoder does not handle (only objects of enums are supported)."""


@dataclass(frozen=True)
class Choice:
    """A value position: one of `options` (JSON texts), chosen by the model."""

    options: tuple[str, ...]


Segment = str | Choice


def schema_segments(schema: Mapping[str, Any]) -> list[Segment]:
    """Flatten a schema into literal text and value choices, in output order."""
    if "enum" in schema:
        values = schema["enum"]
        if not values:
            raise UnsupportedSchema("an enum needs at least one value")
        return [Choice(tuple(json.dumps(v) for v in values))]
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), Mapping):
        raise UnsupportedSchema(f"unsupported schema node: {json.dumps(schema)[:80]}")
    out: list[Segment] = ["{"]
    for i, (name, sub) in enumerate(schema["properties"].items()):
        out.append(("" if i == 0 else ", ") + json.dumps(name) + ": ")
        out.extend(schema_segments(sub))
    out.append("}")
    return _merge_literals(out)


def _merge_literals(segments: Sequence[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for seg in segments:
        if isinstance(seg, str) and merged and isinstance(merged[-1], str):
            merged[-1] += seg
        else:
            merged.append(seg)
    return merged


def _with_follow(segments: Sequence[Segment]) -> list[tuple[Segment, str]]:
    """Pair each choice with the first character of the literal after it.

    Options then end with that character ("1," vs "10,"), so no option is a prefix of another and the
    model itself decides where a value ends.
    """
    out: list[tuple[Segment, str]] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else ""
        follow = nxt[0] if isinstance(seg, Choice) and isinstance(nxt, str) and nxt else ""
        out.append((seg, follow))
    return out


def generate_structured(
    messages: list[dict[str, Any]],
    schema: Mapping[str, Any],
    *,
    temperature: float,
    seed: int | None,
    logprobs: bool = False,
) -> local_model.GenerationResult:
    """One answer that matches `schema`, each value chosen by the model."""
    import torch

    segments = _with_follow(schema_segments(schema))
    model, tokenizer = local_model.load_model()
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    if len(prompt_ids) >= local_model.CONTEXT_LENGTH - 64:
        raise local_model.PromptTooLong(
            f"prompt is {len(prompt_ids)} tokens; the local model's context window is {local_model.CONTEXT_LENGTH}"
        )
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed or 0))
    decoder = _Decoder(
        model, torch, prompt_ids, (lambda ids: tokenizer.decode(list(ids))) if logprobs else None
    )
    text, skip = "", 0
    with local_model._RUN_LOCK, torch.inference_mode():
        for seg, follow in segments:
            if isinstance(seg, str):
                literal = seg[skip:]
                skip = 0
                if literal:
                    decoder.push(tokenizer(literal, add_special_tokens=False)["input_ids"])
                    text += literal
                continue
            options = [tokenizer(o + follow, add_special_tokens=False)["input_ids"] for o in seg.options]
            whole = decoder.option_logprobs(options) if logprobs else None
            chosen = decoder.choose(options, temperature, gen)
            if whole is not None:  # the value as one entry carrying every allowed value's probability
                decoder.trace[-len(options[chosen]) :] = [
                    (seg.options[chosen], list(zip(seg.options, whole, strict=True)))
                ]
                if follow:
                    decoder.trace.append((follow, None))
            text += seg.options[chosen] + follow
            skip = len(follow)
    return local_model.GenerationResult(
        text=text,
        prompt_tokens=len(prompt_ids),
        completion_tokens=decoder.generated,
        finish_reason="stop",
        logprobs=_openai_logprobs(decoder.trace) if logprobs else None,
    )


Trace = list[tuple[str, list[tuple[str, float]] | None]]


def _openai_logprobs(trace: Trace) -> list[dict[str, Any]]:
    """The decoder's trace as OpenAI `logprobs.content`. Forced text (the schema's) has probability 1 under
    the constrained decoding. A value is one entry whose alternatives are every allowed value with the
    model's probability of writing it whole (the product over its tokens, at temperature 1: the model's own
    probabilities), so a 10 the tokenizer spells "1", "0" is a 10, not a 1 (issue 24.4)."""
    out = []
    for text, dist in trace:
        if dist is None:
            out.append({"token": text, "logprob": 0.0, "top_logprobs": [{"token": text, "logprob": 0.0}]})
            continue
        top = [{"token": t, "logprob": lp} for t, lp in dist]
        out.append({"token": text, "logprob": dict(dist)[text], "top_logprobs": top})
    return out


class _PrefixCache:
    """KV caches of recent prompts, so a prompt that shares a prefix with one of them (the same instance's
    background, or another sample of the same prompt) only computes its new tokens - like vLLM's
    automatic prefix caching. Entries are copied in and out, never mutated in place."""

    def __init__(self, size: int = 4, min_shared: int = 16) -> None:
        self.size, self.min_shared = size, min_shared
        self.entries: list[tuple[tuple[int, ...], Any]] = []

    def lookup(self, ids: Sequence[int]) -> tuple[int, Any]:
        """(number of leading tokens whose KV is reused, a private copy of that cache) or (0, None)."""
        best, best_len, best_cache = 0, 0, None
        for stored, cache in self.entries:
            n = _shared(stored, ids)
            if n > best:
                best, best_len, best_cache = n, len(stored), cache
        best = min(best, len(ids) - 1)  # always recompute the last token: its logits are needed
        if best < self.min_shared or best_cache is None:
            return 0, None
        cache = copy.deepcopy(best_cache)
        if best < best_len:
            cache.crop(best - best_len)  # transformers 5: a negative count removes that many tokens
        return best, cache

    def store(self, ids: Sequence[int], cache: Any) -> None:
        self.entries = [e for e in self.entries if e[0] != tuple(ids)][-(self.size - 1) :]
        self.entries.append((tuple(ids), copy.deepcopy(cache)))


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


PREFIX_CACHE = _PrefixCache()


class _Decoder:
    """Feeds tokens through the model with a KV cache; picks tokens restricted to an option trie."""

    def __init__(
        self,
        model: Any,
        torch: Any,
        prompt_ids: list[int],
        decode: Callable[[Sequence[int]], str] | None = None,
    ) -> None:
        self.model, self.torch, self.decode = model, torch, decode
        reused, self.cache = PREFIX_CACHE.lookup(prompt_ids)
        self.fed: list[int] = list(prompt_ids[:reused])  # exactly the tokens whose KV is in self.cache
        self.pending: list[int] = list(prompt_ids[reused:])
        self.logits: Any = None
        self.generated = 0  # tokens after the prompt: the answer's length
        # the answer's text piece by piece (kept only with `decode`: log-probabilities asked for), with the
        # (alternative, log-probability) list where the model chose
        self.trace: Trace = []
        self._prompt_stored = False

    def push(self, ids: Sequence[int]) -> None:
        self.pending.extend(ids)
        self.generated += len(ids)
        if self.decode is not None:
            self.trace.extend((self.decode([int(i)]), None) for i in ids)

    def _flush(self) -> None:
        if not self.pending:
            return
        ids = self.torch.tensor([self.pending])
        kwargs = {"cache": self.cache} if self.cache is not None else {}
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **kwargs)
        self.cache = out["cache"]
        self.logits = out.logits[0, -1]
        self.fed += self.pending
        self.pending = []
        if not self._prompt_stored:  # the prompt (and the answer's forced opening) is now in the cache
            PREFIX_CACHE.store(self.fed, self.cache)
            self._prompt_stored = True

    def choose(self, options: Sequence[Sequence[int]], temperature: float, gen: Any) -> int:
        """Walk the options' token trie; the model picks wherever options diverge. Returns the option index."""
        prefix: list[int] = []
        while True:
            alive = [i for i, o in enumerate(options) if list(o[: len(prefix)]) == prefix]
            finished = [i for i in alive if len(options[i]) == len(prefix)]
            if finished:
                return finished[0]
            allowed = sorted({options[i][len(prefix)] for i in alive})
            token = allowed[0] if len(allowed) == 1 else self._pick(allowed, temperature, gen)
            prefix.append(token)
            self.push([token])

    def option_logprobs(self, options: Sequence[Sequence[int]]) -> list[float]:
        """log P(option) for every option: the product over its tokens of the model's probability among the
        allowed tokens at that point. Branch points below the root are run from the current KV cache and cropped
        off again, so the decoding that follows (and its sampled answer) is unchanged."""
        self._flush()
        base = self.cache.get_seq_length()
        out = [0.0] * len(options)

        def walk(prefix: list[int], logp: float, logits: Any) -> None:
            alive = [i for i, o in enumerate(options) if list(o[: len(prefix)]) == prefix]
            for i in alive:
                if len(options[i]) == len(prefix):
                    out[i] = logp
            allowed = sorted({options[i][len(prefix)] for i in alive if len(options[i]) > len(prefix)})
            if len(allowed) == 1:
                walk([*prefix, allowed[0]], logp, None)
            elif allowed:
                if logits is None:  # a branch point below the root: peek, then drop its cache entries again
                    ids = self.torch.tensor([prefix])
                    step = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, cache=self.cache)
                    logits = step.logits[0, -1]
                    self.cache = step["cache"]
                    self.cache.crop(base - self.cache.get_seq_length())  # a negative count: drop that many
                lps = self.torch.log_softmax(logits[allowed].float(), dim=-1).tolist()
                for token, lp in zip(allowed, lps, strict=True):
                    walk([*prefix, token], logp + lp, None)

        walk([], 0.0, self.logits)
        return out

    def _pick(self, allowed: list[int], temperature: float, gen: Any) -> int:
        self._flush()
        return allowed[local_model._sample(self.logits[allowed], temperature, 1.0, gen)]
