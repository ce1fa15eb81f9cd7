"""Batch files providers accept (judge.batch.provider.BatchLimits): the local batch server enforces a byte cap per
input file and an enqueued-token cap over the batches in progress, with the providers' status and error body;
a study larger than both completes with no refused upload and no refused batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.inputs import StudyError
from experiments.study import AllCallsFailed, run_study
from judge.batch.provider import MB, PROVIDER_LIMITS, BatchLimits, batch_limits
from tests.support.batch_server import BatchServer
from tests.support.configs import compose
from tests.support.studies import typed


def _cfg(server: BatchServer, tmp: Path, *more: str) -> dict[str, Any]:
    cfg = compose(
        "judge=qwen",
        f"judge.api_base={server.api_base}",
        "limit=1",
        "n_samples=2",
        "progress=false",
        "batch=true",
        "batch_settings.poll_s=0.01",
        *more,
    )
    cfg["cache_dir"] = str(tmp / "cache")
    return cfg


def test_provider_limits_and_user_overrides() -> None:
    assert PROVIDER_LIMITS["openai"] == BatchLimits(50_000, 200 * MB) == PROVIDER_LIMITS["azure"]
    assert batch_limits("openai") == BatchLimits(50_000, 200 * MB, None)
    # the user's settings tighten a provider's limit, never loosen it, and set one where none is known
    assert batch_limits("openai", 60_000, 500, 90_000) == BatchLimits(50_000, 200 * MB, 90_000)
    assert batch_limits("openai", 1_000, 0.5) == BatchLimits(1_000, 500_000, None)
    assert batch_limits("hosted_vllm", 50_000, None, None) == BatchLimits(50_000, None, None)


def test_the_server_refuses_files_and_batches_over_its_caps(tmp_path: Path) -> None:
    server = BatchServer(polls=1, max_file_bytes=20_000)
    with server.running(), pytest.raises(StudyError, match="413|too large"):
        run_study(typed(_cfg(server, tmp_path)), None, tmp_path / "refused", run_id="r")
    assert server.refused_uploads == 1
    server = BatchServer(polls=1, max_enqueued_tokens=2_000)
    with server.running(), pytest.raises(AllCallsFailed, match="token_limit_exceeded: Enqueued token limit"):
        run_study(
            typed(_cfg(server, tmp_path / "t", "batch_settings.rounds=1")),
            None,
            tmp_path / "t" / "o",
            run_id="t",
        )
    assert server.token_refusals == 1


def test_a_study_larger_than_both_caps_completes_with_nothing_refused(tmp_path: Path) -> None:
    server = BatchServer(polls=1, max_file_bytes=20_000, max_enqueued_tokens=4_000)
    with server.running():
        cfg = _cfg(
            server, tmp_path, "batch_settings.max_file_mb=0.02", "batch_settings.max_enqueued_tokens=4000"
        )
        frame = run_study(typed(cfg), None, tmp_path / "out", run_id="b")
        total = sum(len(f) for name, f in server.files.items() if name.startswith("file-"))
    assert server.refused_uploads == 0 and server.token_refusals == 0
    assert server.created >= 2 and server.peak_enqueued <= 4_000
    assert frame["parse_ok"].all() and frame["prompt_id"].nunique() == 11
    assert total > 20_000  # the study was larger than one file may be
