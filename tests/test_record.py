"""Issue 33 items 1, 6, 7, issue 34 breaks 13 and 19, issue 37's robustness-folder and rate-limit frictions:
the record says what was sent, what ran, what failed and why - each through the command line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from tests.support.batch_server import BatchServer
from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.runners import run
from tests.support.studies import cli_env


def test_every_extra_sampling_override_is_recorded_as_sent(tmp_path: Path) -> None:
    """`temperature=0.3 +judge.extra.temperature=0.9` (and top_p, max_tokens, seed in judge.extra): what the
    server received is what every results row and manifest.json say (it sent 0.3 and recorded 0.9)."""
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.structured_output=false",
                "mode=independent",
                "limit=1",
                "n_samples=1",
                "temperature=0.3",
                "+judge.extra.temperature=0.9",
                "+judge.extra.top_p=0.5",
                "+judge.extra.max_tokens=777",
                "+judge.extra.seed=41",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    sent = {(b["temperature"], b["top_p"], b["max_tokens"], b["seed"]) for b in srv.requests}
    assert sent == {(0.9, 0.5, 777, 41)}, sent  # judge.extra wins over the typed setting (README)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    record = manifest["request"]["sent"]
    assert (record["temperature"], record["top_p"], record["max_tokens"], record["seed"]) == (
        0.9,
        0.5,
        777,
        41,
    )
    assert manifest["temperature"] == 0.9 and manifest["temperature_asked"] == 0.9
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert set(rows["temperature"]) == {0.9}


def _review_run(tmp: Path, srv: ScriptedServer, temperature: float, name: str) -> None:
    out = run(
        [
            "experiment=review_quality",
            "judge=qwen",
            f"judge.api_base={srv.api_base}",
            "judge.structured_output=false",
            "limit=2",
            "n_samples=1",
            f"temperature={temperature}",
            f"hydra.run.dir={name}",
        ],
        tmp,
    )
    assert out.returncode == 0, out.stderr[-2000:]


def test_echoreview_temperature_check_reads_the_recorded_temperature(tmp_path: Path) -> None:
    """The loader kept no `temperature`, so every run read "T unknown, not comparable": a run at 0.1 passes
    EchoReview's T check and one at 1.0 fails it, both through the command line."""
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        _review_run(tmp_path, srv, 0.1, "low")
        _review_run(tmp_path, srv, 1.0, "high")
    for name, ok in (("low", True), ("high", False)):
        out = run_cli(
            [sys.executable, "-m", "analysis.echoreview_report", name, "--n-boot", "50"],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        table = pd.read_csv(tmp_path / name / "echoreview_quality.csv")
        assert set(table["temperature_ok"]) == {ok}, out.stdout
        assert ("⚠ Overall Quality is defined" in out.stdout) is not ok
        assert "unknown" not in out.stdout
    assert set(pd.read_csv(tmp_path / "high" / "echoreview_quality.csv")["temperature"]) == {1.0}


def test_the_parse_rate_reason_line_shows_the_values_it_quotes(tmp_path: Path) -> None:
    """Exit 4 on answers outside a choice field: the reason line read `'…' is not one of ['…', '…', '…']`; it
    names the value given and the values allowed."""

    def off_choice(body: dict[str, object]) -> Step:
        return Step(200, re.sub(r'"novelty": "[^"]*"', '"novelty": "maybe"', rubric_answer(body)))

    srv = ScriptedServer(off_choice)
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.structured_output=false",
                "mode=pairwise",
                "limit=1",
                "n_samples=1",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 4, out.stderr[-2000:]
    assert "novelty: 'maybe' is not one of ['a', 'b', 'tie']" in out.stderr, out.stderr
    assert "…" not in out.stderr


def test_a_batch_request_over_the_file_cap_says_which_cap_and_setting(tmp_path: Path) -> None:
    """`batch_settings.max_file_mb` below one request: nothing is sent, yet the line said "every call failed at
    the provider ... rerun the same command" (a rerun fails again). It names the cap and the setting."""
    server = BatchServer(polls=1)
    with server.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={server.api_base}",
                "limit=1",
                "n_samples=1",
                "batch=true",
                "batch_settings.poll_s=0.01",
                "batch_settings.max_file_mb=0.0001",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert server.uploads == 0 and server.chat_requests == 0
    assert out.returncode == 2, out.stderr[-2000:]
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "rerun the same command" not in line and "failed at the provider" not in line
    assert "over the batch file limit of 100 bytes" in line and "batch_settings.max_file_mb" in line, line
    assert "batch=false" in line


def _paraphrase_refused(body: dict[str, Any]) -> Step:
    """Every paraphrase request answered with JSON (rejected by the checks); rubric prompts answered."""
    prompt = str(body["messages"][-1]["content"])
    if prompt.startswith("Rewrite the text"):
        return Step(200, '{"score": 1}')
    return Step(200, rubric_answer(body))


def test_a_failed_perturbation_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    """No paraphrase passes its checks: that job exited 2 and stopped the sweep. Now it is recorded, named at
    the end with `robustness.generator` and the perturbation to drop, the other jobs run, every job folder
    names its perturbation, and analysis.robustness shows each flip rate beside the resample flip rate."""
    srv = ScriptedServer(_paraphrase_refused)
    with srv.running():
        out = run(
            [
                "-m",
                "experiment=robustness",
                "robustness.perturbation=none,paraphrase,padding",
                "robustness.max_attempts=1",
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.structured_output=false",
                "limit=2",
                "n_samples=2",
                f"hydra.sweep.dir={tmp_path / 'm'}",
            ],
            tmp_path,
        )
    jobs = sorted(p.name for p in (tmp_path / "m").iterdir() if p.is_dir())
    assert jobs == [
        "0_qwen_independent_novelty_none",
        "1_qwen_independent_novelty_paraphrase",
        "2_qwen_independent_novelty_padding",
    ], jobs
    assert (tmp_path / "m" / jobs[2] / "results.parquet").is_file()  # the sweep went on
    assert out.returncode != 0, out.stderr[-2000:]
    named = [line for line in out.stderr.splitlines() if line.startswith(f"error: job {jobs[1]}:")]
    assert len(named) == 1, out.stderr[-3000:]
    assert "robustness.generator=" in named[0] and "drop paraphrase from the sweep" in named[0]
    assert "robustness.perturbation=none,sentence_deletion,padding,injection,order,labels" in named[0]
    table = run_cli(
        [sys.executable, "-m", "analysis.robustness", "m", "--n-boot", "50"],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert table.returncode == 0, table.stderr[-2000:]
    csv = pd.read_csv(tmp_path / "m" / "robustness.csv")
    assert set(csv["perturbation"]) == {"padding"}
    for col in ("flip_rate", "flip_lo", "flip_hi", "resample_flip_rate", "resample_lo", "resample_hi"):
        assert csv[col].notna().all(), col
    assert "resample" in table.stdout


def test_an_absurd_request_rate_is_refused_before_the_first_call(tmp_path: Path) -> None:
    """`judge.rpm=0.001` booked the first request 17 hours ahead without a word; tpm had this check."""
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.rpm=0.001",
                "limit=1",
                "n_samples=1",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 2 and not srv.requests, out.stderr[-2000:]
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("error: judge.rpm=0.001 "), line
    assert "per minute" in line and not (tmp_path / "run").exists()


def test_a_rate_limit_failure_points_to_rpm_and_tpm(tmp_path: Path) -> None:
    """429s exhausting the retries: the line named RateLimitError only; it says which settings pace the calls."""
    srv = ScriptedServer(lambda body: Step(429))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "limit=1",
                "n_samples=1",
                "retry.max_attempts=2",
                "retry.initial_wait_s=0.01",
                "retry.max_wait_s=0.02",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "RateLimitError" in out.stderr and "judge.rpm" in out.stderr and "judge.tpm" in out.stderr
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert rows["error"].str.contains("judge.rpm", regex=False).all()
