"""The resolved config that `python -m experiments.run <overrides>` would run, composed by Hydra as the
runner composes it, for tests that call the study code in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from hydra import compose as hydra_compose
from hydra import initialize_config_module
from omegaconf import OmegaConf

KEY = "sk-hardening-test-key-0123456789"  # the QWEN_API_KEY planted for `study_cfg`'s studies


def compose(*overrides: str) -> dict[str, Any]:
    """The resolved config for `overrides`, as given."""
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = OmegaConf.to_container(
            hydra_compose(config_name="config", overrides=list(overrides)), resolve=True
        )
    assert isinstance(cfg, dict)
    return cast(dict[str, Any], cfg)


def config(overrides: list[str]) -> dict[str, Any]:
    """The resolved config `python -m experiments.run <overrides>` would run (a later `key=` wins; `hydra.*`
    overrides are the runner's own and dropped; no progress bar)."""
    last = {o.split("=", 1)[0]: o for o in [*overrides, "progress=false"] if not o.startswith("hydra.")}
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = OmegaConf.to_container(
            hydra_compose(config_name="config", overrides=list(last.values())), resolve=True
        )
    assert isinstance(cfg, dict)
    return cast(dict[str, Any], cfg)


def study_cfg(tmp: Path, api_base: str, *overrides: str) -> dict[str, Any]:
    """The resolved config `python -m experiments.run judge=qwen ... <overrides>` would run: one instance, one
    sample, the key in QWEN_API_KEY, the cache under `tmp`; min_parse_rate=0, as these studies plant unscored
    answers."""
    args = [
        "judge=qwen",
        f"judge.api_base={api_base}",
        "judge.api_key_env=QWEN_API_KEY",
        "limit=1",
        "n_samples=1",
        "progress=false",
        "workers=1",
        f"cache_dir={tmp / 'cache'}",
        "min_parse_rate=0",
        *overrides,
    ]
    with initialize_config_module("conf", version_base="1.3"):
        cfg = hydra_compose("config", overrides=args)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return cast(dict[str, Any], plain)
