"""Issue 35, item 3 (replay at 10k judgments/s): a replay computes the keys of a chunk of calls together
(`judge.cache.store.cache_keys`: the endpoint, the rubric version's JSON and each (parameters, sample) tail once,
a prompt's hash state reused for its samples), and composes each job of a `-m` sweep once
(`experiments.cli.compose_once`). The keys must stay those of the documented format byte for byte - a cache
written before must still answer every call, nothing already paid for asked again - and a job's config must
be what Hydra composes for it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra import initialize_config_module
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from hydra.plugins.sweeper import Sweeper
from hydra.types import RunMode
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from experiments.cli import compose_once
from experiments.modes.comparative import Comparative
from experiments.modes.independent import Independent
from experiments.modes.pairwise import Pairwise
from judge.cache.store import CallCache, cache_key, cache_keys, canonical_params
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.rubric import response_format
from judge.types import Completion
from tests.support.rubrics import CONF, discover, paper_instance

MODEL = "openai/judge"
API_BASE = "http://127.0.0.1:8000/v1"


def documented_key(
    messages: Any, params: dict[str, Any], sample_idx: Any, version: str, api_base: str | None = API_BASE
) -> str:
    """The key as judge.cache.store documents it (v0.1), computed here in one piece."""
    payload = {
        "api_base": api_base,
        "messages": messages,
        "model": MODEL,
        "params": params,
        "rubric_version": version,
        "sample_idx": sample_idx,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def test_keys_of_a_fixed_request_are_those_the_earlier_code_made() -> None:
    """Keys computed by the code before this change (main at cd03895) for one request and three samples: a
    cache written then is hit now."""
    messages = [
        {"role": "system", "content": 'Rate "novelty".\n\\ é ✓ \x01'},
        {"role": "user", "content": "<<<Q1>>> Is X better?"},
    ]
    schema = {"type": "object", "properties": {"b": {"type": "integer"}}}
    params = {
        "temperature": 0.1,
        "seed": 7,
        "max_tokens": 160,
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    }
    calls = [(messages, params, s, canonical_params(params)) for s in range(3)]
    assert cache_keys(MODEL, calls, "novelty@abc123", API_BASE) == [
        "5a78624667e5147e1e2c7d66f3238532ffe7798d32697f89fac3d643b8289fa8",
        "3d91f810eddb59f25a161ceb22d1e452f4ae4ca7991d23ed14cd57b559769700",
        "9ef9835b31c58b03f154a6cb50b05ee3609e3cba0b77da465ca7ba9106079c1a",
    ]


def _every_prompt() -> list[tuple[str, Any]]:
    """(rubric name, prompt) for every shipped rubric in every mode that gives it prompts."""
    inst = paper_instance()
    out = []
    for name, rubric in discover(CONF).items():
        for mode in (Independent(), Comparative(), Pairwise()):
            try:
                prompts = mode.prompts(inst, rubric, 0)
            except Exception:  # noqa: BLE001, S112  (a mode this rubric does not take)
                continue
            out += [(name, p) for p in prompts]
    return out


def test_a_replays_keys_are_the_documented_keys_for_every_rubric_and_mode(tmp_path: Path) -> None:
    """`Judge.lookup_many` over every shipped rubric x mode shape, three samples each, with and without a
    structured-output schema: each key is the documented one, and a cache filled under the documented keys
    answers every call."""
    prompts = _every_prompt()
    shapes = {(name, p.mode, p.labels is None, len(p.messages)) for name, p in prompts}
    assert len({name for name, _ in prompts}) >= 6 and len(shapes) >= 10
    rubrics = discover(CONF)
    cache = CallCache(tmp_path / "cache")
    judge = Judge(LiteLLMCompleter(MODEL, api_base=API_BASE), cache, api_base=API_BASE)
    for structured in (False, True):
        calls, expected = [], []
        for name, prompt in prompts:
            params: dict[str, Any] = {"temperature": 0.0, "seed": 3, "max_tokens": prompt.answer_tokens}
            if structured:
                params["response_format"] = response_format(rubrics[name], prompt.labels)
            for s in range(3):
                sample = judge.sample(params, s)
                calls.append((prompt.messages, sample))
                expected.append(documented_key(prompt.messages, sample.params, s, rubrics[name].version))
        for key in expected:
            cache.set(key, Completion(f"answer {key[:8]}", "stop", 10, 5, None, 0.1))
        # one rubric version per lookup, as a study does
        names = [name for name, _ in prompts for _ in range(3)]
        for name in dict.fromkeys(names):
            mine = [i for i, n in enumerate(names) if n == name]
            found = judge.lookup_many([calls[i] for i in mine], rubrics[name].version)
            assert [k for k, _ in found] == [expected[i] for i in mine], name
            assert all(hit is not None and hit.completion is not None for _, hit in found), name
            assert [hit.completion.text for _, hit in found if hit and hit.completion] == [
                f"answer {expected[i][:8]}" for i in mine
            ]
    cache.close()


TEXT = st.text(max_size=40)
MESSAGES = st.lists(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "user"]), "content": TEXT}),
    min_size=1,
    max_size=3,
)
PARAMS = st.dictionaries(st.text(max_size=8), st.integers() | st.floats(allow_nan=False) | TEXT, max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            MESSAGES, st.lists(st.tuples(PARAMS, st.integers(0, 3) | st.booleans()), min_size=1, max_size=4)
        ),
        min_size=1,
        max_size=5,
    ),
    st.none() | st.sampled_from([API_BASE, f"{API_BASE}/", "http://u:secret-1111@127.0.0.1:8000/v1"]),
    st.booleans(),
)
def test_keys_computed_together_are_each_calls_own(
    prompts: list[tuple[list[dict[str, str]], list[tuple[dict[str, Any], Any]]]],
    api_base: str | None,
    give_json: bool,
) -> None:
    """Calls that share a messages list (a prompt's samples; the hash state is reused), parameters and sample
    indices that repeat (1, True: one dict key, two JSON texts), with or without the parameters' JSON: each key
    is `cache_key` of that call alone and the documented key."""
    calls = [
        (messages, params, idx, canonical_params(params) if give_json else None)
        for messages, samples in prompts
        for params, idx in samples
    ]
    keys = cache_keys(MODEL, calls, "v1", api_base)
    plain = None if api_base is None else API_BASE
    assert keys == [cache_key(MODEL, m, p, i, "v1", api_base) for m, p, i, _ in calls]
    assert keys == [documented_key(m, p, i, "v1", plain) for m, p, i, _ in calls]


# --- a -m sweep's jobs composed once --------------------------------------------------------------------


class _CheckOnly(Sweeper):
    """A sweeper that only checks a batch (Hydra's `validate_batch_is_legal`), as BasicSweeper does first."""

    def setup(self, *args: Any, **kwargs: Any) -> None: ...

    def sweep(self, arguments: list[str]) -> Any: ...


def test_each_job_is_composed_once_and_is_hydras_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(compose_once.install() for _ in range(2))  # idempotent; this Hydra has the hooks
    composed: list[list[str]] = []
    original = ConfigLoaderImpl.load_configuration

    def counted(self: Any, config_name: Any, overrides: list[str], run_mode: Any, **kw: Any) -> Any:
        composed.append(list(overrides))
        return original(self, config_name, overrides, run_mode, **kw)

    monkeypatch.setattr(ConfigLoaderImpl, "load_configuration", counted)
    batch = [["mode=comparative", "rubric=narrowness"], ["mode=independent", "rubric=novelty"]]
    with initialize_config_module(config_module="conf", version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", ["progress=false"], RunMode.MULTIRUN)
        sweeper = _CheckOnly()
        sweeper.hydra_context = SimpleNamespace(config_loader=loader)  # type: ignore[assignment]
        sweeper.config = master  # type: ignore[attr-defined]
        composed.clear()
        sweeper.validate_batch_is_legal(batch)
        assert len(composed) == 2
        # the launcher's request: the config the check composed, nothing composed again
        jobs = [loader.load_sweep_config(master, list(o)) for o in batch]
        assert len(composed) == 2
        # asked again (nothing kept any more): Hydra composes it, and it is the same config
        again = [loader.load_sweep_config(master, list(o)) for o in batch]
        assert len(composed) == 4
        for job, fresh in zip(jobs, again, strict=True):
            assert job is not fresh
            assert OmegaConf.to_container(job, resolve=False) == OmegaConf.to_container(fresh, resolve=False)
        assert [j.mode.name for j in jobs] == ["comparative", "independent"]
        # a batch whose check fails keeps nothing for a launch
        with pytest.raises(Exception):  # noqa: B017, PT011  (Hydra's composition error)
            sweeper.validate_batch_is_legal([["mode=independent"], ["mode=nonexistent_mode"]])
        composed.clear()
        loader.load_sweep_config(master, ["mode=independent"])
        assert len(composed) == 1
