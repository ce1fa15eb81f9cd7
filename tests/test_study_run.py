"""Issue 11 (hardening): each case a new user or an attacker found, through litellm's real HTTP path to a
local server. Most run the study in this process (a config composed by Hydra as the runner composes it);
what only the command line shows (exit codes, Hydra's own files and lines) runs the real runner."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments import outputs
from experiments.inputs import StudyError, load_study_inputs
from experiments.outputs import CLAIM, claim_folder
from experiments.study import AllCallsFailed, run_study
from judge.cache.store import CacheError, CallCache
from judge.secrets import REDACTED
from judge.types import Completion
from tests.support.configs import KEY, study_cfg
from tests.support.fault_server import FaultServer
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import typed


@pytest.fixture()
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with srv.running():
        yield srv


def study(
    tmp: Path, api_base: str, name: str, *overrides: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """Run one study into tmp/name; its manifest."""
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    run_study(typed(study_cfg(tmp, api_base, *overrides)), None, tmp / name, run_id=name)
    return json.loads((tmp / name / "manifest.json").read_text())


def test_a_changed_extra_parameter_is_a_cache_miss(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study(tmp_path, server.api_base, "a", "+judge.extra.top_p=1.0", monkeypatch=monkeypatch)
    made = len(server.requests)
    assert made == 11 and {r["top_p"] for r in server.requests} == {1.0}
    manifest = study(tmp_path, server.api_base, "b", "+judge.extra.top_p=0.5", monkeypatch=monkeypatch)
    assert len(server.requests) == 2 * made and {r["top_p"] for r in server.requests[made:]} == {0.5}
    assert manifest["calls_made"] == made and manifest["calls_cached"] == 0
    manifest = study(tmp_path, server.api_base, "c", "+judge.extra.top_p=0.5", monkeypatch=monkeypatch)
    assert len(server.requests) == 2 * made and manifest["calls_cached"] == made  # unchanged: cached


# --- counts: the manifest says what the provider saw ---------------------------------------------------------


def twins_dataset(tmp: Path) -> Path:
    """One instance whose two generated candidates have the same text: identical requests in one run."""
    record = {
        "instance_id": "twins",
        "background": [{"title": "A paper", "text": "It studies retrieval gates."}],
        "reference": {"candidate_id": "twins:ref", "text": "Does gating retrieval hurt rare entities?"},
        "candidates": [
            {
                "candidate_id": f"twins:gen:{i}",
                "source": "gen",
                "text": "Can a gate learn when retrieval misleads?",
            }
            for i in (1, 2)
        ],
    }
    path = tmp / "twins.jsonl"
    path.write_text(json.dumps(record) + "\n")
    return path


def seen(manifest: dict[str, Any]) -> int:
    """Requests the provider saw, by the manifest."""
    return manifest["calls_made"] + manifest["provider_errors"] + manifest["retries"]


FAST_RETRY = ("retry.max_attempts=2", "retry.initial_wait_s=0.01", "retry.max_wait_s=0.02")


def test_failing_twins_are_counted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = ScriptedServer(lambda body: Step(503))
    with srv.running():
        with pytest.raises(
            AllCallsFailed, match=r"every call failed at the provider \(2 calls; first error: "
        ):
            study(
                tmp_path,
                srv.api_base,
                "run",
                f"dataset.path={twins_dataset(tmp_path)}",
                *FAST_RETRY,
                monkeypatch=monkeypatch,
            )
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert len(srv.requests) == 4 == seen(manifest)  # 2 distinct requests x 2 attempts
    assert (manifest["provider_errors"], manifest["retries"], manifest["calls_shared"]) == (2, 2, 1)
    assert manifest["calls_total"] == 3 and manifest["unscored_calls"] == 3


def test_a_twin_of_an_answer_is_shared_not_cached(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = study(
        tmp_path, server.api_base, "run", f"dataset.path={twins_dataset(tmp_path)}", monkeypatch=monkeypatch
    )
    assert len(server.requests) == 2 == seen(manifest)
    assert (manifest["calls_made"], manifest["calls_cached"], manifest["calls_shared"]) == (2, 0, 1)
    rows = pd.read_parquet(tmp_path / "run" / "results.parquet")
    assert not rows["cached"].any() and rows["parse_ok"].all()


# --- malformed answers -----------------------------------------------------------------------------------------

EMPTY = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [],
    "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
}


def test_empty_choices_are_retried_then_unscored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def empty_then_answer(body: dict[str, Any]) -> Step:  # each call: first an empty 200, then an answer
        return Step(200, body=EMPTY) if len(srv.requests) % 2 else Step(200, rubric_answer(body))

    srv = ScriptedServer(empty_then_answer)
    with srv.running():
        manifest = study(
            tmp_path, srv.api_base, "ok", *FAST_RETRY, "mode=comparative_all", monkeypatch=monkeypatch
        )
        assert (
            len(srv.requests) == 2 == seen(manifest)
            and manifest["retries"] == 1
            and manifest["parse_rate"] == 1
        )
        srv.next_step = lambda body: Step(200, body=EMPTY)
        with pytest.raises(AllCallsFailed):
            study(
                tmp_path,
                srv.api_base,
                "empty",
                *FAST_RETRY,
                "mode=comparative_all",
                "seed=7",
                monkeypatch=monkeypatch,
            )
    rows = pd.read_parquet(tmp_path / "empty" / "results.parquet")
    assert not rows["parse_ok"].any() and rows["error"].str.contains("200 with no choices").all()


def test_a_lone_surrogate_is_cached_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    srv = ScriptedServer(lambda body: Step(200, '{"originality": 2, "note": "\ud800"}'))
    with srv.running():
        study(tmp_path, srv.api_base, "a", monkeypatch=monkeypatch)
        made = len(srv.requests)
        study(tmp_path, srv.api_base, "b", monkeypatch=monkeypatch)
        assert len(srv.requests) == made == 11  # every answer came from the cache the second time
    rows = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert rows["raw"].str.contains("\ufffd").all() and rows["cached"].all()
    assert "\ufffd" in (tmp_path / "b" / "results.csv").read_text(encoding="utf-8")


def test_the_cache_stores_a_lone_surrogate(tmp_path: Path) -> None:
    cache = CallCache(tmp_path)
    completion = Completion("a\ud800b", "stop", 1, 2, None, 0.1)
    cache.set("k", completion)
    assert cache.get("k") == completion


# --- lost results ---------------------------------------------------------------------------------------------


def test_an_unwritable_output_folder_stops_before_any_call(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(StudyError, match="afile/run: cannot create the output folder"):
        study(tmp_path, server.api_base, "afile/run", monkeypatch=monkeypatch)
    assert server.requests == []


def test_a_failed_write_leaves_nothing_and_keeps_the_answers(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "full"
    out.mkdir()
    (out / ".results.csv.tmp").symlink_to("/dev/full")  # writing results.csv meets a full disk (ENOSPC)
    with pytest.raises(StudyError) as info:
        study(tmp_path, server.api_base, "full", monkeypatch=monkeypatch)
    message = str(info.value)
    assert "could not write results.csv (No space left on device); nothing of this run was written" in message
    assert "\n" not in message and not out.exists()
    made = len(server.requests)
    manifest = study(tmp_path, server.api_base, "again", monkeypatch=monkeypatch)
    assert len(server.requests) == made and manifest["calls_cached"] == made  # nothing paid twice


def test_runs_in_the_same_folder_never_share_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "12-00-00_qwen_independent_novelty"
    child = multiprocessing.get_context("fork").Process(target=claim_folder, args=(folder,))
    child.start()
    child.join()
    assert child.exitcode == 0 and (folder / CLAIM).exists()  # another process's run holds it
    assert claim_folder(folder) == folder.with_name(folder.name + "-2")
    assert claim_folder(folder) == folder.with_name(folder.name + "-2")  # this process's own claim
    with pytest.raises(StudyError, match="another run's output folder"):
        study(tmp_path, "http://127.0.0.1:9/v1", folder.name, monkeypatch=monkeypatch)


def test_a_folder_the_runner_claimed_is_not_claimed_again(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """experiments.run claims Hydra's folder (or a free sibling) and hands it over: run_study claims it no
    second time (issue 23, item 2), and still writes the run into it."""
    folder = claim_folder(tmp_path / "run")
    tries: list[Path] = []
    real = outputs._try_claim
    monkeypatch.setattr(outputs, "_try_claim", lambda f: tries.append(f) or real(f))
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    run_study(typed(study_cfg(tmp_path, server.api_base)), None, folder, run_id="run", claimed=True)
    assert tries == [] and (folder / "manifest.json").exists()
    study(tmp_path, server.api_base, "own", monkeypatch=monkeypatch)  # a library caller: run_study claims it
    assert tries == [tmp_path / "own"]


def test_a_surrogate_in_a_dataset_names_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QWEN_API_KEY", KEY)
    good = twins_dataset(tmp_path).read_text()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + good.replace("It studies", "It \\udc80 studies").replace("twins", "t2"))
    with pytest.raises(StudyError, match=rf"^{bad}:2: background\[0\]\.text: holds a lone surrogate escape"):
        load_study_inputs(typed(study_cfg(tmp_path, "http://127.0.0.1:9/v1", f"dataset.path={bad}")))


# --- leaked keys ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["LLM_AUTH", "JUDGE_CREDS_VAR"])
def test_a_key_echoed_by_the_provider_is_redacted_by_value(
    variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The key variable may have any name: `remember_secrets` learns its value from `api_key_env`."""
    secret = f"tok-{variable.lower()}-0123456789abcdef"
    monkeypatch.setenv(variable, secret)
    srv = FaultServer(faults={}, answers={}, dead_rate=1.0, echo_key=True)  # every call: 503 quoting the key
    with srv.running():
        with pytest.raises(AllCallsFailed) as info:
            study(
                tmp_path,
                srv.api_base,
                "run",
                f"judge.api_key_env={variable}",
                *FAST_RETRY,
                monkeypatch=monkeypatch,
            )
    assert srv.authorizations == {f"Bearer {secret}"}  # the key was sent, and echoed in every error body
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert REDACTED in manifest["first_provider_errors"][0]
    assert (
        pd.read_parquet(tmp_path / "run" / "results.parquet")["error"]
        .str.contains(REDACTED, regex=False)
        .all()
    )
    out, err = capfd.readouterr()
    assert secret not in str(info.value) + out + err
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path


# --- nonsense sizes -------------------------------------------------------------------------------------------


def test_a_study_with_nothing_to_judge_is_an_error(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = json.loads(twins_dataset(tmp_path).read_text())
    del record["reference"]
    data = tmp_path / "noref.jsonl"
    data.write_text(json.dumps(record) + "\n")
    with pytest.raises(
        StudyError, match=r"^mode=pairwise: nothing to judge: 1 instance\(s\) of .* give 0 prompts"
    ):
        study(
            tmp_path, server.api_base, "run", "mode=pairwise", f"dataset.path={data}", monkeypatch=monkeypatch
        )
    assert server.requests == [] and not (tmp_path / "run").exists()


def test_a_full_cache_disk_is_one_line_and_leaves_no_folder(
    server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake fault (sqlite's own words for a full disk, raised where the cache writes): one line, no folder."""

    def full(self: CallCache, key: str, completion: Completion) -> None:
        raise CacheError(
            f"{self.directory}: cannot write the call cache (database or disk is full); free disk "
            "space, or move the folder aside if it is damaged"
        )

    monkeypatch.setattr(CallCache, "set", full)
    with pytest.raises(
        StudyError, match="cannot write the call cache \\(database or disk is full\\)"
    ) as info:
        study(tmp_path, server.api_base, "run", monkeypatch=monkeypatch)
    assert "\n" not in str(info.value) and not (tmp_path / "run").exists()
    assert 1 <= len(server.requests) <= 8  # the calls in flight when the first write failed, no more
