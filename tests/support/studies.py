"""A small real study for the viewer and report tests: 2 judges × 2 modes through litellm's HTTP path to a
local scripted OpenAI-compatible server (tests.support.openai_server), run in this process; and `cli_env`, the
environment for running this checkout's commands in a subprocess.

The second judge (another model name) answers with every score one lower, and one prompt in eleven gets an
unparseable answer, so the study has judge–judge disagreement and parse failures to show.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from tests.support.openai_server import ScriptedServer, Step, rubric_answer

UNPARSEABLE = "I would rather not give numbers for this one."
ROOT = Path(__file__).resolve().parents[2]


def cli_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a subprocess CLI run: no provider key from the caller's shell, a cache under `tmp`,
    litellm's bundled price map, and this checkout's code first on the path (not an installed copy)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        {
            "JUDGESCOPE_CACHE_DIR": str(tmp / "cache"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
            **(extra or {}),
        }
    )
    return env


def public_data(name: str) -> Path:
    """The checked path of a public data file (experiments.datasets.fetch), or a one-line skip naming the command that
    fetches it; a file that is there but altered fails (its SHA-256 is checked), it is not skipped."""
    from experiments.datasets.fetch import data_dir, data_file, fetch_command

    if not (data_dir() / name).is_file():
        pytest.skip(f"{name} is not fetched: run `{fetch_command(name)}`")
    return data_file(name)


def answer(body: dict[str, Any]) -> Step:
    """A valid rubric answer; judge "qwen-b" scores one lower; ~1 prompt in 11 is unparseable."""
    prompt = body["messages"][-1]["content"]
    if hashlib.sha256(prompt.encode()).digest()[0] % 11 == 0:
        return Step(200, UNPARSEABLE)
    text = rubric_answer(body)
    if "qwen-b" in str(body.get("model")):
        text = re.sub(r'": ([1-9])', lambda m: f'": {int(m.group(1)) - 1}', text)
    return Step(200, text)


def config(overrides: list[str]) -> dict[str, Any]:
    """The resolved config `python -m experiments.run <overrides>` would run."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True)
    assert isinstance(cfg, dict)
    return cfg


JUDGES = (("qwen_a", "qwen-a"), ("qwen_b", "qwen-b"))
MODES = ("independent", "comparative")


def _judge_run(api_base: str, root: Path, out: Path, judge: tuple[str, str], mode: str, *extra: str) -> None:
    """One run of a sample judge × mode into `out` (its run id), with the cache under `root`."""
    from experiments.study import run_study

    name, model = judge
    cfg = config(
        [
            "judge=qwen",
            f"judge.name={name}",
            f"judge.model=openai/{model}",
            f"judge.api_base={api_base}",
            f"mode={mode}",
            "progress=false",
            "workers=1",
            f"cache_dir={root / 'cache'}",
            "min_parse_rate=0",
            *extra,
        ]
    )
    run_study(typed(cfg), None, out, run_id=out.name)


def run_sample_study(root: Path, limit: int = 2, n_samples: int = 2) -> Path:
    """Run judges qwen_a and qwen_b × independent, comparative on the shipped sample; one folder per run."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-local-test-server")
    with ScriptedServer(answer).running() as server:
        for j, judge in enumerate(JUDGES):
            for m, mode in enumerate(MODES):
                out = root / "multirun" / f"{2 * j + m}_{judge[0]}_{mode}_novelty"
                _judge_run(
                    server.api_base, root, out, judge, mode, f"limit={limit}", f"n_samples={n_samples}"
                )
    return root / "multirun"


def shared_sample_study(
    factory: pytest.TempPathFactory, dest: Path, limit: int = 2, n_samples: int = 2
) -> Path:
    """`run_sample_study(dest, limit, n_samples)`, run once per test session: the first caller (of any xdist
    worker: the cache sits in the session's shared temporary root, behind a file lock) runs it, every caller
    gets its own copy in `dest` (run folders and their cache), so a test may change its copy. The study is
    deterministic (the scripted server answers from the prompt), so a copy holds what a fresh run would."""
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    built = shared / f"sample-study-limit{limit}-n{n_samples}"
    with FileLock(str(built) + ".lock"):
        if not (built / "done").is_file():
            shutil.rmtree(built, ignore_errors=True)
            run_sample_study(built, limit=limit, n_samples=n_samples)
            (built / "done").touch()
    shutil.copytree(built, dest, ignore=shutil.ignore_patterns("done"), dirs_exist_ok=True)
    return dest / "multirun"


def run_robustness_sweep(
    root: Path, perturbations: tuple[str, ...], limit: int = 2, n_samples: int = 2, seed: int = 0
) -> Path:
    """Add to `run_sample_study`'s folder the runs of experiment=robustness: each judge × mode re-judged
    under each of `perturbations` (the study's own runs are its `none` baseline); `order` and `labels`
    change comparative prompts only, so they run in that mode only (as the analysis reads them)."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-local-test-server")
    k = len(list((root / "multirun").iterdir()))
    with ScriptedServer(answer).running() as server:
        for judge in JUDGES:
            for mode in MODES:
                for kind in perturbations:
                    if kind in ("order", "labels") and mode != "comparative":
                        continue
                    out = root / "multirun" / f"{k}_{judge[0]}_{mode}_{kind}"
                    overrides = [
                        f"limit={limit}",
                        f"n_samples={n_samples}",
                        f"robustness.perturbation={kind}",
                    ]
                    _judge_run(server.api_base, root, out, judge, mode, *overrides, f"robustness.seed={seed}")
                    k += 1
    return root / "multirun"


def typed(cfg: Any, stage: str = "config") -> Any:
    """The typed config (experiments.config) of a plain one, as the entry point of `stage` (config, generate,
    issues, extract) loads it: the functions of a study take the typed objects, never a dict."""
    from experiments.config import SCHEMAS, load

    return load(cfg, SCHEMAS[f"{stage}_schema"])
