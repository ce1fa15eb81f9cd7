"""A study's judge, built from its config: the litellm completer (one endpoint or a Router pool), the call
cache, the retry policy, the budget and the rate limiter, and the decoding parameters every call shares.

Every entry point that calls a judge (`run`, `generate`, `extract`, `issues`, `plan`) builds it here, so a
setting means the same in each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from experiments.inputs import StudyError
from experiments.prompt import Prompt
from experiments.shard import refresh_date
from experiments.spend import budget_for, judge_prices
from judge.cache import CacheError
from judge.client import Judge
from judge.completer import LiteLLMCompleter
from judge.expected import TOP_LOGPROBS
from judge.pricing import Prices
from judge.quirks import RequestShape, request_shape
from judge.ratelimit import limiter_for
from judge.retry import RetryPolicy
from judge.rubric import Rubric, response_format
from judge.secrets import remember_secrets
from judge.stores import open_cache


def sampling_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The decoding parameters every call of a run shares (each sample adds its index to the seed);
    `max_tokens: null` leaves the output budget to each prompt (`max_tokens_of`)."""
    params: dict[str, Any] = {"temperature": float(cfg["temperature"]), "seed": int(cfg["seed"])}
    if cfg.get("max_tokens") is not None:
        params["max_tokens"] = int(cfg["max_tokens"])
    if cfg.get("expected_scores"):  # G-Eval expected scores need the answer's token log-probabilities
        params |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
    return params


def max_tokens_of(cfg: Mapping[str, Any], prompt: Prompt) -> int:
    """A call's output budget: the study's `max_tokens`, else what the prompt's complete answer needs."""
    return int(cfg["max_tokens"]) if cfg.get("max_tokens") is not None else prompt.answer_tokens


def sent_request(cfg: Mapping[str, Any], rubric: Rubric) -> RequestShape:
    """What this run's requests carry after litellm's parameter mapping (judge.quirks), built, never sent."""
    jcfg = cfg["judge"]
    # a one-item prompt's budget stands for the run's (`max_tokens: null` sizes each prompt's own)
    asked = {"max_tokens": rubric.answer_tokens(None), **sampling_params(cfg), **(jcfg.get("extra") or {})}
    if jcfg.get("structured_output"):
        asked["response_format"] = response_format(rubric, None)
    return request_shape(str(jcfg["model"]), jcfg.get("api_base"), asked)


def make_judge(cfg: Mapping[str, Any]) -> Judge:
    """The judge of this study: litellm completer + call cache + retry policy (an unusable cache folder is a
    one-line StudyError for every entry point)."""
    remember_secrets(cfg)  # every error, row and file of this judge is scrubbed of the config's secrets
    jcfg = cfg["judge"]
    extra = jcfg.get("extra") or {}
    if str(jcfg["model"]).startswith("local/") or extra.get("custom_llm_provider") == "local":
        # the embedded model's litellm provider (judge.local_provider), registered before its prices are read
        from judge.local_provider import register  # noqa: PLC0415 (kept out of import time)

        register()  # makes "local/..." a litellm provider like any other; loads no weights until called
    completer = make_completer(jcfg)
    policy = RetryPolicy(**(cfg.get("retry") or {}))
    try:
        cache = open_cache(cfg.get("cache"), cfg.get("cache_dir"))
    except CacheError as exc:
        raise StudyError(str(exc)) from None
    judge = Judge(completer, cache, policy=policy, concurrency=int(jcfg.get("concurrency", 8)),
                  api_base=completer.api_base, refresh_tag=refresh_date(cfg.get("cache")))  # fmt: skip
    judge.budget = budget_for(cfg)
    judge.limiter = limiter_for(str(jcfg["model"]), jcfg.get("rpm"), jcfg.get("tpm"), judge.concurrency,
                                max_wait_s=policy.max_wait_s)  # a Retry-After is capped as without a limit
    if judge.limiter is not None and hasattr(completer, "read_headers"):
        completer.read_headers = True
    return judge


class _CompleterSettings(TypedDict):
    """The keywords every completer takes (a single endpoint's and a pool's alike)."""

    api_key_env: str | None
    timeout_s: float
    extra: Mapping[str, Any]
    prices: Prices


def make_completer(jcfg: Mapping[str, Any]) -> LiteLLMCompleter:
    """litellm for one endpoint (`api_base`), or litellm's Router over replicas (`api_bases`, judge.pool)."""
    common = _CompleterSettings(
        api_key_env=jcfg.get("api_key_env"),
        timeout_s=float(jcfg.get("timeout_s", 120)),
        extra=jcfg.get("extra") or {},
        prices=judge_prices(jcfg),  # the plan's and the budget's prices: one source (judge.pricing)
    )
    if not jcfg.get("api_bases"):
        return LiteLLMCompleter(jcfg["model"], api_base=jcfg.get("api_base"), **common)
    from judge.pool import RouterCompleter  # noqa: PLC0415 (only pools need the Router)
    from judge.routing import PoolSettings  # noqa: PLC0415

    try:
        pool = PoolSettings.from_config(jcfg.get("pool"))
    except (TypeError, ValueError) as exc:
        raise StudyError(str(exc)) from None
    return RouterCompleter(jcfg["model"], api_bases=list(jcfg["api_bases"]), pool=pool, **common)
