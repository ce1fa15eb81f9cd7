"""A study's judge, built from its typed config: the litellm completer (one endpoint or a Router pool), the
call cache, the retry policy, the budget (shared by a `-m` sweep) and the rate limiter, and the decoding
parameters every call shares.

Every entry point that calls a judge (`run`, `generate`, `extract`, `issues`, `plan`, robustness'
paraphrases) builds it here, in one place, so a setting means the same in each.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypedDict

from experiments.config import AnyStage, JudgeConfig, StudyConfig, as_dict
from experiments.inputs import StudyError
from experiments.prompt import Prompt
from experiments.shard import refresh_date
from experiments.spend import budget_for, judge_prices, share_budget
from judge.cache.backends import open_cache
from judge.cache.store import CacheError
from judge.client import Judge
from judge.completer import Completer, LiteLLMCompleter
from judge.expected import TOP_LOGPROBS
from judge.local import provider as local_provider  # a module: tests replace its register
from judge.pool import RouterCompleter
from judge.quirks import RequestShape, request_shape
from judge.ratelimit import RateSettingError, limiter_for
from judge.retry import RetryPolicy
from judge.rubric import Rubric, response_format
from judge.secrets import remember_secrets
from judge.spend.pricing import Prices


def sampling_params(cfg: AnyStage) -> dict[str, Any]:
    """The decoding parameters every call of a run shares (each sample adds its index to the seed);
    `max_tokens: null` leaves the output budget to each prompt (`max_tokens_of`)."""
    params: dict[str, Any] = {"temperature": float(cfg.temperature), "seed": cfg.seed}
    if cfg.max_tokens is not None:
        params["max_tokens"] = cfg.max_tokens
    if isinstance(cfg, StudyConfig) and cfg.expected_scores:  # G-Eval expected scores need log-probabilities
        params |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
    return params


def max_tokens_of(cfg: StudyConfig, prompt: Prompt) -> int:
    """A call's output budget: the study's `max_tokens`, else what the prompt's complete answer needs."""
    return cfg.max_tokens if cfg.max_tokens is not None else prompt.answer_tokens


def sent_request(cfg: StudyConfig, rubric: Rubric, completer: Completer) -> RequestShape:
    """What this run's requests carry after litellm's parameter mapping (judge.quirks), built, never sent.

    The parameters are merged by `completer.request_params`, the code that builds every request the run sends
    (judge.extra beneath the run's own parameters), so the record and the request cannot disagree."""
    # a one-item prompt's budget stands for the run's (`max_tokens: null` sizes each prompt's own)
    params = {"max_tokens": rubric.answer_tokens(None), **sampling_params(cfg)}
    if cfg.judge.structured_output:
        params["response_format"] = response_format(rubric, None)
    return request_shape(cfg.judge.model, cfg.judge.api_base, completer.request_params(params))


def make_judge(
    cfg: AnyStage, *, largest_output: int | None = None, sweep_dir: Path | None = None, job: str = ""
) -> Judge:
    """The judge of this study, assembled here only: litellm completer + call cache + retry policy, and for a
    study its budget (`budget_usd`: its worst call costs `largest_output` tokens, the run's largest output
    budget; in a -m sweep, `sweep_dir`, the sweep's, with this run as `job`) and its rate limiter. An unusable
    cache folder or sweep ledger is a one-line StudyError for every entry point."""
    # every error, row and file of this judge is scrubbed of the config's secrets
    remember_secrets(as_dict(cfg))
    jcfg = cfg.judge
    if jcfg.model.startswith("local/") or jcfg.extra.get("custom_llm_provider") == "local":
        # the embedded model's litellm provider (judge.local.provider), registered before its prices are read

        local_provider.register()  # makes "local/..." a litellm provider like any other; loads no weights until called
    policy = RetryPolicy(**dataclasses.asdict(cfg.retry))
    # a Retry-After is capped as without a limit
    try:
        limiter = limiter_for(jcfg.model, jcfg.rpm, jcfg.tpm, jcfg.concurrency, max_wait_s=policy.max_wait_s)
    except RateSettingError as exc:
        raise StudyError(str(exc)) from None
    budget = budget_for(cfg, largest_output) if isinstance(cfg, StudyConfig) else None
    share_budget(budget, sweep_dir, job)
    completer = make_completer(jcfg, read_headers=limiter is not None)
    try:
        cache = open_cache(cfg.cache.backend, cfg.cache.url, cfg.cache_dir)
    except CacheError as exc:
        raise StudyError(str(exc)) from None
    return Judge(
        completer,
        cache,
        policy=policy,
        concurrency=jcfg.concurrency,
        api_base=completer.api_base,
        refresh_tag=refresh_date(cfg.cache),
        budget=budget,
        limiter=limiter,
    )


class _CompleterSettings(TypedDict):
    """The keywords every completer takes (a single endpoint's and a pool's alike)."""

    api_key_env: str | None
    timeout_s: float
    extra: dict[str, Any]
    prices: Prices


def make_completer(jcfg: JudgeConfig, *, read_headers: bool = False) -> LiteLLMCompleter:
    """litellm for one endpoint (`api_base`), or litellm's Router over replicas (`api_bases`, judge.pool);
    `read_headers` for a rate-limited judge (judge.ratelimit reads the provider's limit headers)."""
    common = _CompleterSettings(
        api_key_env=jcfg.api_key_env,
        timeout_s=jcfg.timeout_s,
        extra=jcfg.extra,
        prices=judge_prices(jcfg),  # the plan's and the budget's prices: one source (judge.spend.pricing)
    )
    completer: LiteLLMCompleter
    if not jcfg.api_bases:
        completer = LiteLLMCompleter(jcfg.model, api_base=jcfg.api_base, **common)
    else:
        problem = jcfg.pool.problem()
        if problem:
            raise StudyError(problem)
        completer = RouterCompleter(jcfg.model, api_bases=list(jcfg.api_bases), pool=jcfg.pool, **common)
    completer.read_headers = read_headers
    return completer
