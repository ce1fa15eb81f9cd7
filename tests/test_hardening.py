"""Issue 11 (hardening): each case a new user or an attacker found, through litellm's real HTTP path to a
local server. Most run the study in this process (a config composed by Hydra as the runner composes it);
what only the command line shows (exit codes, Hydra's own files and lines) runs the real runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from experiments.study import run_study
from tests.openai_server import ScriptedServer, Step, rubric_answer

KEY = "sk-hardening-test-key-0123456789"


@pytest.fixture()
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def study_cfg(tmp: Path, api_base: str, *overrides: str) -> dict[str, Any]:
    """The resolved config `python -m experiments.run judge=qwen ... <overrides>` would run."""
    args = ["judge=qwen", f"judge.api_base={api_base}", "judge.api_key_env=QWEN_API_KEY", "limit=1",
            "n_samples=1", "progress=false", "workers=1", f"cache_dir={tmp / 'cache'}", *overrides]  # fmt: skip
    with initialize_config_module("conf", version_base="1.3"):
        cfg = compose("config", overrides=args)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return plain


def study(tmp: Path, api_base: str, name: str, *overrides: str,
          monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:  # fmt: skip
    """Run one study into tmp/name; its manifest."""
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    run_study(study_cfg(tmp, api_base, *overrides), None, tmp / name, run_id=name)
    return json.loads((tmp / name / "manifest.json").read_text())


def test_a_changed_extra_parameter_is_a_cache_miss(server: ScriptedServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    study(tmp_path, server.api_base, "a", "+judge.extra.top_p=1.0", monkeypatch=monkeypatch)
    made = len(server.requests)
    assert made == 11 and {r["top_p"] for r in server.requests} == {1.0}
    manifest = study(tmp_path, server.api_base, "b", "+judge.extra.top_p=0.5", monkeypatch=monkeypatch)
    assert len(server.requests) == 2 * made and {r["top_p"] for r in server.requests[made:]} == {0.5}
    assert manifest["calls_made"] == made and manifest["calls_cached"] == 0
    manifest = study(tmp_path, server.api_base, "c", "+judge.extra.top_p=0.5", monkeypatch=monkeypatch)
    assert len(server.requests) == 2 * made and manifest["calls_cached"] == made  # unchanged: cached
