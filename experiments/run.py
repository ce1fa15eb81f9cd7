"""Hydra entry point: `python -m experiments.run judge=<name> mode=<mode> rubric=<name> dataset=<name>`."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from core.choices import did_you_mean
from core.schema import MANIFEST_NAME, ManifestError, read_manifest
from experiments.cli.entry import INTERRUPTED, remove_if_empty, typed_config
from experiments.config import ConfigError, StudyConfig
from experiments.sweep_budget import clear_failed, mark_failed
from judge.secrets import redact_std_streams


@hydra.main(version_base="1.3", config_path="pkg://conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Thin: resolve the config, run the study, turn every problem into one line.

    Exit codes: 2 a problem with the inputs, the provider (fatal) or the output folder; 3 stopped at the
    budget (outputs written; a -m sweep shares one budget and exits 3 at its end); 1 every call failed at the
    provider (the unscored rows are written); 4 too few answers scored (`min_parse_rate`; outputs written);
    130 interrupted (Ctrl-C). In a -m sweep, 1 and 4 (and 2 for a robustness perturbation that cannot be
    applied, `JobFailed`) come at the end of the sweep, naming the jobs, so one failed job does not stop the
    others. None of them leaves a folder without outputs behind."""
    # pandas: not imported for the one-line answers `start` gives before Hydra
    from experiments.inputs import (
        BudgetStop,
        JobFailed,
        ParseRateError,
        StudyError,
        load_study_inputs,
    )  # no litellm
    from experiments.outputs import claim_folder, release_folder

    redact_std_streams()
    hc = HydraConfig.get()
    hydra_dir = Path(hc.runtime.output_dir)
    sweep = Path(hc.sweep.dir) if str(hc.mode) == "RunMode.MULTIRUN" else None
    out_dir: Path | None = None  # this run's own folder, once claimed
    try:
        # the typed model (a setting Hydra let through, e.g. `+judge.typo=1`, is named here); litellm's price
        # map is chosen before anything imports litellm
        study = typed_config(cfg, StudyConfig)
        inputs = load_study_inputs(study)  # bad inputs answer here, before litellm is even imported
        if study.plan:
            # litellm: only after the inputs are validated and the price map chosen (typed_config)
            from experiments.plan import run_plan

            run_plan(study, inputs, hydra_dir, sweep)
            return
        out_dir = claim_folder(hydra_dir)  # Hydra's folder, or a sibling when a same-second run holds it
        if sweep is not None:
            clear_failed(out_dir)
        # litellm: only after the inputs are validated and the price map chosen (typed_config)
        # run_study installs the speed-ups
        from experiments.study import AllCallsFailed, NothingSent, run_study

        try:
            frame = run_study(study, inputs, out_dir, run_id=out_dir.name, sweep_dir=sweep, claimed=True)
        except NothingSent as exc:  # a setting to change: the same command fails again
            _failed(out_dir, sweep, 2, f"error: {exc}")
            return
        except AllCallsFailed as exc:
            _failed(out_dir, sweep, 1, f"warning: {exc}")
            return
    except BudgetStop as exc:  # the outputs are written; the run is incomplete
        print(f"stopped: {exc}", file=sys.stderr)
        if sweep is not None:  # the sweep goes on (cached answers only); exit 3 at its end (sweep_budget)
            return
        sys.exit(3)
    except JobFailed as exc:  # in a sweep, the other jobs still run; the failure is named at its end
        if sweep is None or out_dir is None:
            if out_dir is not None:
                release_folder(out_dir)
            remove_if_empty(hydra_dir)
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        _failed(out_dir, sweep, 2, f"error: {exc}")
        release_folder(out_dir)  # the claim only: the failure record stays for the sweep's end
        return
    except ParseRateError as exc:  # the outputs are written; too few answers were scored
        assert out_dir is not None
        _failed(out_dir, sweep, 4, f"error: {exc}")
        return
    except (StudyError, ConfigError, KeyboardInterrupt) as exc:
        if out_dir is not None:
            release_folder(out_dir)
        remove_if_empty(hydra_dir)
        if isinstance(exc, KeyboardInterrupt):
            print(INTERRUPTED, file=sys.stderr)
            sys.exit(130)
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(f"{len(frame)} rows -> {out_dir / 'results.parquet'}", file=sys.stderr)
    unscored = unscored_line(out_dir / MANIFEST_NAME)
    if unscored:
        print(f"warning: {unscored}", file=sys.stderr)


def _failed(out_dir: Path, sweep: Path | None, code: int, line: str) -> None:
    """A run that wrote its outputs but failed: its line and exit code; in a sweep, recorded for the end of the
    sweep instead (experiments.sweep_budget), so the other jobs still run."""
    print(line, file=sys.stderr)
    if sweep is None:
        sys.exit(code)
    mark_failed(out_dir, code, line)


def unscored_line(manifest: Path) -> str | None:
    """The run's unscored calls and provider errors in one line, when there were any (an exit 0 must not hide
    them)."""
    try:
        data = read_manifest(manifest)
    except ManifestError:
        return None
    made, unscored, errors = data.calls_total or 0, data.unscored_calls or 0, data.provider_errors or 0
    if not unscored and not errors:
        return None
    retry = f", {errors} of them provider errors (rerun the same command to retry them)" if errors else ""
    return (
        f"{unscored} of {made} calls unscored (parse rate {data.parse_rate}){retry}; see the error and "
        f"raw columns of {manifest.parent / 'results.parquet'}"
    )


def unusable_output_dir(argv: list[str]) -> str | None:
    """One line when the output folder given (or the default one) cannot be made: it lies under a file, or its
    nearest existing folder refuses a new one (read-only, no permission). Hydra would fail with tracebacks."""
    given = dict(arg.lstrip("+").split("=", 1) for arg in argv if "=" in arg)
    multirun = any(a in ("-m", "--multirun") for a in argv)
    setting = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    value = given.get(setting, "multirun" if multirun else "outputs")
    literal = Path(value.split("${", 1)[0] or ".")
    missing: list[Path] = []
    for parent in [literal, *literal.parents]:
        if parent.exists():
            if not parent.is_dir():
                return f"{setting}={value}: {parent} is a file, not a folder; choose another {setting}"
            return _probe(parent, missing, setting, value)
        missing.append(parent)
    return None


def _probe(existing: Path, missing: list[Path], setting: str, value: str) -> str | None:
    """Make the missing folders below `existing` and remove them again: whether Hydra will be able to."""
    made = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except OSError as exc:
        return f"{setting}={value}: cannot make a folder in {existing} ({exc.strerror}); choose another {setting}"
    finally:
        for folder in reversed(made):
            folder.rmdir()
    return None


GROUPS = ("judge", "mode", "rubric", "dataset", "experiment")


def unknown_choice(argv: list[str]) -> str | None:
    """One line naming an unknown `group=name` on the command line (before Hydra's multi-line error)."""
    roots = [Path(__file__).resolve().parent.parent / "conf", *searchpath_dirs(argv)]
    for arg in argv:
        group, sep, value = arg.lstrip("+~").partition("=")
        if not sep or group not in GROUPS:
            continue
        known = sorted({p.stem for root in roots for p in (root / group).glob("*.yaml")})
        for name in value.split(","):
            if name and name not in known:
                return f"{group}={name}: unknown {group}; choose one of: {', '.join(known)}{did_you_mean(name, known)}"
    return None


def searchpath_dirs(argv: list[str]) -> list[Path]:
    """The config folders a `hydra.searchpath=[file://...]` override adds (your own rubrics, modes ...)."""
    dirs = []
    for arg in argv:
        key, _, value = arg.lstrip("+").partition("=")
        if key == "hydra.searchpath":
            dirs += [
                Path(v.strip().strip("'\"").removeprefix("file://"))
                for v in value.strip("[]").split(",")
                if v.strip().strip("'\"").startswith("file://")
            ]
    return dirs


if __name__ == "__main__":
    from experiments.cli import compose_once
    from experiments.cli.entry import start

    start("config", unknown_choice, unusable_output_dir)
    compose_once.install()  # a -m sweep's jobs composed once, not twice (check + launch)
    main()
