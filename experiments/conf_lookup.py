"""A config named by a setting (e.g. `robustness.generator=<judge>`), found where Hydra finds configs.

A judge named inside the study's config is not a config group choice, so Hydra does not load it; reading
conf/judge/<name>.yaml by path would miss a judge of the user's own config folder (`hydra.searchpath`).
This composes the study's config with `judge=<name>` instead: the same search path (the packaged conf/ and
every `hydra.searchpath` folder of the running command), defaults lists and typed checks as `judge=<name>`.
"""

from __future__ import annotations

from typing import Any

from experiments.inputs import StudyError

SEARCHPATH = "hydra.searchpath"


def searchpath_overrides() -> list[str]:
    """The running command's `hydra.searchpath=[...]` override(s), as given; none outside a Hydra app."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    given = HydraConfig.get().overrides.hydra
    return [o for o in given if o.split("=", 1)[0].lstrip("+~") == SEARCHPATH]


def judge_config(name: str, setting: str) -> dict[str, Any]:
    """The judge config `judge=<name>` gives (plain data); one line naming `setting` when there is none or it
    is not a valid judge config. Inside experiments.run it sees the command's `hydra.searchpath`."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    overrides = [*searchpath_overrides(), f"judge={name}"]
    try:
        if GlobalHydra.instance().is_initialized():  # inside experiments.run: its own search path
            cfg = compose(config_name="config", overrides=overrides)
        else:
            with initialize_config_module(config_module="conf", version_base="1.3"):
                cfg = compose(config_name="config", overrides=overrides)
        judge = OmegaConf.to_container(cfg.judge, resolve=True, enum_to_str=True)
    except MissingConfigException as exc:
        known = ", ".join(sorted(exc.options or [])) or "none"
        raise StudyError(
            f"{setting}={name}: no judge config {name!r} in conf/judge or a {SEARCHPATH} folder (judges: {known})"
        ) from None
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StudyError(f"{setting}={name}: not a usable judge config ({first})") from None
    assert isinstance(judge, dict)
    return {str(k): v for k, v in judge.items()}
