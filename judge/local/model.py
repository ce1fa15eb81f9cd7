"""The embedded default judge: SmolLM2-135M-Instruct running in-process on the CPU, fully offline.

Where the weights come from and how they are converted and loaded once per process is in
`judge.local.weights`; this module generates (seeded sampling, stop at the end of the JSON object) and
computes perplexity with the loaded model. Importing it is cheap: torch is imported on first use.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from judge.local.weights import (
    CONTEXT_LENGTH,
    GGUF_FILENAME,
    INSTALL_COMMAND,
    MODEL_NAME,
    LocalModelMissing,
    cache_dir,
    gguf_path,
    load_model,
    unload_model,
)

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "CONTEXT_LENGTH",
    "GGUF_FILENAME",
    "INSTALL_COMMAND",
    "MODEL_NAME",
    "GenerationResult",
    "LocalModelMissing",
    "PromptTooLong",
    "cache_dir",
    "generate",
    "gguf_path",
    "json_object_end",
    "load_model",
    "perplexity",
    "unload_model",
]

PPL_MAX_TOKENS = 2048  # texts are truncated to this many tokens for perplexity
_PPL_BATCH_TOKENS = 2048  # padded tokens per forward pass in perplexity (bounds the logits' memory)
_RUN_LOCK = threading.Lock()  # the torch model is shared: one forward/generate at a time


class PromptTooLong(ValueError):
    """The chat-templated prompt does not fit the model's context window."""


@dataclass(frozen=True)
class GenerationResult:
    text: str  # starts with the prefill
    prompt_tokens: int  # chat-templated prompt incl. the prefill
    completion_tokens: int  # tokens the model generated (a closing end-of-turn token included)
    finish_reason: Literal["stop", "length"]
    # OpenAI-shaped `logprobs.content` (structured decoding only, when asked for): one entry per token
    logprobs: list[dict[str, Any]] | None = None


# --------------------------------------------------------------------------------------------- generation


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    ids: set[int] = set()
    eos = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(eos)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.add(tid)
    return ids


def json_object_end(text: str) -> int | None:
    """Index just past the first balanced top-level ``{...}`` in ``text`` (strings respected), or None."""
    depth = 0
    in_string = escaped = False
    started = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            if started:
                in_string = True
        elif ch == "{":
            depth += 1
            started = True
        elif ch == "}" and started:
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _sample(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < top_p  # always keeps the top token
        sorted_probs = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
        choice = torch.multinomial(sorted_probs, 1, generator=gen)
        return int(order[choice].item())
    return int(torch.multinomial(probs, 1, generator=gen).item())


def generate(
    messages: list[dict[str, Any]],
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    prefill: str = "",
    top_p: float = 1.0,
    stop: Sequence[str] | None = None,
    json_object: bool = False,
) -> GenerationResult:
    """Chat completion with the embedded model.

    ``messages``: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]``.
    ``prefill`` is appended after the assistant header; the returned ``text`` starts with it.
    ``temperature <= 0`` decodes greedily; otherwise samples with a ``torch.Generator`` seeded by
    ``seed`` (same messages + seed -> same text; ``seed=None`` -> a fresh random seed).
    ``stop``: strings that end the completion (not included in ``text``; finish_reason "stop").
    ``json_object``: end the completion as soon as the first top-level JSON object in
    ``prefill + completion`` is closed, and drop anything after it.
    """
    import torch

    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    model, tokenizer = load_model()
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefill
    input_ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
    n_prompt = int(input_ids.shape[1])
    budget = min(max_tokens, CONTEXT_LENGTH - n_prompt)
    if budget < 1:
        raise PromptTooLong(
            f"prompt is {n_prompt} tokens; the local model's context window is {CONTEXT_LENGTH} tokens"
        )
    stop = [s for s in (stop or []) if s]
    eos_ids = _stop_ids(model, tokenizer)
    gen: torch.Generator | None = None
    if temperature > 0:
        gen = torch.Generator(device="cpu")
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(seed))

    new_ids: list[int] = []
    finish: Literal["stop", "length"] = "length"
    cut: int | None = None  # character cut in the completion text (stop string / end of JSON object)
    with _RUN_LOCK, torch.inference_mode():
        out = model(input_ids=input_ids, use_cache=True)
        for _ in range(budget):
            token = _sample(out.logits[0, -1], temperature, top_p, gen)
            new_ids.append(token)
            if token in eos_ids:
                finish = "stop"
                break
            if stop or json_object:
                completion = tokenizer.decode(new_ids, skip_special_tokens=True)
                hits = [i for i in (completion.find(s) for s in stop) if i >= 0]
                if json_object:
                    end = json_object_end(prefill + completion)
                    if end is not None:
                        hits.append(max(end - len(prefill), 0))
                if hits:
                    cut, finish = min(hits), "stop"
                    break
            if len(new_ids) == budget:
                break
            # transformers 5 returns/accepts the KV cache as `cache`; older releases as `past_key_values`
            cache_key = "cache" if "cache" in out else "past_key_values"
            out = model(input_ids=torch.tensor([[token]]), use_cache=True, **{cache_key: out[cache_key]})
    completion = tokenizer.decode(new_ids, skip_special_tokens=True)
    if cut is not None:
        completion = completion[:cut]
    return GenerationResult(
        text=prefill + completion,
        prompt_tokens=n_prompt,
        completion_tokens=len(new_ids),
        finish_reason=finish,
    )


# --------------------------------------------------------------------------------------------- perplexity


def perplexity(texts: list[str]) -> list[float]:
    """Per-text perplexity ``exp(mean token NLL)`` under the embedded model.

    Each text is scored as a fresh document (prefixed with ``<|endoftext|>``, so its first token
    counts too), truncated to 2048 tokens; an empty text gives ``nan``. Texts are batched by length.
    """
    import torch

    if not texts:
        return []
    model, tokenizer = load_model()
    prefix_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    prefix = [prefix_id] if isinstance(prefix_id, int) and prefix_id != tokenizer.unk_token_id else []
    encoded = [(prefix + tokenizer(t, add_special_tokens=False)["input_ids"])[:PPL_MAX_TOKENS] for t in texts]
    results = [math.nan] * len(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    batches: list[list[int]] = []
    for i in order:
        if len(encoded[i]) < 2:
            continue  # nothing to predict
        if batches and len(encoded[i]) * (len(batches[-1]) + 1) <= _PPL_BATCH_TOKENS:
            batches[-1].append(i)  # sorted ascending, so this text is the longest in its batch
        else:
            batches.append([i])

    with _RUN_LOCK, torch.inference_mode():
        for batch in batches:
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
                mask[row, : len(encoded[i])] = 1
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), ids[:, 1:], reduction="none"
            )  # (batch, width-1)
            target_mask = mask[:, 1:].float()
            mean_nll = (nll * target_mask).sum(1) / target_mask.sum(1)
            for row, i in enumerate(batch):
                results[i] = float(math.exp(mean_nll[row].item()))
    return results
