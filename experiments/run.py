"""Hydra entry point: `python -m experiments.run judge=<name> mode=<mode> rubric=<name> dataset=<name>`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments.config import command_line_problem


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Thin: resolve the config, run the study, turn input problems into one line and exit code 2."""
    from experiments.config import ConfigError, load
    from experiments.inputs import BudgetStop, StudyError, load_study_inputs  # light: no litellm yet

    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    try:
        load(cfg)  # the typed model: a setting Hydra let through (e.g. `+judge.typo=1`) is named here
        plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
        assert isinstance(plain, dict)
        inputs = load_study_inputs(plain)  # bad inputs answer here, before litellm is even imported
        if plain.get("plan"):
            from experiments.plan import run_plan

            sweep = Path(hc.sweep.dir) if str(hc.mode) == "RunMode.MULTIRUN" else None
            run_plan(plain, inputs, out_dir, sweep)
            return
        from experiments.study import run_study
        from judge.secrets import install_log_redaction

        install_log_redaction()
        frame = run_study(plain, inputs, out_dir, run_id=out_dir.name)
    except BudgetStop as exc:  # the outputs are written; the run is incomplete
        print(f"stopped: {exc}", file=sys.stderr)
        sys.exit(3)
    except (StudyError, ConfigError) as exc:
        _remove_if_empty(out_dir)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"{len(frame)} rows -> {out_dir / 'results.parquet'}", file=sys.stderr)


def _remove_if_empty(folder: Path) -> None:
    """Nothing partial is left behind: drop the run folder Hydra made if the study wrote nothing."""
    try:
        folder.rmdir()
    except OSError:
        pass


GROUPS = ("judge", "mode", "rubric", "dataset", "experiment")


def unknown_choice(argv: list[str]) -> str | None:
    """One line naming an unknown `group=name` on the command line (before Hydra's multi-line error)."""
    conf = Path(__file__).resolve().parent.parent / "conf"
    for arg in argv:
        group, sep, value = arg.lstrip("+~").partition("=")
        if not sep or group not in GROUPS:
            continue
        known = sorted(p.stem for p in (conf / group).glob("*.yaml"))
        for name in value.split(","):
            if name and name not in known:
                return f"{group}={name}: unknown {group}; choose one of: {', '.join(known)}"
    return None


if __name__ == "__main__":
    problem = unknown_choice(sys.argv[1:]) or command_line_problem(sys.argv[1:], "config")
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    main()
