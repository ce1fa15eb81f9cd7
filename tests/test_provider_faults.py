"""A hostile provider (issue 11): a local OpenAI-compatible server that answers each request with a random
draw of bad answers - huge and odd numbers, lone surrogates, empty choices, wrong types, duplicate and
missing labels, truncation, error bodies and answers that echo the key, 429/5xx/drops - and the invariants
that must hold whatever it does:
- no traceback (the run ends normally, or with one StudyError line);
- every row is scored with a valid value, or unscored with its raw text (or the provider's error);
- the manifest's counts equal what the server saw;
- no secret in any file or output;
- a rerun makes no call already paid for.
Derandomized, small."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.inputs import StudyError
from experiments.study import run_study
from tests.support.configs import KEY, study_cfg
from tests.support.fault_server import ANSWERS, HOSTILE, FaultServer
from tests.support.studies import typed

FEW = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TRANSIENT = ("429_retry_after", "429", "500", "503", "drop", "not_json", "empty_choices")
DRAWN = (*HOSTILE, "off_rubric", "truncated")
RANGES = {"originality": (0, 3), "gap_addressing": (0, 3), "non_obviousness": (0, 3)}


def rates(kinds: tuple[str, ...], total: float) -> st.SearchStrategy[dict[str, float]]:
    """Rates for a random subset of `kinds`, summing to at most `total`."""
    return st.lists(st.sampled_from(kinds), min_size=1, max_size=len(kinds), unique=True).map(
        lambda chosen: {k: total / len(chosen) for k in chosen}
    )


@functools.cache
def composed(mode: str) -> dict[str, Any]:
    """The study's config in `mode`, composed once: a Hydra composition takes ~0.3 CPU-s, and the 12 runs differ
    only in the server's address and the cache folder (set by `run_once`; no setting interpolates them)."""
    return study_cfg(
        Path("/unused"),
        "http://unused",
        f"mode={mode}",
        "n_samples=2",
        "retry.max_attempts=4",
        "retry.initial_wait_s=0.001",
        "retry.max_wait_s=0.01",
        "judge.timeout_s=5",
    )


def run_once(
    tmp: Path,
    name: str,
    srv: FaultServer,
    mode: str,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[dict[str, Any] | None, str]:
    """One study against the hostile server: (its manifest, or None when it stopped with one line; output)."""
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    cfg = copy.deepcopy(composed(mode))
    cfg["judge"]["api_base"], cfg["cache_dir"] = srv.api_base, str(tmp / "cache")
    requests_before = srv.requests
    try:
        run_study(typed(cfg), None, tmp / name, run_id=name)
    except StudyError as exc:  # every call failed: still one line, and the rows are written
        assert "\n" not in str(exc)
    out, err = capfd.readouterr()
    manifest_path = tmp / name / "manifest.json"
    if not manifest_path.exists():
        return None, out + err
    manifest = json.loads(manifest_path.read_text())
    seen = manifest["calls_made"] + manifest["provider_errors"] + manifest["retries"]
    assert seen == srv.requests - requests_before, (manifest, srv.counts())
    return manifest, out + err


def check_rows(table: pd.DataFrame) -> None:
    """Scored with a valid value, or unscored with its raw text (or the provider's error)."""
    for row in table.itertuples():
        if row.parse_ok:
            low, high = RANGES[row.dimension]
            assert low <= row.score <= high and float(row.score).is_integer(), row
        else:
            assert pd.isna(row.score) and (row.raw or row.error), row


@FEW
@given(
    seed=st.integers(0, 2**16),
    mode=st.sampled_from(["independent", "comparative"]),
    faults=rates(TRANSIENT, 0.35),
    answers=rates(DRAWN, 0.6),
)
def test_a_hostile_provider_breaks_no_invariant(
    seed: int,
    mode: str,
    faults: dict[str, float],
    answers: dict[str, float],
    tmp_path_factory: pytest.TempPathFactory,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tmp = tmp_path_factory.mktemp("hostile")
    srv = FaultServer(seed=seed, faults=faults, answers=answers, echo_key=True, max_faults=2, dead_rate=0.1)
    with srv.running():
        first, out1 = run_once(tmp, "first", srv, mode, capfd, monkeypatch)
        n_first = srv.requests
        second, out2 = run_once(tmp, "second", srv, mode, capfd, monkeypatch)
    assert first is not None and second is not None
    check_rows(pd.read_parquet(tmp / "first" / "results.parquet"))
    check_rows(pd.read_parquet(tmp / "second" / "results.parquet"))
    # paid for: a 200 with a completion (litellm rejects a non-string content as a malformed body: transient)
    paid = {s.call for s in srv.log[:n_first] if s.fault in (*ANSWERS, *HOSTILE) and s.fault != "wrong_type"}
    assert not paid & {s.call for s in srv.log[n_first:]}  # the rerun asks only for what failed
    assert second["calls_made"] + second["provider_errors"] <= first["provider_errors"]
    for text in (out1, out2):
        assert "Traceback" not in text and KEY not in text
    for path in tmp.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path
