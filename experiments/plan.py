"""`plan=true`: what a run (or a whole `-m` sweep) would cost, before any provider call.

The plan walks exactly the (prompt, sample) calls the run would make, looks each one up in the call cache
(the same keys as the run), and prices the calls still to make: prompt tokens counted with litellm's
tokenizer support for the judge model, completion tokens bounded by the output budget (`max_tokens`), and
litellm's price map (or the judge config's `input_cost_per_token`, ...). An unknown price gives an unknown
cost (null), never 0. It writes `plan.json` into the run folder; a sweep also gets `plan.json` summed over
its jobs in the sweep folder.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.config import StudyConfig
from experiments.datasets.instances import Instance
from experiments.inputs import JudgingInputs, StudyError
from experiments.judges import make_judge, max_tokens_of
from experiments.modes import build_prompts
from experiments.outputs import write_atomic
from experiments.power import power_note
from experiments.prompt import Prompt
from experiments.spend import judge_prices
from experiments.study import LOOKUP_CHUNK, jobs_of, sampler
from judge.cache.store import CacheError
from judge.rubric import Rubric
from judge.spend.pricing import Prices, price_record, prompt_tokens, prompts_counted
from judge.types import Message

COUNTS = (
    "calls_total",
    "calls_cached",
    "calls_shared",
    "calls_to_make",
    "prompt_tokens",
    "completion_tokens_bound",
    "completion_tokens_expected",
)


def _costs(
    prices: Prices, prompt: float, bound: float, expected: float, digits: int | None = 4
) -> dict[str, dict[str, float | None]]:
    def rounded(value: float | None) -> float | None:
        return value if value is None or digits is None else round(value, digits)

    return {
        kind: {
            "expected": rounded(prices.cost(prompt, expected, batch=batch)),
            "bound": rounded(prices.cost(prompt, bound, batch=batch)),
        }
        for kind, batch in (("live", False), ("batch", True))
    }


def plan_study(cfg: StudyConfig, inputs: JudgingInputs) -> dict[str, Any]:
    """The plan of one run: counts, tokens and cost of the calls not yet in the cache. No provider call."""
    rubric, instances, mode = inputs.rubric, inputs.instances, inputs.mode
    assert mode is not None  # a study's inputs carry its mode
    prompts = build_prompts(instances, rubric, mode, seed=cfg.seed)
    judge = make_judge(cfg)
    try:
        counts = _count(judge, prompts, rubric, cfg)
    except CacheError as exc:
        raise StudyError(str(exc)) from None
    finally:
        judge.cache.close()
    prices = judge_prices(cfg.judge)
    try:
        family = mode_shift_family(instances, rubric)
        note = power_note(len(instances), cfg.plan_discordance, cfg.plan_effect, family=family)
    except ValueError as exc:
        raise StudyError(str(exc)) from None
    return {
        "judge": cfg.judge.name,
        "model": cfg.judge.model,
        "mode": mode.name,
        "rubric": rubric.name,
        "instances": len(instances),
        "prompts": len(prompts),
        "n_samples": cfg.n_samples,
        "max_tokens": _largest_budget(cfg, prompts),
        **counts,
        "prices": dict(vars(prices)),
        "price_map": price_record(cfg.judge.model, prices),
        "cost_usd": _costs(
            prices,
            counts["prompt_tokens"],
            counts["completion_tokens_bound"],
            counts["completion_tokens_expected"],
        ),
        "power": note.as_dict(),
    }


def mode_shift_family(instances: Sequence[Instance], rubric: Rubric) -> int:
    """The tests of this judge's mode-shift family (`analysis.stats.multiplicity`): one per generator and
    dimension (a sweep adds its other judges' in `sum_plans`)."""
    generators = {c.source for i in instances for c in i.candidates if c.source not in ("reference", "human")}
    return max(1, len(generators)) * max(1, len(rubric.dimensions))


def _count(judge: Any, prompts: Sequence[Prompt], rubric: Rubric, cfg: StudyConfig) -> dict[str, Any]:
    """Walk the run's calls as `execute_calls` does (a key repeated within the run is asked for once)."""
    model = judge.completer.model
    # each prompt's tokens from its texts' counts (an instance's papers and the instructions counted once);
    # checked against litellm's whole count as it goes, and counted whole again if a check differs
    with prompts_counted(model) as counter:
        counts = _walk(judge, prompts, rubric, cfg, counter)
        if counter.exact:
            return counts
    return _walk(judge, prompts, rubric, cfg, lambda messages: prompt_tokens(model, messages))


def _walk(
    judge: Any,
    prompts: Sequence[Prompt],
    rubric: Rubric,
    cfg: StudyConfig,
    count_tokens: Callable[[Sequence[Message]], int],
) -> dict[str, Any]:
    """`_count` with a given prompt-token counter."""
    sample_of = sampler(judge, rubric, cfg)
    max_tokens = _largest_budget(cfg, prompts)
    seen: set[str] = set()
    tokens_of: dict[str, int] = {}
    calls: dict[str, int] = {}  # cache key -> prompt tokens of each call to make (a sweep counts a key once)
    total = cached = shared = prompt_total = 0
    answered: list[int] = []
    jobs = list(jobs_of(prompts, cfg))
    for start in range(0, len(jobs), LOOKUP_CHUNK):
        chunk = jobs[start : start + LOOKUP_CHUNK]
        asked = [(prompt.messages, sample_of(prompt, sample_idx)) for prompt, sample_idx in chunk]
        for (prompt, _), (key, hit) in zip(chunk, judge.lookup_many(asked, rubric.version), strict=True):
            total += 1
            if hit is not None:
                cached += 1
                if hit.completion is not None:
                    answered.append(hit.completion.completion_tokens)
                continue
            if key in seen:  # the same request again within the run: answered by the one call
                shared += 1
                continue
            seen.add(key)
            if prompt.prompt_id not in tokens_of:
                tokens_of[prompt.prompt_id] = count_tokens(prompt.messages)
            prompt_total += tokens_of[prompt.prompt_id]
            calls[key] = tokens_of[prompt.prompt_id]
    to_make = len(seen)
    # answers already in the cache say how long this judge's answers run; the output budget caps them
    per_call = min(max_tokens, round(sum(answered) / len(answered))) if answered else max_tokens
    counts = {
        "calls_total": total,
        "calls_cached": cached,
        "calls_shared": shared,
        "calls_to_make": to_make,
        "prompt_tokens": prompt_total,
        "completion_tokens_bound": to_make * max_tokens,
        "completion_tokens_expected": to_make * per_call,
    }
    per_call_tokens = {"bound": max_tokens, "expected": per_call}
    return counts | {"calls": calls, "completion_tokens_per_call": per_call_tokens}


def _largest_budget(cfg: StudyConfig, prompts: Sequence[Prompt]) -> int:
    """The largest output budget of the run's calls (each prompt's own when `max_tokens: null`)."""
    return max((max_tokens_of(cfg, p) for p in prompts), default=cfg.max_tokens or 0)


def sum_plans(plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A sweep's plan: counts and costs summed over its jobs; a cost is unknown if any job's is.

    A call two jobs would make (the same cache key: `n_samples=1,3` shares sample 0) is made once: the first
    job to list it makes it, the later ones find it in the cache (counted as shared, at no cost); 44 calls to
    make were planned where the sweep made 33."""
    total: dict[str, Any] = {"jobs": len(plans), **dict.fromkeys(COUNTS, 0)}
    cost: dict[str, dict[str, float | None]] = {k: {"expected": 0.0, "bound": 0.0} for k in ("live", "batch")}
    seen: set[str] = set()
    by_job = []
    for plan in plans:
        new = _new_calls(plan, seen)
        total["calls_total"] += int(plan["calls_total"])
        total["calls_cached"] += int(plan["calls_cached"])
        total["calls_shared"] += int(plan["calls_shared"]) + int(plan["calls_to_make"]) - new["calls_to_make"]
        for name in COUNTS[3:]:  # calls to make and their tokens
            total[name] += new[name]
        for kind in cost:
            for bound in ("expected", "bound"):
                part = new["cost_usd"][kind][bound] if new["calls_to_make"] else 0.0
                before = cost[kind][bound]
                cost[kind][bound] = None if before is None or part is None else before + part
        names = {k: plan[k] for k in ("judge", "mode", "rubric")}
        by_job.append(names | {"calls_to_make": new["calls_to_make"], "cost_usd": _rounded(new["cost_usd"])})
    total["cost_usd"] = _rounded(cost)
    total["by_job"] = by_job
    powered = [p for p in plans if "power" in p]
    if powered:  # the sweep is as powerful as its job with the fewest instances, in the sweep's family
        total["power"] = _sweep_power(powered)
    return total


def _sweep_power(plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The power section of a sweep: its job with the fewest instances, in a family of every judge's
    mode-shift tests (one judge's family per judge, the largest of its jobs)."""
    smallest = min((p["power"] for p in plans), key=lambda p: p["instances"])
    per_judge: dict[str, int] = {}
    for plan in plans:
        size = int(plan["power"].get("family_tests", 1))
        per_judge[str(plan.get("judge"))] = max(per_judge.get(str(plan.get("judge")), 1), size)
    family = sum(per_judge.values())
    if family == int(smallest.get("family_tests", 1)):
        return dict(smallest)
    note = power_note(
        int(smallest["instances"]),
        float(smallest["discordance_assumed"]),
        smallest.get("effect"),
        float(smallest["alpha"]),
        float(smallest["power"]),
        family=family,
    )
    return note.as_dict()


def _rounded(cost: Mapping[str, Mapping[str, float | None]]) -> dict[str, dict[str, float | None]]:
    return {kind: {b: None if v is None else round(v, 4) for b, v in c.items()} for kind, c in cost.items()}


def _new_calls(plan: Mapping[str, Any], seen: set[str]) -> dict[str, Any]:
    """The counts, tokens and cost of a job's calls that no earlier job of the sweep makes (`seen`, updated).
    A plan without its calls' keys (written before they were recorded) counts all of its own."""
    if "calls" not in plan:
        return {k: plan[k] for k in (*COUNTS[3:], "cost_usd")}
    new = {key: tokens for key, tokens in plan["calls"].items() if key not in seen}
    seen.update(new)
    per_call = plan["completion_tokens_per_call"]
    prompt, bound, expected = sum(new.values()), per_call["bound"] * len(new), per_call["expected"] * len(new)
    prices = Prices(**plan["prices"])
    counts = dict(zip(COUNTS[3:], (len(new), prompt, bound, expected), strict=True))
    return counts | {"cost_usd": _costs(prices, prompt, bound, expected, digits=None)}  # rounded once summed


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def describe(plan: Mapping[str, Any], with_power: bool = True) -> str:
    """Two lines for the terminal (three with a power section, when `with_power`)."""
    cost = plan["cost_usd"]
    return _power_line(plan.get("power") if with_power else None) + (
        f"plan: {plan['calls_total']:,} calls, {plan['calls_cached']:,} cached, {plan['calls_to_make']:,} to make; "
        f"~{plan['prompt_tokens']:,} prompt + <= {plan['completion_tokens_bound']:,} completion tokens\n"
        f"plan: cost live {_usd(cost['live']['expected'])} (at most {_usd(cost['live']['bound'])}), "
        f"batch {_usd(cost['batch']['expected'])} (at most {_usd(cost['batch']['bound'])})"
    )


def _power_line(power: Mapping[str, Any] | None) -> str:
    if not power:
        return ""
    mde = power["minimum_detectable_shift"]
    found = "no shift" if mde is None else f"a shift of {mde:.3f}"
    family = int(power.get("family_tests", 1))
    line = (
        f"plan: power: {power['instances']:,} instances detect {found} ({power.get('power_method', 'exact')} "
        f"McNemar, BH q {power['alpha']} over {family} mode-shift test(s), power {power['power']}, "
        f"discordance {power['discordance_assumed']})"
    )
    if power.get("effect") is not None:
        line += f"; a shift of {power['effect']} needs {power['instances_needed']:,} instances"
    return line + "\n"


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda p: p.write_text(json.dumps(data, indent=2)))


def run_plan(
    cfg: StudyConfig, inputs: JudgingInputs, out_dir: Path, sweep_dir: Path | None
) -> dict[str, Any]:
    """Plan one run: write `out_dir/plan.json` (and the sweep's summed `plan.json`) and print it."""
    plan = plan_study(cfg, inputs)
    write_json(out_dir / "plan.json", plan)
    # a sweep prints the power line once, with its summed plan, and again only when a job changes it
    print(describe(plan, with_power=sweep_dir is None), file=sys.stderr)
    if sweep_dir is not None:
        before = sweep_dir / "plan.json"
        earlier = json.loads(before.read_text()).get("power") if before.is_file() else None
        jobs = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/plan.json"))]
        summed = sum_plans(jobs)
        write_json(sweep_dir / "plan.json", summed)
        text = describe(summed, with_power=summed.get("power") != earlier)
        print(f"sweep ({summed['jobs']} jobs so far): " + text.replace("\n", "\nsweep: "), file=sys.stderr)
    return plan
