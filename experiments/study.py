"""Run one judging study: dataset x rubric x mode x judge -> results table + manifest in one folder.

Every call goes through the cache first, so a crashed or interrupted study resumes by rerunning the same
command: finished calls are replayed from disk and only the missing ones reach the provider.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from core.cells import write_csv  # results.csv is opened in spreadsheets: no formulas
from core.modes import ModeKind
from core.schema import MANIFEST_NAME, write_manifest
from experiments.batching import run_batches
from experiments.config import StudyConfig, as_dict
from experiments.inputs import BudgetStop, JudgingInputs, ParseRateError, StudyError, load_study_inputs
from experiments.judges import make_judge, max_tokens_of, sampling_params, sent_request
from experiments.manifest import Tally, build_manifest, check_parse_rate, manifest_extras
from experiments.modes import build_prompts
from experiments.outputs import claim_folder, release_folder, write_outputs
from experiments.prompt import Prompt
from experiments.rows import RowColumns, parsed_answer
from experiments.spend import budget_message
from experiments.stages import robustness
from experiments.workers import fork_available, in_process_provider, run_in_workers
from judge import speedups
from judge.batch.provider import BatchRequest
from judge.batch.run import NOT_SUBMITTED
from judge.cache.store import CacheError
from judge.calls import Call, call_all
from judge.client import CallResult, Judge, Sample
from judge.quirks import RequestShape
from judge.retry import FatalProviderError
from judge.rubric import Rubric, response_format
from judge.secrets import redact, redact_config
from judge.speedups import frozen_heap
from judge.spend.ledger import LedgerError
from judge.types import Completion


def jobs_of(prompts: Sequence[Prompt], cfg: StudyConfig) -> list[tuple[Prompt, int]]:
    """Every (prompt, sample index) of a run, in the order its rows are written."""
    return [(p, s) for p in prompts for s in range(cfg.n_samples)]


def sampler(judge: Judge, rubric: Rubric, cfg: StudyConfig) -> Callable[[Prompt, int], Sample]:
    """`sample_of(prompt, sample_idx)`: the decoding parameters of one sample (with the prompt's
    structured-output schema where asked for), built once per distinct schema and sample index - most of a
    cache key's serialisation."""
    params = sampling_params(cfg)
    structured = cfg.judge.structured_output
    samples: dict[tuple[tuple[str, ...] | None, int, int], Sample] = {}

    def sample_of(prompt: Prompt, sample_idx: int) -> Sample:
        labels = prompt.labels if structured else None
        key = (labels, max_tokens_of(cfg, prompt), sample_idx)
        if key not in samples:
            schema = {"response_format": response_format(rubric, labels)} if structured else {}
            samples[key] = judge.sample({**params, "max_tokens": key[1], **schema}, sample_idx)
        return samples[key]

    return sample_of


def execute_calls(
    judge: Judge,
    prompts: Sequence[Prompt],
    rubric: Rubric,
    cfg: StudyConfig,
    meta: Mapping[str, Any],
    tally: Tally,
    keys: list[str] | None = None,
) -> RowColumns:
    """Every (prompt, sample) call; its rows (`RowColumns`) come out in a stable (prompt, sample) order (and each call's cache
    key is appended to `keys`, in the same order, when given).

    Cached calls are replayed first, in this process. The others go to the provider: concurrently on one
    event loop, or spread over worker processes (`workers`, see `plan_workers`) when client CPU would
    otherwise be the bottleneck. A call whose key repeats within the run is asked for once.
    """
    jobs = jobs_of(prompts, cfg)
    table = RowColumns(rubric, meta)
    sample_of = sampler(judge, rubric, cfg)
    call_keys: list[str] = []
    # answers parsed in this run, kept in the cache beside the answer so that a replay reads them back
    to_keep: dict[str, tuple[str, Completion, Any]] = {}

    bar = tqdm(total=len(jobs), disable=not cfg.progress, file=sys.stderr, unit="call")

    def finish(index: int, prompt: Prompt, sample_idx: int, result: CallResult) -> None:
        if result.not_started:
            scored = True  # no rows
        else:
            parsed, keep = parsed_answer(prompt, rubric, result)
            scored = table.add(index, prompt, sample_idx, result, parsed)
            if keep is not None and result.completion is not None:
                to_keep[call_keys[index]] = (call_keys[index], result.completion, keep)
        tally.add(result, scored=scored)
        bar.update(1)
        if not bar.disable:
            bar.set_postfix(made=tally.calls, cached=tally.cached, unscored=tally.unscored, refresh=False)

    try:
        misses: list[Call] = []
        followers: dict[str, list[Call]] = {}
        with frozen_heap():  # the blocks below nest in it: it unfreezes everything once the calls are done
            # the cache first, read in bulk (`Judge.lookup_many`); a hit is finished here, with no task,
            # semaphore or retry wrapper. What each chunk leaves (entries, parsed scores, rows) stays alive to the
            # end: frozen before the next chunk (judge.speedups), the collector's passes do not scan it again and
            # again (they were ~70% of a replay's entry reading and row building)
            for start in range(0, len(jobs), LOOKUP_CHUNK):
                with frozen_heap():
                    chunk = jobs[start : start + LOOKUP_CHUNK]
                    samples = [sample_of(prompt, sample_idx) for prompt, sample_idx in chunk]
                    found = judge.lookup_many(
                        [
                            (prompt.messages, sample)
                            for (prompt, _), sample in zip(chunk, samples, strict=True)
                        ],
                        rubric.version,
                    )
                    for index, (prompt, sample_idx), sample, (key, hit) in zip(
                        range(start, start + len(chunk)), chunk, samples, found, strict=True
                    ):
                        call_keys.append(key)
                        if hit is not None:
                            finish(index, prompt, sample_idx, hit)
                        elif key in followers:
                            followers[key].append(Call(index, prompt.messages, sample.params, key))
                        else:
                            followers[key] = []
                            misses.append(Call(index, prompt.messages, sample.params, key))

            def settle(call: Call, result: CallResult) -> None:
                finish(call.index, *jobs[call.index], result)
                for twin in followers.get(call.key, ()):
                    finish(
                        twin.index, *jobs[twin.index], replace(result, cached=False, retries=0, shared=True)
                    )

            if misses and cfg.batch:
                tally.batch = batch_calls(judge, misses, cfg, settle)
            elif misses:
                with frozen_heap():  # see judge.speedups: the collector skips what exists before the calls
                    provider_calls(cfg, judge, misses, settle)
        judge.cache.keep_parsed(list(to_keep.values()))
    finally:
        bar.close()
        if keys is not None:
            keys.extend(call_keys)
    return table


# calls whose cache entries are read in one go (`Judge.lookup_many`)
LOOKUP_CHUNK = 2000


def provider_calls(
    cfg: StudyConfig, judge: Judge, misses: Sequence[Call], settle: Callable[[Call, CallResult], None]
) -> None:
    """The uncached calls, live: on this process's event loop or spread over worker processes."""
    n_workers = plan_workers(cfg, judge, len(misses))
    if n_workers <= 1:
        asyncio.run(call_all(judge, misses, settle))
        return

    # the first call here: it pays litellm's one-off warm-up (lazy imports, ~0.5 s of CPU) once instead of
    # once per worker, and a fatal error (key, model) surfaces before any fork
    asyncio.run(call_all(judge, misses[:1], settle))
    run_in_workers(judge, misses[1:], n_workers, settle)


def batch_calls(
    judge: Judge, calls: Sequence[Call], cfg: StudyConfig, settle: Callable[[Call, CallResult], None]
) -> Any:
    """The calls through the provider's batch API (`experiments.batching`); its BatchStats."""
    results, stats = run_batches(judge, [BatchRequest(c.key, c.messages, c.params) for c in calls], cfg)
    for call in calls:
        settle(call, results[call.key])
    return stats


# Calls per worker below which forking is not worth it, and the most workers `auto` starts.
MIN_CALLS_PER_WORKER = 100
MAX_AUTO_WORKERS = 4


def plan_workers(cfg: StudyConfig, judge: Judge, n_calls: int) -> int:
    """How many processes make this run's provider calls (1 = this process, on one event loop).

    `workers: N` forces N (where fork is available); `workers: null` (auto) uses two per CPU core, up to
    MAX_AUTO_WORKERS, when the run has at least MIN_CALLS_PER_WORKER uncached calls per worker and the judge
    allows two requests in flight per worker - but never for a model served inside this process (a litellm
    custom provider such as the embedded local model), which would load it once per worker.
    """
    wanted = cfg.workers
    if judge.budget is not None or judge.limiter is not None:
        return 1  # one process keeps the run's one spend account and one view of the provider's limits
    if not fork_available() or (wanted is not None and wanted <= 1):
        return 1
    if wanted is not None:
        return max(1, min(wanted, judge.concurrency, n_calls))
    if in_process_provider(judge.completer.model):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # two per core: a worker's event loop is busy well under half the time, but its calls queue behind one
    # another's CPU; fewer calls per loop answer sooner (benchmarks/README.md: 2 cores, 4 vs 2 workers, +10%)
    return max(1, min(2 * cores, MAX_AUTO_WORKERS, judge.concurrency // 2, n_calls // MIN_CALLS_PER_WORKER))


def results_writers(frame: pd.DataFrame) -> dict[str, Callable[[Path], object]]:
    """results.parquet, and results.csv (Arrow's CSV writer is ~10x pandas'), whose text cells a spreadsheet
    would run as a formula (a judge's raw answer `=HYPERLINK(...)`) are quoted (`cells.csv_safe`; the
    analysis and the viewer read them back as written: `cells.unescape_text`)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    return {
        "results.parquet": lambda p: pq.write_table(table, p),
        "results.csv": lambda p: write_csv(frame, p, arrow=True),
    }


def prompts_writer(prompts: Sequence[Prompt], run_id: str) -> Callable[[Path], object]:
    """prompts.parquet: every prompt exactly as sent (chat messages as JSON), keyed by the results'
    (`run_id`, `prompt_id`), so any results row leads back to what the judge was shown."""
    table = pa.table(
        {
            "run_id": [run_id] * len(prompts),
            "prompt_id": [p.prompt_id for p in prompts],
            "instance_id": [p.instance_id for p in prompts],
            "mode": [p.mode for p in prompts],
            "order": [p.order for p in prompts],
            "messages": [json.dumps(p.messages, ensure_ascii=False) for p in prompts],
        }
    )
    return lambda p: pq.write_table(table, p, compression="zstd")


class AllCallsFailed(StudyError):
    """Every call of the run failed at the provider: the outputs are written (all unscored), exit non-zero."""


class NothingSent(AllCallsFailed):
    """Every call of the run was over a batch cap and never sent: a rerun with the same settings fails again,
    so the line names the cap and the setting to change."""


def run_study(
    cfg: StudyConfig,
    inputs: JudgingInputs | None,
    out_dir: Path,
    run_id: str,
    sweep_dir: Path | None = None,
    *,
    claimed: bool = False,
) -> pd.DataFrame:
    """Run the study its typed config describes and write its outputs into `out_dir`; in a -m sweep
    (`sweep_dir`), `budget_usd` is the sweep's (judge.spend.ledger).

    The folder is claimed (ours, writable) before the first call, here or, with `claimed`, by the caller
    (experiments.run claims Hydra's folder or a free sibling first), so it is claimed once; whatever stops
    the run before its outputs are written (a bad config, a fatal provider error, Ctrl-C, a failed write)
    leaves no folder behind."""
    started = time.perf_counter()
    speedups.install()  # as the entry points do: a library caller's run is the command's run (idempotent)
    inputs = inputs or load_study_inputs(cfg)
    rubric, data_path, mode = inputs.rubric, inputs.data_path, inputs.mode
    assert mode is not None  # a study's inputs carry its mode
    instances, audit = robustness.perturb(
        inputs.instances, cfg, mode
    )  # experiment=robustness (else as given)
    prompts = build_prompts(
        instances, rubric, mode, seed=robustness.order_seed(cfg), labels=robustness.label_map(cfg)
    )
    if not prompts:  # e.g. pairwise on instances without a reference: a 0-row "success" would mislead
        raise StudyError(
            f"mode={cfg.mode.name}: nothing to judge: {len(instances)} instance(s) of "
            f"{data_path} give 0 prompts (pairwise needs a reference and candidates)"
        )
    if not claimed:
        claim_folder(out_dir, exact=True)  # an OutputError (a StudyError) before the first call
    try:
        frame, tally, judge, shape, keys = _judge_all(cfg, prompts, rubric, run_id, sweep_dir, mode.kind)
        manifest = replace(
            build_manifest(cfg, frame, tally, rubric, data_path, len(instances), len(prompts), started),
            **manifest_extras(cfg, judge, shape, tally),
            **robustness.audit_counts(audit),  # paraphrases left out / rejected (none: nothing)
        )
        config_text = json.dumps(redact_config(as_dict(cfg)), indent=2, default=str)
        write_outputs(
            out_dir,
            {
                **results_writers(frame),
                "prompts.parquet": prompts_writer(prompts, run_id),
                MANIFEST_NAME: lambda p: write_manifest(
                    p, manifest, scrub_tree=redact_config, scrub_text=redact
                ),
                "config.json": lambda p: p.write_text(config_text),
                # the cache entries this run used, one key per call: what `python -m judge.cache export` publishes
                "cache_keys.txt": lambda p: p.write_text("".join(f"{k}\n" for k in keys)),
                **robustness.audit_writer(audit),
            },
        )
    except BaseException:
        release_folder(out_dir)
        raise
    if judge.budget is not None and judge.budget.stopped:
        stop = budget_message(judge.budget, tally.not_started)
        try:  # the calls made are still held to min_parse_rate: the stop message says when they fall short
            check_parse_rate(manifest, frame, cfg.min_parse_rate)
        except ParseRateError as exc:
            raise BudgetStop(f"{stop}; and of the calls made, {exc}") from None
        raise BudgetStop(stop)
    if tally.provider_errors and not (tally.calls or tally.cached):
        if all(e.startswith(NOT_SUBMITTED) for e in tally.errors):
            raise NothingSent(
                f"no request was sent: every one of the {tally.provider_errors} calls is over a batch cap "
                f"(first: {tally.errors[0].removeprefix(NOT_SUBMITTED)}); raise that setting, or make the "
                "calls live (batch=false)"
            )
        raise AllCallsFailed(
            f"every call failed at the provider ({tally.provider_errors} calls; first error: "
            f"{tally.errors[0][:200]}); {out_dir} holds only unscored rows; rerun the same "
            "command to try them again"
        )
    check_parse_rate(manifest, frame, cfg.min_parse_rate)
    return frame


def _judge_all(
    cfg: StudyConfig,
    prompts: Sequence[Prompt],
    rubric: Rubric,
    run_id: str,
    sweep_dir: Path | None,
    mode_kind: ModeKind,
) -> tuple[pd.DataFrame, Tally, Judge, RequestShape, list[str]]:
    """Every call of the run (cache first): the results table, its counts, the judge (closed), the request's
    shape and the cache keys."""
    # a call's worst case for the budget: the largest output budget of the run
    largest = max((max_tokens_of(cfg, p) for p in prompts), default=None)
    judge = make_judge(cfg, largest_output=largest, sweep_dir=sweep_dir, job=run_id)
    shape = sent_request(cfg, rubric, judge.completer)
    meta = {
        "run_id": run_id,
        "judge": cfg.judge.name,
        "model": cfg.judge.model,
        "mode": cfg.mode.name,
        "mode_kind": mode_kind.value,
        "rubric": rubric.name,
        "rubric_version": rubric.version,
        "temperature": math.nan if shape.temperature is None else shape.temperature,
        "perturbation": cfg.robustness.perturbation.value,
    }
    tally = Tally()
    keys: list[str] = []
    try:
        table = execute_calls(judge, prompts, rubric, cfg, meta, tally, keys)
    except (FatalProviderError, CacheError, LedgerError) as exc:
        raise StudyError(str(exc)) from None
    finally:
        tally.cache_damaged += judge.cache.damaged
        judge.cache.close()
    return table.frame(), tally, judge, shape, keys
