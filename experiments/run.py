"""Hydra entry point: `python -m experiments.run judge=<name> mode=<mode> rubric=<name> dataset=<name>`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from experiments.study import StudyError, run_study
from judge.secrets import install_log_redaction


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Thin: resolve the config, run the study, turn input problems into one line and exit code 2."""
    install_log_redaction()
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    try:
        plain = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(plain, dict)
        frame = run_study(plain, out_dir, run_id=out_dir.name)
    except StudyError as exc:
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


if __name__ == "__main__":
    main()
