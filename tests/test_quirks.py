"""Offline request shapes, one test per shipped judge config: the body litellm would send (its own parameter
mapping and provider transformation, nothing sent), and what the manifest and the temperature column record."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.judges import make_completer, sent_request
from experiments.study import run_study
from judge.quirks import build_request, request_shape
from judge.rubric import rubric_from_config
from tests.support.configs import compose
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.studies import typed

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted(p.stem for p in (ROOT / "conf" / "judge").glob("*.yaml"))


def _openai(body: dict[str, Any]) -> None:
    assert body["temperature"] == 0.1 and body["seed"] == 0 and body["max_tokens"] == 160


def _openai_schema(body: dict[str, Any]) -> None:
    _openai(body)
    assert body["response_format"]["type"] == "json_schema"


def _gpt5(body: dict[str, Any]) -> None:  # reasoning model: no temperature, max_completion_tokens
    assert "temperature" not in body and body["max_completion_tokens"] == 160 and "max_tokens" not in body
    assert body["seed"] == 0 and body["response_format"]["type"] == "json_schema"


def _claude(body: dict[str, Any]) -> None:  # Anthropic: no seed; the system prompt moves out of messages
    assert body["temperature"] == 0.1 and body["max_tokens"] == 160 and "seed" not in body
    assert "system" in body and all(m["role"] != "system" for m in body["messages"])


def _gemini(body: dict[str, Any]) -> None:
    gen = body["generationConfig"]
    assert gen["temperature"] == 0.1 and gen["seed"] == 0 and gen["max_output_tokens"] == 160
    assert gen["response_mime_type"] == "application/json" and "response_json_schema" in gen


def _ollama(body: dict[str, Any]) -> None:
    assert (
        body["options"] == {"temperature": 0.1, "num_predict": 160, "seed": 0}
        and body["format"]["type"] == "object"
    )


# judge config -> (what its body must show, params litellm drops or flags, the temperature actually used)
EXPECT: dict[str, tuple[Callable[[dict[str, Any]], None] | None, set[str], float | None]] = {
    "claude-sonnet": (_claude, {"seed"}, 0.1),
    "deepseek-chat": (_openai, set(), 0.1),
    "gemini-2.5-flash": (_gemini, set(), 0.1),
    "gemini-2.5-pro": (_gemini, set(), 0.1),
    "gpt-4o": (_openai_schema, set(), 0.1),
    "gpt-5": (_gpt5, {"temperature"}, 1.0),
    "local": (None, set(), 0.1),  # the embedded model: a litellm custom provider, parameters taken as asked
    "local_nojson": (None, set(), 0.1),
    "ollama": (_ollama, {"response_format"}, 0.1),  # litellm lists no JSON-schema support: flagged
    "qwen": (_openai_schema, {"response_format"}, 0.1),
}


def test_every_shipped_judge_has_a_request_shape_test() -> None:
    assert sorted(EXPECT) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_request_shape_of_shipped_judge(name: str) -> None:
    cfg = compose(f"judge={name}")
    rubric = rubric_from_config(cfg["rubric"])
    check, changed, temperature = EXPECT[name]
    study = typed(cfg)
    shape = sent_request(study, rubric, make_completer(study.judge))
    assert {c["param"] for c in shape.changes} == changed
    assert shape.temperature == temperature
    if check is not None:
        asked = {"temperature": 0.1, "max_tokens": 160, "seed": 0, **cfg["judge"]["extra"]}
        if cfg["judge"]["structured_output"]:
            from judge.rubric import response_format

            asked["response_format"] = response_format(rubric, None)
        messages = rubric.render(
            background=[{"title": "T", "text": "B"}], items=[{"label": "", "text": "Q?"}], comparative=False
        )
        check(build_request(cfg["judge"]["model"], cfg["judge"]["api_base"], messages, asked))


def test_dropped_temperature_is_recorded_truthfully(tmp_path: Path) -> None:
    """gpt-5's refusal of temperature 0.1, end to end through a local server: the column says 1.0, the manifest
    says what was asked and what was dropped, and the request the server saw has no temperature."""
    server = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with server.running():
        cfg = compose(
            "judge=gpt-5",
            f"judge.api_base={server.api_base}",
            "judge.api_key_env=null",
            "limit=1",
            "n_samples=1",
            "progress=false",
        )
        cfg["judge"]["model"] = "openai/gpt-5"
        frame = run_study(
            typed({**cfg, "cache_dir": str(tmp_path / "cache")}), None, tmp_path / "out", run_id="g5"
        )
    assert server.requests and all("temperature" not in r for r in server.requests)
    assert (frame["temperature"] == 1.0).all()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["temperature"] == 1.0 and manifest["temperature_asked"] == 0.1
    assert [c["param"] for c in manifest["request"]["changes"]] == ["temperature"]
    assert (
        "temperature" not in manifest["request"]["sent"]
        and manifest["request"]["sent"]["max_completion_tokens"] == 160
    )

    from analysis.load.provider_params import request_changes

    flagged = request_changes(tmp_path)
    assert isinstance(flagged, pd.DataFrame) and list(flagged["parameter"]) == ["temperature"]
    assert flagged["asked"].iloc[0] == "0.1" and "dropped" in flagged["note"].iloc[0]


def test_custom_provider_is_taken_as_asked() -> None:
    shape = request_shape("nosuchprovider/model", None, {"temperature": 0.3, "seed": 1})
    assert shape.temperature == 0.3 and shape.changes == [] and shape.sent == {"temperature": 0.3, "seed": 1}
