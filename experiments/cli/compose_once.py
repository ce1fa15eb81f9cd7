"""A `-m` sweep's jobs composed once instead of twice.

Hydra's sweeper first checks that every job of a batch composes (`Sweeper.validate_batch_is_legal`, so a bad
job fails before any runs) and throws the configs away; its launcher then composes each job again to run it.
Composing one job costs ~0.3 s of CPU (omegaconf merges and deep copies), a fixed cost of every replay and
plan. Here the configs the check composed are kept, and the launcher's request for the same master config and
overrides gets that config (once; the check never changes it, and the resolver cache is copied from the master
config again, as Hydra's own composition does), so each job is composed once. Anything composed outside the
check, or asked for again, is composed by Hydra as before.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.plugins.sweeper import Sweeper
from omegaconf import OmegaConf


class _Kept:
    """The configs the sweeper's check composed, by (loader, master config, overrides), until the launcher
    takes them."""

    def __init__(self) -> None:
        self.checking = 0  # inside validate_batch_is_legal
        self.configs: dict[tuple[int, int, tuple[str, ...]], tuple[Any, Any]] = {}


_KEPT = _Kept()


def install() -> bool:
    """Keep the check's configs for the launcher (idempotent); False when this Hydra lacks a hook (then
    nothing changes: every job is composed twice, as before). It relies on
    `ConfigLoaderImpl.load_sweep_config` and `Sweeper.validate_batch_is_legal`: tests/test_replay_keys.py fails
    when an upgrade removes either."""
    load, check = (
        getattr(ConfigLoaderImpl, "load_sweep_config", None),
        getattr(Sweeper, "validate_batch_is_legal", None),
    )
    if load is None or check is None:
        return False
    if getattr(load, "composes_once", False):
        return True

    @functools.wraps(load)
    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(self), id(master_config), tuple(sweep_overrides))
        if not _KEPT.checking:
            found = _KEPT.configs.pop(key, None)
            if found is not None and found[0] is master_config:
                config = found[1]
                OmegaConf.copy_cache(from_config=master_config, to_config=config)
                return config
            return load(self, master_config, sweep_overrides)
        config = load(self, master_config, sweep_overrides)
        _KEPT.configs[key] = (master_config, config)
        return config

    @functools.wraps(check)
    def validate_batch_is_legal(self: Any, batch: Sequence[Sequence[str]]) -> None:
        # only the launch right after its check takes its configs: an earlier batch's that a launcher composing
        # in its own processes (joblib, submitit) never asked for are dropped here, not kept to the end
        _KEPT.configs.clear()
        _KEPT.checking += 1
        try:
            check(self, batch)
        except BaseException:
            _KEPT.configs.clear()  # a batch that fails its check is not launched
            raise
        finally:
            _KEPT.checking -= 1

    load_sweep_config.composes_once = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
    return True
