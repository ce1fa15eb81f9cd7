"""Issue 33 items 2-5 and issue 34 break 8: the report's first screen and every judge card say what the study
did not do. A study stopped by its budget, one with 429s, one with off-scale expert labels and one with two
identical judges each say so, through `python -m analysis.report` and `python -m analysis.card`.

The studies are tiny (one or two instances, one sample) and run in this process against the local test
servers of tests/support; the commands under test run in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from experiments.inputs import BudgetStop
from tests.support.cli import run as run_cli
from tests.support.configs import compose
from tests.support.fault_server import FaultServer
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import cli_env, typed

PRICES = ("judge.input_cost_per_token=1e-5", "judge.output_cost_per_token=1e-5")
SUMMARY_END = "## Contents"  # the first screen: everything above the table of contents


def _study(tmp: Path, api_base: str, out: str, *overrides: str, budget: float | None = None) -> Path:
    """One run of the qwen judge at `api_base` into tmp/<out> (the cache under tmp)."""
    from experiments.study import run_study

    os.environ.setdefault("OPENAI_API_KEY", "sk-local-test-server")
    cfg = compose(
        "judge=qwen",
        f"judge.api_base={api_base}",
        "limit=1",
        "n_samples=1",
        "progress=false",
        "workers=1",
        "min_parse_rate=0",
        *overrides,
    )
    cfg["cache_dir"] = str(tmp / "cache")
    if budget is not None:
        cfg["budget_usd"] = budget
    try:
        run_study(typed(cfg), None, tmp / out, run_id=Path(out).name)
    except BudgetStop:
        pass  # the outputs are written; the banner is what is tested
    return tmp / out


def _cli(tmp: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        [sys.executable, "-m", module, *args],
        env=cli_env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _first_screen(root: Path) -> str:
    text = (root / "report" / "report.md").read_text(encoding="utf-8")
    return text.split(SUMMARY_END, 1)[0]


def _card(root: Path, judge: str = "qwen") -> tuple[str, dict]:
    return (root / "cards" / f"{judge}.md").read_text(), json.loads(
        (root / "cards" / f"{judge}.json").read_text()
    )


def _report_and_card(root: Path, *extra: str) -> None:
    """The report through its command (a subprocess), the cards through their entry point (in process: each
    subprocess costs an import of the whole stack)."""
    from analysis.card.build import main as card_main

    done = _cli(root, "analysis.report", str(root), "--n-boot", "20", *extra)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert card_main([str(root), "--n-boot", "20", "--n-null", "5", *extra]) == 0


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def test_a_budget_stop_says_so_on_the_first_screen_and_the_card(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # before: the report read "scored 1.000" and never said the run stopped; a call reserves about 0.0065
    run = _study(tmp_path, server.api_base, "run", "max_tokens=40", *PRICES, budget=0.0071)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["stopped"] == "budget" and manifest["calls_not_started"] > 0
    _report_and_card(run)
    made, skipped = manifest["calls_made"], manifest["calls_not_started"]
    screen = _first_screen(run)
    assert screen.index("Is the study complete?") < screen.index("Which judge agrees")
    assert f"**Incomplete**: {made} of {made + skipped} calls answered, {skipped} not started" in screen
    assert "Stopped: budget_usd=0.0071 reached" in screen
    text, card = _card(run)
    assert card["completeness"][0].startswith("**Incomplete**") and "not started" in card["completeness"][0]
    assert text.splitlines()[2].startswith("> **Incomplete**")


def test_a_run_stopped_before_its_first_answer_gets_the_banner_not_a_traceback(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # issue 34 break 8: `KeyError: 'judge'` from both commands
    run = _study(tmp_path, server.api_base, "run", "max_tokens=40", *PRICES, budget=0.001)
    assert pd.read_parquet(run / "results.parquet").empty
    for module in ("analysis.report", "analysis.card"):
        done = _cli(tmp_path, module, str(run))
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.startswith(f"nothing was answered below {run}") and done.stderr.count("\n") == 1
    screen = _first_screen(run)
    assert "0 of 11 calls answered, 11 not started" in screen and "Nothing was answered" in screen
    text, card = _card(run)
    assert "Nothing was answered" in text and card["rows"] == 0


def test_rate_limited_calls_are_provider_failures_not_parse_failures(tmp_path: Path) -> None:
    # before: "qwen parse rate 82%" for a judge whose every answer parsed; 4 calls ended in 429s
    srv = FaultServer(faults={"429_retry_after": 0.6}, answers={}, max_faults=2)
    with srv.running():
        run = _study(tmp_path, srv.api_base, "run", "retry.max_attempts=2", "retry.max_wait_s=0.05")
    failed = json.loads((run / "manifest.json").read_text())["provider_errors"]
    assert failed > 0
    _report_and_card(run)
    screen = _first_screen(run)
    assert f"unscored calls of 11 started: rate limit (429) {failed}." in screen
    assert "parse rate 100%, " in screen and f"{failed} calls failed at the provider" in screen
    board = pd.read_csv(run / "report" / "tables" / "leaderboard.csv")
    assert board.loc[0, "parse_rate"] == 1.0 and board.loc[0, "provider_failed"] == failed
    text, card = _card(run)
    assert card["parse_rate"] == 1.0 and card["provider_failed"] == failed
    assert f"rate limit (429) {failed}" in text


@pytest.fixture(scope="module")
def labelled(server: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One judged instance (the novelty rubric: 0-3) and the shipped sample's expert labels for it."""
    tmp = tmp_path_factory.mktemp("labelled")
    run = _study(tmp, server.api_base, "run")
    humans = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "sample" / "humans.csv", dtype=str)
    humans.to_csv(tmp / "humans.csv", index=False)
    return run


@pytest.mark.parametrize("value", ["7", "99", "1e308", "inf", "nan", "-1", "2.5"])
def test_off_scale_expert_scores_are_refused_in_one_line(labelled: Path, value: str) -> None:
    from analysis.card.build import main as card_main
    from analysis.report.build import main as report_main

    humans = pd.read_csv(labelled.parent / "humans.csv", dtype=str)
    humans.loc[0, "score"] = value  # file line 2: originality, a dimension the judge scored (0-3)
    path = labelled.parent / f"humans_{value}.csv"
    humans.to_csv(path, index=False)
    for entry in (report_main, card_main):
        assert entry([str(labelled), "--humans", str(path), "--n-boot", "5"]) == 2


def test_off_scale_experts_through_the_command_line(labelled: Path) -> None:
    # before: a 1-7 file against a 0-3 rubric was compared as it is (κ_w ~0.2 -> 0.05), exit 0
    humans = pd.read_csv(labelled.parent / "humans.csv", dtype=str)
    humans["score"] = (humans["score"].astype(int) * 2 + 1).astype(str)  # 1-7
    path = labelled.parent / "humans_1to7.csv"
    humans.to_csv(path, index=False)
    for module in ("analysis.report", "analysis.card"):
        done = _cli(labelled.parent, module, str(labelled), "--humans", str(path))
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0] == (
            f"error: {path}:2: score 7 for originality is not a whole number on the judges' rubric range 0-3 "
            "(is the file on another scale?)"
        ), lines


def test_labels_matching_part_or_none_of_the_judged_candidates(labelled: Path) -> None:
    humans = pd.read_csv(labelled.parent / "humans.csv", dtype=str)
    judged = set(pd.read_parquet(labelled / "results.parquet")["candidate_id"])
    matching = humans["candidate_id"].isin(judged)
    assert 0 < matching.sum() < len(humans)
    _report_and_card(labelled, "--humans", str(labelled.parent / "humans.csv"))
    line = f"Expert labels: {matching.sum()} of {len(humans)} name a candidate the judges scored"
    assert line in _first_screen(labelled)
    assert f"{(~matching).sum()} match no judged candidate" in _first_screen(labelled)
    assert any(line in entry for entry in _card(labelled)[1]["completeness"])
    none = labelled.parent / "humans_none.csv"
    humans.assign(instance_id="another-dataset").to_csv(none, index=False)
    done = _cli(labelled.parent, "analysis.report", str(labelled), "--humans", str(none))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"error: {none}: none of its {len(humans)} labels")


def test_two_judges_that_are_one_model_are_named_and_not_combined(
    server: ScriptedServer, tmp_path: Path
) -> None:
    # before: "tie: judge_one and judge_two agree equally", combined tables averaging the model with itself
    root = tmp_path / "multirun"
    for i, name in enumerate(("judge_one", "judge_two")):
        _study(tmp_path, server.api_base, f"multirun/{i}_{name}", f"judge.name={name}")
    _report_and_card(root)
    screen = _first_screen(root)
    assert (
        "judge_one and judge_two are one rater (byte-identical answers on all 11 calls both answered; "
        in screen
    )
    assert "same model openai/Qwen/Qwen2.5-7B-Instruct at " in screen
    assert not list((root / "report" / "tables").glob("*_combined.csv"))
    assert "judge_one and judge_two are one rater" in (root / "report" / "paper_tables.md").read_text()
    for judge in ("judge_one", "judge_two"):
        text, card = _card(root, judge)
        assert any("judge_one and judge_two are one rater" in line for line in card["completeness"])


def test_the_novelty_illusion_answer_has_both_halves_and_their_figures(tmp_path: Path) -> None:
    # before: the summary answered with the mode shift only; the experts-vs-judges gap sat in a table, no figure
    from analysis.load.synthetic import synthetic_humans, synthetic_results

    study = synthetic_results(n_instances=6, judges=("judge_a",), n_samples=1, seed=3)
    (tmp_path / "run").mkdir()
    study.to_parquet(tmp_path / "run" / "results.parquet", index=False)
    labels = synthetic_humans(study, seed=2)
    labels.to_csv(tmp_path / "humans.csv", index=False)
    # --n-boot 20 (was the default 1,000): the lines checked hold counts, rates and McNemar's exact p, no interval
    humans = str(tmp_path / "humans.csv")
    done = _cli(tmp_path, "analysis.report", str(tmp_path / "run"), "--humans", humans, "--n-boot", "20")
    assert done.returncode == 0, done.stderr[-2000:]
    screen = _first_screen(tmp_path / "run")
    illusion = screen.split("**Is there a novelty illusion?**", 1)[1].split("**How consistent", 1)[0]
    gap = pd.read_csv(tmp_path / "run" / "report" / "tables" / "preference_gap.csv")
    assert "- Independent → comparative: " in illusion and "- Experts vs judges: " in illusion
    row = gap.iloc[0]
    assert (
        f"{row['judge']} [{row['mode']}] {row['judge_win']:.0%} vs the experts' {row['human_win']:.0%} (gap "
        in illusion
    )
    assert f"n = {int(row['n'])}, p = {row['mcnemar_p']:.3g}, q = {row['mcnemar_p_q']:.3g})" in illusion
    assert "![mode_shift](figures/mode_shift.png)" in illusion
    assert "![preference_gap](figures/preference_gap.png)" in illusion
    assert (tmp_path / "run" / "report" / "figures" / "preference_gap.png").stat().st_size > 0


def test_one_differing_answer_makes_two_raters_and_each_cause_is_named() -> None:
    from analysis.load.completeness import call_causes
    from experiments.duplicates import identical_answers

    rows = pd.DataFrame(
        {
            "judge": ["a", "a", "a", "b", "b", "b"],
            "prompt_id": ["p1", "p2", "p3"] * 2,
            "sample_idx": 0,
            "raw": ['{"x": 1}', '{"x": 2}', '{"x": 3}', '{"x": 1}', '{"x": 2}', '{"x": 3}'],
        }
    )
    assert identical_answers(rows)[["judge_a", "judge_b", "shared"]].values.tolist() == [["a", "b", 3]]
    assert identical_answers(rows.assign(raw=rows["raw"].where(rows.index != 5, '{"x": 0}'))).empty
    assert identical_answers(rows.head(4)).empty  # one shared call says nothing
    errors = [
        "provider: RateLimitError after 6 attempts: 429",
        "provider: Timeout after 6 attempts: timed out",
        "provider: APIError (not retried): bad gateway",
        "truncated (finish_reason=length): missing field 'x'",
        "no JSON object in the answer",
        None,
    ]
    calls = pd.DataFrame(
        {
            "judge": "a",
            "prompt_id": [f"p{i}" for i in range(6)],
            "sample_idx": 0,
            "parse_ok": [False] * 5 + [True],
            "error": errors,
            "raw": ["", "", "", "{", "words", '{"x": 1}'],
            "finish_reason": [None, None, None, "length", "stop", "stop"],
            "prompt_tokens": [0, 0, 0, 10, 10, 10],
            "completion_tokens": [0, 0, 0, 5, 5, 5],
        }
    )
    causes = call_causes(calls)
    assert causes["cause"].tolist() == [
        "rate_limit",
        "timeout",
        "provider_error",
        "cut_off",
        "unparseable",
        None,
    ]
    assert causes["answered"].tolist() == [False, False, False, True, True, True]
