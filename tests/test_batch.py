"""batch=true against a local OpenAI-compatible batch API (tests/support/batch_server.py): completed, partial failure,
expiry, a failed batch, kill-and-resume with 0 resubmissions, and results identical to the live path."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.study import run_study
from judge.batch.journal import BatchJournal
from judge.batch.provider import BatchClient, BatchError, BatchRequest
from judge.batch.run import BatchRunner
from judge.cache.store import CallCache
from judge.spend.pricing import Prices
from tests.support.batch_server import BatchServer
from tests.support.cli import popen
from tests.support.configs import compose
from tests.support.studies import typed

ROOT = Path(__file__).resolve().parent.parent
SAME = ["prompt_id", "candidate_id", "dimension", "sample_idx", "score", "raw", "parse_ok", "finish_reason"]


def _cfg(server: BatchServer, tmp: Path, *more: str) -> dict[str, Any]:
    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=1",
        "n_samples=2",
        "progress=false",
        "batch=true",
        "batch_settings.poll_s=0.02",
        *more,
    )
    cfg["cache_dir"] = str(tmp / "cache")
    return cfg


def _manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def test_batch_with_partial_failures_equals_live_and_replays(tmp_path: Path) -> None:
    flaky: set[str] = set()

    def fail_once(body: dict[str, Any]) -> bool:  # every 4th request fails in its first batch only
        ident = json.dumps([body["messages"], body.get("seed")])
        if hashlib.sha256(ident.encode()).digest()[0] % 4 == 0 and ident not in flaky:
            flaky.add(ident)
            return True
        return False

    server = BatchServer(polls=2, fail=fail_once)
    with server.running():
        cfg = _cfg(
            server,
            tmp_path,
            "judge.input_cost_per_token_batches=1e-6",
            "judge.output_cost_per_token_batches=2e-6",
        )
        batch = run_study(typed(cfg), None, tmp_path / "batch", run_id="b")
        live = run_study(
            typed({**cfg, "batch": False, "cache_dir": str(tmp_path / "live-cache")}),
            None,
            tmp_path / "live",
            run_id="l",
        )
        assert server.chat_requests == 22  # the live run; the batch run made no live call
        assert server.created == 2 and server.uploads == 2  # the first batch, then one for its failures
        m = _manifest(tmp_path / "batch")
        assert m["calls_made"] == 22 and m["unscored_calls"] == 0 and m["retries"] == len(flaky) > 0
        assert m["batch"]["batches"] == 2 and m["batch"]["requests"] == 22 + len(flaky)
        assert m["batch"]["failures"] == len(flaky) and m["batch"]["statuses"] == {"completed": 2}
        # batch prices: 12 prompt + 7 completion tokens per answered request
        assert m["batch"]["cost_usd"] == pytest.approx(22 * (12e-6 + 14e-6)) == m["cost_usd"]
        pd.testing.assert_frame_equal(batch[SAME], live[SAME])

        # a replay of the batch run: everything from the cache, nothing submitted, the same table
        again = run_study(typed(cfg), None, tmp_path / "replay", run_id="r")
        assert server.created == 2 and _manifest(tmp_path / "replay")["calls_cached"] == 22
        assert "batch" not in _manifest(tmp_path / "replay")
        pd.testing.assert_frame_equal(again[SAME], batch[SAME])


def test_batch_keeps_log_probabilities_so_expected_scores_equal_live(tmp_path: Path) -> None:
    """expected_scores=true in a batch: the output's log-probabilities are cached with the answer (the key
    asked for them), so the batch table's expected scores equal the live one's, and a live run replaying the
    batch's cache gets them too. Before, the batch path dropped them: every expected score empty, for good."""
    from tests.support.logprobs import PLANTED_EXPECTED
    from tests.support.logprobs import planted_logprobs as _tokens

    server = BatchServer(polls=1, logprobs=_tokens)
    with server.running():
        cfg = _cfg(server, tmp_path, "expected_scores=true")
        batch = run_study(typed(cfg), None, tmp_path / "batch", run_id="b")
        live = run_study(
            typed({**cfg, "batch": False, "cache_dir": str(tmp_path / "live-cache")}),
            None,
            tmp_path / "live",
            run_id="l",
        )
        replay = run_study(
            typed({**cfg, "batch": False}), None, tmp_path / "replay", run_id="r"
        )  # the batch's cache
    assert server.created == 1 and _manifest(tmp_path / "replay")["calls_cached"] == len(batch) // 3
    scored = batch[batch["parse_ok"]]
    assert len(scored) > 0 and (scored["score_expected"] - PLANTED_EXPECTED).abs().max() < 1e-9
    pd.testing.assert_frame_equal(batch[[*SAME, "score_expected"]], live[[*SAME, "score_expected"]])
    pd.testing.assert_frame_equal(replay[[*SAME, "score_expected"]], batch[[*SAME, "score_expected"]])


def test_expired_and_failed_batches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = BatchServer(polls=1, outcomes=["expired", "failed", "failed"])
    with server.running():
        # expired: half answered, the rest in a new batch, which fails; rounds=2 ends there -> unscored
        cfg = _cfg(server, tmp_path, "batch_settings.rounds=2", "progress=true", "min_parse_rate=0")
        frame = run_study(typed(cfg), None, tmp_path / "a", run_id="a")
        progress = capsys.readouterr().err
        assert "batch: 0/22 requests done, waited 0s; batch_1 in_progress" in progress
        assert "batch: 11/22 requests done" in progress and "batch_2 " in progress
        m = _manifest(tmp_path / "a")
        assert m["batch"]["statuses"] == {"expired": 1, "failed": 1} and m["calls_made"] == 11
        assert m["unscored_calls"] == 11 and m["provider_errors"] == 11
        unscored = frame[~frame["parse_ok"]]
        assert unscored["error"].str.startswith("batch: ").all() and unscored["raw"].eq("").all()
        # unanswered requests were not cached: the rerun submits exactly those (and the failed batch again)
        run_study(typed(cfg), None, tmp_path / "b", run_id="b")
        m2 = _manifest(tmp_path / "b")
        assert m2["calls_cached"] == 11 and m2["batch"]["requests"] == 11 + 11
        assert m2["batch"]["statuses"] == {"failed": 1, "completed": 1} and m2["unscored_calls"] == 0


@pytest.mark.slow  # the CLI end to end, in its own process (forked: what is killed is the command, not its imports)
def test_kill_during_polling_then_rerun_resubmits_nothing(tmp_path: Path) -> None:
    server = BatchServer(polls=10_000)  # stays in_progress until the test lets it finish
    with server.running():
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update({"PYTHONPATH": str(ROOT)})
        args = [
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "limit=1",
            "n_samples=2",
            "batch=true",
            "batch_settings.poll_s=0.05",
            f"cache_dir={tmp_path / 'cache'}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        err = tmp_path / "run.err"  # a file: nothing blocks on an unread pipe
        with err.open("w") as err_file:
            proc = popen(
                [sys.executable, "-m", "experiments.run", *args],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err_file.fileno(),
            )
        try:
            deadline = time.monotonic() + 120
            while server.retrievals < 3 and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert server.retrievals >= 3, err.read_text() if proc.poll() is not None else "no polling"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert server.created == 1 and server.uploads == 1
        journal = [json.loads(p.read_text()) for p in (tmp_path / "cache" / "batches").glob("*.json")]
        assert [e["batch_id"] for e in journal] == ["batch_1"] and not journal[0]["finished"]
        server.polls = 0  # the provider finishes the batch
        cfg = compose(
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "limit=1",
            "n_samples=2",
            "batch=true",
            "batch_settings.poll_s=0.02",
            "progress=false",
            f"cache_dir={tmp_path / 'cache'}",
        )
        frame = run_study(typed(cfg), None, tmp_path / "rerun", run_id="rerun")
        assert server.created == 1 and server.uploads == 1 and server.chat_requests == 0  # 0 resubmissions
        m = _manifest(tmp_path / "rerun")
        assert m["batch"]["resumed"] == 1 and m["batch"]["batches"] == 0 and frame["parse_ok"].all()
        assert m["calls_made"] == 22


def test_created_but_unrecorded_batch_is_found_not_recreated(tmp_path: Path) -> None:
    server = BatchServer(polls=0)
    with server.running():
        client = BatchClient("openai/judge", server.api_base, "no-key", lambda params, _: dict(params))
        request = BatchRequest(
            "k" * 64,
            [
                {
                    "role": "user",
                    "content": 'Rate.\nAnswer with only this JSON object\n{"score": <integer 1-5>}',
                }
            ],
            {"seed": 0},
        )
        journal = BatchJournal(tmp_path / "cache")
        entry = journal.new("openai/judge", server.api_base, [request.key], 1)
        entry.input_file_id = client.upload([client.line(request)])
        journal.save(entry)
        client.create(entry.input_file_id)  # killed right after this call returned: the id was never recorded
        cache = CallCache(tmp_path / "cache")
        runner = BatchRunner(
            client, cache, journal, Prices(), model="openai/judge", api_base=server.api_base, poll_s=0.01
        )
        results = runner.run([request])
        assert server.created == 1 and results[request.key].completion is not None
        assert cache.get(request.key) == results[request.key].completion
        assert (
            runner.stats.resumed == 1
            and not runner.stats.cost_known
            and results[request.key].completion.cost_usd is None
        )
        cache.close()


def test_unsupported_provider_is_one_line() -> None:
    with pytest.raises(BatchError, match="litellm cannot create anthropic batches .* run it live"):
        BatchClient("anthropic/claude-sonnet-4-5", None, None, lambda params, _: dict(params))


def test_budget_caps_a_batch_run_and_the_rerun_finishes_it(tmp_path: Path) -> None:
    from experiments.inputs import BudgetStop

    server = BatchServer(polls=0)
    with server.running():
        cfg = _cfg(
            server,
            tmp_path,
            "max_tokens=40",
            "judge.input_cost_per_token_batches=5e-6",
            "judge.output_cost_per_token_batches=5e-6",
        )
        with pytest.raises(BudgetStop):
            run_study(typed({**cfg, "budget_usd": 0.03}), None, tmp_path / "a", run_id="a")
        m = _manifest(tmp_path / "a")
        submitted = m["batch"]["requests"]
        assert m["stopped"] == "budget" and 0 < submitted < 22 and m["calls_not_started"] == 22 - submitted
        assert 0 < m["spend_usd"] == pytest.approx(submitted * 19 * 5e-6)  # usage at batch prices
        assert len(server.batches) == 1 and m["calls_made"] == submitted
        run_study(typed({**cfg, "budget_usd": 5.0}), None, tmp_path / "b", run_id="b")
        m2 = _manifest(tmp_path / "b")
        assert (
            m2["stopped"] is None
            and m2["calls_cached"] == submitted
            and m2["batch"]["requests"] == 22 - submitted
        )


def test_azure_batch_on_azures_paths_equals_live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `azure/` judge: litellm uploads and creates on Azure OpenAI's paths (/openai/files, /openai/batches,
    with api-version and the api-key header), the lines and the batch name Azure's endpoint, and the table is
    the live table."""
    monkeypatch.setenv("JUDGESCOPE_TEST_AZURE_KEY", "azure-test-key-123456")
    server = BatchServer(polls=1)
    with server.running():
        cfg = _cfg(
            server,
            tmp_path,
            "judge.model=azure/judge-deployment",
            f"judge.api_base={server.root}",
            "judge.api_key_env=JUDGESCOPE_TEST_AZURE_KEY",
        )
        batch = run_study(typed(cfg), None, tmp_path / "batch", run_id="b")
        assert server.created == 1 and server.uploads == 1 and server.chat_requests == 0
        assert server.azure_requests >= 4  # upload, create, retrieve(s), output content: all on Azure's paths
        (created,) = server.batches.values()
        assert created["endpoint"] == "/chat/completions" and created["status"] == "completed"
        lines = [json.loads(x) for x in server.files[created["input_file_id"]].decode().splitlines()]
        assert len(lines) == 22 and {x["url"] for x in lines} == {"/chat/completions"}
        assert {x["body"]["model"] for x in lines} == {"judge-deployment"}  # the deployment, as Azure wants
        assert _manifest(tmp_path / "batch")["batch"]["statuses"] == {"completed": 1}
        live = run_study(
            typed(_cfg(server, tmp_path, "batch=false")), None, tmp_path / "live", run_id="l"
        )  # another model
        assert server.chat_requests == 22
    pd.testing.assert_frame_equal(batch[SAME], live[SAME])
