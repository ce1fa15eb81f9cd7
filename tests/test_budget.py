"""budget_usd: the stop (no call past the cap, in-flight calls finish and are cached), the manifest, the exit
code, and a rerun with a larger budget that repeats no call."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.inputs import BudgetStop, StudyError
from judge.spend.budget import Budget, BudgetError
from judge.spend.pricing import Prices, prompt_tokens
from judge.types import Completion
from tests.support.cli import run as run_cli
from tests.support.configs import compose
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import typed

ROOT = Path(__file__).resolve().parent.parent
PRICES = ["judge.input_cost_per_token=1e-5", "judge.output_cost_per_token=1e-5"]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def _request_ids(server: ScriptedServer) -> Counter[str]:
    return Counter(json.dumps([r["messages"], r.get("seed")], sort_keys=True) for r in server.requests)


def test_budget_reserves_the_worst_case_and_stops_at_the_first_misfit() -> None:
    prices = Prices(1e-5, 1e-5, source="litellm")
    messages = [{"role": "user", "content": "word " * 50}]
    bound = (prompt_tokens("gpt-4o", messages) + 100) * 1e-5
    budget = Budget(2.5 * bound, "gpt-4o", prices, max_tokens=100)
    first, second = budget.start(messages), budget.start(messages)
    assert first == second == pytest.approx(bound)
    assert budget.start(messages) is None and budget.stopped  # a third would not fit next to two in flight
    done = Completion("x", "stop", 10, 5, cost_usd=None, latency_s=0.1)
    budget.finish(first, done)  # type: ignore[arg-type]
    assert budget.spent_usd == pytest.approx(15 * 1e-5)  # actual usage at the judge's prices
    assert budget.start(messages) is None and budget.not_started == 2  # stopped: nothing new starts
    budget.finish(second, None)  # type: ignore[arg-type]  (failed: not billed)
    assert budget.reserved_usd == 0 and budget.spent_usd == pytest.approx(15e-5)
    with pytest.raises(BudgetError, match="needs a price"):
        Budget(1.0, "openai/unmapped", Prices(), max_tokens=10)


def test_calls_held_back_by_reservations_wait_and_the_cap_still_holds() -> None:
    """Four calls at once under room for two worst cases: the others wait for the first two (which cost a
    tenth of their bound), then run; with room for one worst case only, the second call can never fit."""
    import asyncio  # noqa: PLC0415

    prices = Prices(1e-5, 1e-5, source="config")
    messages = [{"role": "user", "content": "word " * 50}]
    bound = (prompt_tokens("gpt-4o", messages) + 100) * 1e-5
    cheap = Completion("x", "stop", 1, int(bound / 1e-5 / 10), cost_usd=None, latency_s=0.0)

    async def calls(budget: Budget, n: int) -> tuple[list[float | None], float]:
        peak = 0.0

        async def one() -> float | None:
            nonlocal peak
            reserved = await budget.wait_start(messages)
            peak = max(peak, budget.reserved_usd)
            if reserved is not None:
                await asyncio.sleep(0.01)
                budget.finish(reserved, cheap)
            return reserved

        return list(await asyncio.gather(*(one() for _ in range(n)))), peak

    roomy = Budget(2.5 * bound, "gpt-4o", prices, max_tokens=100)
    started, peak = asyncio.run(calls(roomy, 4))
    assert all(r == pytest.approx(bound) for r in started) and peak <= 2.5 * bound and not roomy.stopped
    tight = Budget(1.05 * bound, "gpt-4o", prices, max_tokens=100)
    started, _ = asyncio.run(calls(tight, 3))
    assert sum(r is not None for r in started) == 1 and tight.stopped and tight.not_started == 2
    assert tight.spent_usd <= 1.05 * bound


def test_budget_stop_manifest_and_resume_without_repeats(server: ScriptedServer, tmp_path: Path) -> None:
    from experiments.study import run_study

    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=2",
        "n_samples=2",
        "progress=false",
        "max_tokens=40",
        *PRICES,
    )
    cfg["cache_dir"] = str(tmp_path / "cache")
    before = len(server.requests)
    # a call reserves (614-739 prompt tokens + 40) * 1e-5 = 0.0065-0.0078 and costs 19e-5: it fits while the
    # spend leaves room for its reservation; calls held back only by others' reservations wait for them
    with pytest.raises(BudgetStop, match=r"budget_usd=0.01 reached: spent \$0\.0\d+; \d+ calls not started"):
        run_study(typed({**cfg, "budget_usd": 0.01}), None, tmp_path / "a", run_id="a")
    made = len(server.requests) - before
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["stopped"] == "budget" and 0.01 - 0.0078 < manifest["spend_usd"] <= 0.01
    assert 0 < made == manifest["calls_made"] < 44
    assert manifest["calls_not_started"] == 44 - made
    # the spend is the provider-reported usage (12 prompt + 7 completion tokens per call) at the judge's prices
    assert manifest["spend_usd"] == pytest.approx(made * 19 * 1e-5)
    assert manifest["cost_usd"] == pytest.approx(manifest["spend_usd"])  # the same prices price the table

    # a larger budget continues: only the calls not made before reach the provider, none twice
    run_study(typed({**cfg, "budget_usd": 5.0}), None, tmp_path / "b", run_id="b")
    resumed = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert resumed["stopped"] is None and resumed["calls_cached"] == made
    assert resumed["calls_made"] == 44 - made and len(server.requests) - before == 44
    assert max(_request_ids(server).values()) == 1


def test_budget_without_a_price_is_one_line(tmp_path: Path) -> None:
    from experiments.study import run_study

    # a model no other test prices: litellm's price map is process-wide, and another test file on the same
    # pytest worker may have priced the qwen judge's model in it
    cfg = compose("judge=qwen", "judge.model=openai/unpriced-budget-test-model", "limit=1", "budget_usd=1")
    with pytest.raises(
        StudyError, match=r"budget_usd=1(\.0)?: needs a price for openai/unpriced-budget-test-model"
    ):
        run_study(typed({**cfg, "cache_dir": str(tmp_path / "cache")}), None, tmp_path / "out", run_id="x")


@pytest.mark.slow  # a subprocess: the CLI end to end
def test_budget_stop_exit_code(server: ScriptedServer, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"JUDGESCOPE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)})
    args = [
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=1",
        "n_samples=1",
        "max_tokens=40",
        "budget_usd=0.008",
        *PRICES,
        "progress=false",
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    done = run_cli(
        [sys.executable, "-m", "experiments.run", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert "stopped: budget_usd=0.008 reached" in done.stderr and "Traceback" not in done.stderr
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["stopped"] == "budget"


# hostile review 2, finding 6: a budget stop's parse rate ---


def test_a_budget_stop_rates_only_the_calls_made(tmp_path: Path) -> None:
    from experiments.study import run_study

    srv = ScriptedServer(lambda body: Step(200, "I think this is good."))  # no answer can be scored
    cfg = compose(
        "judge=qwen",
        "judge.api_key_env=null",
        "limit=2",
        "n_samples=2",
        "progress=false",
        "max_tokens=40",
        "workers=1",
        "min_parse_rate=0.9",
        *PRICES,
    )
    cfg = {**cfg, "cache_dir": str(tmp_path / "cache"), "budget_usd": 0.01}
    with srv.running():
        cfg["judge"]["api_base"] = srv.api_base
        with pytest.raises(
            BudgetStop,
            match=r"budget_usd=0.01 reached: .* calls not started .*; and of the calls "
            r"made, parse rate 0\.000 is below min_parse_rate=0\.9 \((\d+) of \1 "
            r"calls unscored",
        ):
            run_study(typed(cfg), None, tmp_path / "run", run_id="run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["calls_not_started"] > 0 and manifest["unscored_calls"] == manifest["calls_made"] > 0
    assert manifest["parse_rate"] == 0.0  # not (not started)/(total): those calls were never answered


def test_a_timed_out_attempt_keeps_its_reservation_as_spent(tmp_path: Path) -> None:
    """Issue 25 #11: attempts the client gave up on (timeouts) counted as free, yet the server completed them:
    $0.40 at the provider against a $0.30 budget while the manifest said $0.17. Each timed-out attempt is now
    spent at its reservation (the worst case), and a retry must fit the budget again."""
    import litellm

    from judge.cache.store import CallCache
    from judge.client import SPENT_ON_TIMEOUT, Judge
    from judge.retry import RetryPolicy
    from tests.support.fakes import FakeCompleter

    prices = Prices(1e-5, 1e-5, source="config")
    messages = [{"role": "user", "content": "word " * 50}]
    bound = (prompt_tokens("gpt-4o", messages) + 100) * 1e-5
    answered = (10 + 5) * 1e-5  # the fake's usage at these prices
    attempts: list[int] = []

    def script(_: object, __: object) -> str | BaseException:
        attempts.append(1)
        timeout = litellm.Timeout("timed out", model="gpt-4o", llm_provider="openai")
        return timeout if len(attempts) <= 2 else "{}"

    def judge_with(limit: float) -> Judge:
        attempts.clear()
        completer = FakeCompleter(script, model="gpt-4o")
        judge = Judge(completer, CallCache(tmp_path / f"cache{limit}"), policy=RetryPolicy(4, 0.001, 0.002))
        judge.budget = Budget(limit, "gpt-4o", prices, max_tokens=100)
        return judge

    judge = judge_with(10 * bound)  # room for every attempt: two timed out, the third answered
    result = asyncio.run(judge.call_provider(messages, {"seed": 0}, "k"))
    assert result.completion is not None and len(attempts) == 3 and result.retries == 2
    assert judge.budget is not None and judge.budget.spent_usd == pytest.approx(2 * bound + answered)
    assert judge.budget.reserved_usd == 0

    judge = judge_with(1.5 * bound)  # one attempt's worst case fits; after it timed out, no second one does
    result = asyncio.run(judge.call_provider(messages, {"seed": 0}, "k"))
    assert result.completion is None and result.error == SPENT_ON_TIMEOUT and len(attempts) == 1
    assert result.retries == 0  # one request sent: the call's error, no retry (made + retries + errors)
    assert judge.budget is not None and judge.budget.stopped
    assert judge.budget.spent_usd == pytest.approx(bound)


def test_config_prices_price_the_rows_the_manifest_and_the_budget_alike(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Prices set in the judge's YAML (litellm has none for this model) are the one price source (issue 24.10):
    each call's cost_usd in the results, the manifest's cost_usd and the budget's spend_usd are all its tokens at
    those prices (before: cost_usd null in all 66 rows and in the manifest, beside spend_usd 0.00726)."""
    import pandas as pd  # noqa: PLC0415

    from experiments.study import run_study

    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=1",
        "n_samples=2",
        "progress=false",
        "max_tokens=40",
        "judge.input_cost_per_token=1e-5",
        "judge.output_cost_per_token=3e-5",
    )
    cfg["cache_dir"] = str(tmp_path / "cache")
    run_study(typed({**cfg, "budget_usd": 5.0}), None, tmp_path / "run", run_id="run")
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    table = pd.read_parquet(tmp_path / "run" / "results.parquet")
    calls = table.drop_duplicates(["prompt_id", "sample_idx"])
    assert len(calls) == manifest["calls_made"] > 0 and table["cost_usd"].notna().all()
    expected = calls["prompt_tokens"] * 1e-5 + calls["completion_tokens"] * 3e-5
    assert calls["cost_usd"].to_numpy() == pytest.approx(expected.to_numpy())
    assert manifest["cost_usd"] == pytest.approx(expected.sum()) and expected.sum() > 0
    assert manifest["spend_usd"] == pytest.approx(manifest["cost_usd"])
