"""Two judges of one `-m` sweep that are one rater, named when the sweep ends (issue 33 item 4, run-time half).

Two judge YAMLs that reach the same model at the same endpoint, or that gave byte-identical raw answers to the
same calls, are one rater counted twice: a tie reads as agreement and a combination averages one model with
itself. The report finds them (analysis.stats.duplicates); this finds them as soon as the sweep that made
them ends, from each job's `config.json` (judge.model, judge.api_base) and results (`raw` keyed by
prompt_id, sample_idx and perturbation). Endpoints are printed without credentials (judge.secrets.endpoint,
then redact): a key never reaches the line.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations
from pathlib import Path

import pyarrow.parquet as pq

from core.run_config import RUN_CONFIG, RunConfigError, read_run_config
from judge.secrets import endpoint, redact

#: Fewer shared answered calls than this say nothing about two judges being one (as in the report).
MIN_SHARED = 2
_CALL = ("prompt_id", "sample_idx", "perturbation")

Call = tuple[str, ...]


def _judge_of(job: Path) -> tuple[str, str, str] | None:
    """(judge name, model, endpoint without credentials) from a job's config.json; None if it has none."""
    try:
        config = read_run_config(job)
    except RunConfigError:
        return None
    judge = config.judge if config is not None else None
    return None if judge is None else (judge.name, judge.model, endpoint(judge.api_base) or "")


def _answers(job: Path) -> dict[Call, str]:
    """Each answered call's raw answer in a job's results (empty if it has none or they are unreadable)."""
    path = job / "results.parquet"
    try:
        names = set(pq.read_schema(path).names)
        if not {"prompt_id", "sample_idx", "raw"} <= names:
            return {}
        columns = [c for c in _CALL if c in names]
        table = pq.read_table(path, columns=[*columns, "raw"]).to_pydict()
    except (OSError, ValueError):
        return {}
    keys = zip(*(table[c] for c in columns), strict=True)
    return {tuple(map(str, k)): str(r) for k, r in zip(keys, table["raw"], strict=True) if r}


def duplicate_lines(sweep_dir: Path) -> list[str]:
    """One warning line per pair of differently named judges in the sweep's jobs that are one rater."""
    where: dict[str, set[tuple[str, str]]] = defaultdict(set)
    answers: dict[str, dict[Call, str]] = defaultdict(dict)
    for config in sorted(sweep_dir.glob(f"*/{RUN_CONFIG}")):
        found = _judge_of(config.parent)
        if found is None:
            continue
        name, model, at = found
        where[name].add((model, at))
        answers[name].update(_answers(config.parent))
    lines = []
    for a, b in combinations(sorted(where), 2):
        reasons = [
            f"same model {model} at {redact(at) if at else 'the provider default endpoint'}"
            for model, at in sorted(where[a] & where[b])
        ]
        shared = answers[a].keys() & answers[b].keys()
        if len(shared) >= MIN_SHARED and all(answers[a][k] == answers[b][k] for k in shared):
            reasons.append(f"byte-identical answers on all {len(shared)} calls both answered")
        if reasons:
            lines.append(
                f"warning: judges {a} and {b} are one rater ({'; '.join(reasons)}): "
                "count them once in any comparison or combination"
            )
    return lines
