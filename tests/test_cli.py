"""Issue 11 (hardening) at the command line: what only the real runner shows - exit codes, Hydra's own
files and lines, Ctrl-C - each answered in one line, with no key anywhere and no empty run folder."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import Forked, forkable
from tests.support.cli import run as run_cli
from tests.support.fault_server import FaultServer
from tests.support.openai_server import ScriptedServer, Step
from tests.support.runners import run
from tests.support.studies import cli_env, public_data

KEY = "sk-cli-planted-0123456789abcdef"


def no_key_anywhere(tmp: Path, *outputs: str) -> None:
    for path in tmp.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path
    assert not any(KEY in text for text in outputs)


@pytest.mark.slow
def test_a_key_on_the_command_line_reaches_no_file_and_no_line(tmp_path: Path) -> None:
    """+judge.extra.api_key=...: not in multirun.yaml, Hydra's `#0 : ...` lines, manifests, results, stderr."""
    srv = FaultServer(faults={}, answers={}, dead_rate=0.3, echo_key=True)  # some calls: 503 quoting the key
    with srv.running():
        out = run(
            [
                "-m",
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.api_key_env=null",
                "min_parse_rate=0",
                f"+judge.extra.api_key={KEY}",
                "mode=independent,comparative",
                "limit=1",
                "n_samples=3",
                "retry.max_attempts=2",
                "retry.initial_wait_s=0.01",
                "retry.max_wait_s=0.02",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
            ],
            tmp_path,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert srv.authorizations == {f"Bearer {KEY}"} and srv.counts()["503"] > 0  # sent, and echoed back
    assert (tmp_path / "sweep" / "multirun.yaml").is_file() and "#0 : " in out.stdout + out.stderr
    assert (
        "judge.extra.api_key=${oc.env:JUDGESCOPE_SECRET_"
        in (tmp_path / "sweep" / "multirun.yaml").read_text()
    )
    no_key_anywhere(tmp_path, out.stdout, out.stderr)


@pytest.mark.slow
def test_a_key_in_a_url_or_a_header_map_reaches_no_file_and_no_line(tmp_path: Path) -> None:
    """A key inside `judge.api_base` (`...?key=KEY`) or inside a map override
    (`+judge.extra.headers={X-Api-Key:KEY}`) in a -m sweep: Hydra's job lines, multirun.yaml, config.json and
    every other file show neither; the headers still reach the provider."""
    header_key = "sk-header-planted-fedcba9876543210"
    srv = ScriptedServer(
        lambda body: Step(200, '{"originality": 2, "gap_addressing": 1, "non_obviousness": 1}')
    )
    with srv.running():
        base = f"'{srv.api_base}?key={KEY}'"
        out = run(
            [
                "-m",
                "judge=qwen",
                f"judge.api_base={base}",
                "judge.api_key_env=null",
                "min_parse_rate=0",
                f"+judge.extra.headers={{X-Api-Key:{header_key}}}",
                "n_samples=1,2",
                "limit=1",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
            ],
            tmp_path,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert srv.requests and "#1 : " in out.stdout + out.stderr
    multirun = (tmp_path / "sweep" / "multirun.yaml").read_text()
    assert "?key=${oc.env:JUDGESCOPE_SECRET_" in multirun  # only the key's characters are replaced
    assert "+judge.extra.headers={X-Api-Key:${oc.env:JUDGESCOPE_SECRET_" in multirun
    assert (
        f'"api_base": "{srv.api_base}?key=***REDACTED***"'
        in next((tmp_path / "sweep").rglob("config.json")).read_text()
    )
    no_key_anywhere(tmp_path, out.stdout, out.stderr)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or header_key.encode() not in path.read_bytes(), path
    assert header_key not in out.stdout + out.stderr


def test_an_output_folder_under_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    out = run(["hydra.run.dir=afile/run"], tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: hydra.run.dir=afile/run: afile is a file, not a folder; choose another hydra.run.dir"
    )


def test_a_bad_setting_leaves_no_empty_outputs_folder(tmp_path: Path) -> None:
    """The default `outputs/<date>/<time>` Hydra made: neither the run folder nor the date folder stays."""
    (tmp_path / "keep").mkdir()
    out = run(["limit=0"], tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == "error: limit=0: must be at least 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_a_refused_key_is_one_line_without_warnings(tmp_path: Path) -> None:
    """A 401 stops the study at once: one line, no 'coroutine ... never awaited', no folder, exit 2."""
    srv = ScriptedServer(lambda body: Step(401))
    with srv.running():
        out = run(
            ["judge=gpt-4o", f"judge.api_base={srv.api_base}", "limit=2", "hydra.run.dir=run"],
            tmp_path,
            {"OPENAI_API_KEY": KEY},
        )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "AuthenticationError: check the API key" in out.stderr and "never awaited" not in out.stderr
    assert len(srv.requests) <= 8 and not (tmp_path / "run").exists()  # at most the calls in flight
    no_key_anywhere(tmp_path, out.stdout, out.stderr)


def test_every_call_refused_exits_non_zero_with_a_warning(tmp_path: Path) -> None:
    srv = ScriptedServer(lambda body: Step(503))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "limit=1",
                "n_samples=1",
                "retry.max_attempts=1",
                "hydra.run.dir=run",
            ],
            tmp_path,
            {"QWEN_API_KEY": KEY},
        )
    assert out.returncode == 1 and out.stderr.strip().startswith(
        "warning: every call failed at the provider (11 "
    )
    assert (tmp_path / "run" / "results.parquet").is_file()  # the unscored rows are kept


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path: Path) -> None:
    """Ctrl-C mid-run: the server answers two calls, then holds every further answer until the interrupt has
    been sent (a timer raced: on a quiet machine the whole run finished first and exited 0)."""
    srv = FaultServer(faults={}, answers={}, hold_after=2)
    with srv.running():
        env = cli_env(tmp_path, {"QWEN_API_KEY": KEY})
        args = [
            sys.executable,
            "-m",
            "experiments.run",
            "judge=qwen",
            f"judge.api_base={srv.api_base}",
            "judge.concurrency=2",
            "n_samples=1",
            "limit=2",
            "progress=false",
            "hydra.run.dir=run",
        ]
        # forked from the fork server where it may be (its own process, signalled as a fresh one would be)
        proc: subprocess.Popen[str] | Forked = (
            Forked(args, tmp_path, env, None)
            if forkable(args, env)
            else subprocess.Popen(
                args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
        deadline = time.monotonic() + 120
        while srv.requests <= 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.requests > 2, "the run never reached a held call"  # so it cannot have finished
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            srv.release.set()
        before, srv.hold_after = srv.requests, None
        again = run(args[3:-1] + ["hydra.run.dir=again"], tmp_path, {"QWEN_API_KEY": KEY})
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert (
        err.strip().splitlines()[-1].startswith("interrupted: every answer received so far is cached; rerun")
    )
    assert not (tmp_path / "run").exists()
    assert again.returncode == 0, again.stderr[-2000:]
    manifest = json.loads((tmp_path / "again" / "manifest.json").read_text())
    assert (
        manifest["calls_made"] == srv.requests - before
        and manifest["calls_made"] + manifest["calls_cached"] == 22
    )
    assert manifest["calls_cached"] >= 2  # the two answered before Ctrl-C were kept


@pytest.mark.slow
@pytest.mark.parametrize(
    "module", ["experiments.stages.generate", "experiments.stages.issues", "experiments.stages.extract"]
)
def test_every_stage_hides_keys_and_answers_a_refused_key_in_one_line(module: str, tmp_path: Path) -> None:
    """The generate, issues and extract entry points, like experiments.run: a key on the command line and a
    key the provider echoes in its 401 appear nowhere; the refusal is one `error:` line, exit 2, with no
    traceback and no empty run folder. extract reads the public COLING data (skipped, naming the fetch
    command, where it is not fetched)."""
    if module == "experiments.stages.extract":
        for name in ("coling2020_reviews.jsonl", "novbench_coling2020.jsonl"):
            public_data(name)
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
    srv = ScriptedServer(lambda _: Step(401, body=body))
    with srv.running():
        out = run_cli(
            [
                sys.executable,
                "-m",
                module,
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.api_key_env=null",
                f"+judge.extra.api_key={KEY}",
                "limit=1",
                "retry.max_attempts=1",
                "progress=false",
                "hydra.run.dir=run",
            ],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert srv.requests, out.stderr[-2000:]  # the stage reached the provider
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert out.stderr.startswith("error: ") and "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()
    no_key_anywhere(tmp_path, out.stdout, out.stderr)


@pytest.mark.slow
def test_a_sweep_runs_every_job_and_names_those_under_min_parse_rate_at_its_end(tmp_path: Path) -> None:
    """A sweep job below min_parse_rate writes its outputs and the sweep goes on (a `sys.exit` in a job ended
    the whole sweep at its first such job); the sweep then exits 4, naming each failed job."""
    srv = ScriptedServer(
        lambda body: Step(
            200,
            "I think this is good."
            if body.get("seed", 0) % 2
            else '{"originality": 2, "gap_addressing": 1, "non_obviousness": 1}',
        )
    )
    with srv.running():
        out = run(
            [
                "-m",
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.api_key_env=null",
                "limit=1",
                "n_samples=1",
                "seed=1,0",
                "progress=false",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
            ],
            tmp_path,
        )
    assert out.returncode == 4, out.stderr[-2000:]
    jobs = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert len(jobs) == 2 and all((tmp_path / "sweep" / j / "results.parquet").is_file() for j in jobs)
    failed = [line for line in out.stderr.splitlines() if line.startswith("error: job ")]
    assert len(failed) == 1 and jobs[0] in failed[0] and "min_parse_rate" in failed[0]
    with srv.running():  # the same folder again, the good job only: the earlier failure is not reported
        again = run(
            [
                "-m",
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.api_key_env=null",
                "limit=1",
                "n_samples=1",
                "seed=0",
                "progress=false",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
            ],
            tmp_path,
        )
    assert again.returncode == 0 and "error: job" not in again.stderr, again.stderr[-2000:]


def test_exit_0_still_names_unscored_calls(tmp_path: Path) -> None:
    srv = ScriptedServer(lambda body: Step(200, "I think this is good."))
    with srv.running():
        out = run(
            [
                "judge=qwen",
                f"judge.api_base={srv.api_base}",
                "judge.api_key_env=null",
                "limit=1",
                "n_samples=1",
                "min_parse_rate=0",
                "progress=false",
                "hydra.run.dir=run",
            ],
            tmp_path,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warning: 11 of 11 calls unscored (parse rate 0.0)" in out.stderr


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    out = run(["plan=true", "hydra.run.dir=/proc/judgescope-no-such/run"], tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: hydra.run.dir=/proc/judgescope-no-such/run: cannot make a folder in /proc (No such file or "
        "directory); choose another hydra.run.dir"
    )


def test_a_hidden_map_override_still_merges(tmp_path: Path) -> None:
    """`+judge.extra={api_key:KEY}` merges into the judge's `extra` as Hydra does without a key in it (moving
    the whole map into one variable made Hydra assign it, refusing `+` and dropping `++`'s other entries)."""
    out = run(
        [
            "judge=local_nojson",
            f"+judge.extra={{api_key:{KEY}}}",
            "plan=true",
            "limit=1",
            "hydra.run.dir=run",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    out = run_cli(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "judge=local_nojson",
            f"++judge.extra={{api_key:{KEY}}}",
            "--cfg",
            "job",
            "--resolve",
        ],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "response_format" in out.stdout, out.stderr[-2000:]  # merged, not replaced
    no_key_anywhere(tmp_path, out.stdout, out.stderr)
