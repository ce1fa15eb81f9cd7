"""batch=true for providers whose batch files live in cloud storage (no local server can stand in): what
litellm 1.110 would upload for a Vertex AI judge and how it reads the predictions back, built offline with
litellm's own file transformations (nothing is sent); Bedrock refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from litellm.llms.vertex_ai.files.transformation import VertexAIFilesConfig

from experiments.batching import batch_client
from experiments.judges import make_judge
from judge.batch.provider import BatchClient, BatchError, BatchRequest, completion_of
from judge.spend.pricing import Prices
from tests.support.configs import compose
from tests.support.studies import typed

SYSTEM, ANSWER = "You grade research ideas.", '{"originality": 2}'


def _vertex_rows(client: BatchClient, requests: list[BatchRequest]) -> list[dict[str, Any]]:
    """The JSONL litellm's create_file would upload to GCS for these requests (streamed, never sent)."""
    data = "".join(client.line(r) + "\n" for r in requests).encode()
    upload = VertexAIFilesConfig().transform_create_file_request(
        client.provider_model, {"file": ("judgescope-batch.jsonl", data), "purpose": "batch"}, {}, {}
    )["streaming_media_upload"]
    return [json.loads(x) for x in b"".join(upload["body_stream"].iter_bytes()).decode().splitlines()]


def test_vertex_batch_rows_carry_the_request_and_come_back_under_their_keys(tmp_path: Path) -> None:
    cfg = compose("judge=gemini-2.5-pro", "judge.model=vertex_ai/gemini-2.5-pro", "max_tokens=160")
    study = typed({**cfg, "cache_dir": str(tmp_path / "cache")})
    judge = make_judge(study)
    client = batch_client(judge, study.judge)
    assert client.provider == "vertex_ai" and client.endpoint == "/v1/chat/completions"
    requests = [
        BatchRequest(
            f"{i:064x}",
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"Idea {i}"}],
            judge.sample({"temperature": 0.1, "max_tokens": 160, "seed": 0}, i).params,
        )
        for i in range(3)
    ]
    rows = _vertex_rows(client, requests)
    assert len(rows) == 3
    for i, row in enumerate(rows):
        sent = row["request"]
        assert sent["system_instruction"] == {"parts": [{"text": SYSTEM}]}
        assert sent["contents"] == [{"role": "user", "parts": [{"text": f"Idea {i}"}]}]
        assert sent["generationConfig"] == {"temperature": 0.1, "max_output_tokens": 160, "seed": i}
        assert sent["labels"]["litellm_custom_id"] == f"{i:064x}"[:63]  # GCP labels hold 63 characters ...

    # ... the full key rides in the encoded labels: Vertex's predictions (the request echoed, with the answer)
    # come back through litellm's file_content transformation as chat completions under their own keys
    predictions = "".join(
        json.dumps(
            {
                "request": row["request"],
                "status": "",
                "processed_time": "2026-12-01T06:00:00.000000+00:00",
                "response": {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": ANSWER}]},
                            "finishReason": "MAX_TOKENS" if i == 2 else "STOP",
                        }
                    ],
                    "usageMetadata": {
                        "promptTokenCount": 30 + i,
                        "candidatesTokenCount": 7,
                        "totalTokenCount": 37 + i,
                    },
                    "modelVersion": "gemini-2.5-pro",
                },
            }
        )
        + "\n"
        for i, row in enumerate(rows)
    )
    gcs = "https://storage.googleapis.com/storage/v1/b/bucket/o/predictions.jsonl?alt=media"
    raw = httpx.Response(200, content=predictions.encode(), request=httpx.Request("GET", gcs))
    content = VertexAIFilesConfig().transform_file_content_response(raw, None, {}).content  # type: ignore[arg-type]
    lines = [json.loads(x) for x in content.decode().splitlines()]
    assert [x["custom_id"] for x in lines] == [r.key for r in requests]
    assert all(x["response"]["status_code"] == 200 for x in lines)
    answers = [completion_of(x["response"]["body"], Prices(1e-6, 2e-6, 5e-7, 1e-6), 1.0) for x in lines]
    assert [a.text for a in answers] == [ANSWER] * 3
    assert [(a.prompt_tokens, a.completion_tokens) for a in answers] == [(30, 7), (31, 7), (32, 7)]
    assert [a.finish_reason for a in answers] == ["stop", "stop", "length"]  # a cut-off answer says so
    assert answers[0].cost_usd == pytest.approx(30 * 5e-7 + 7 * 1e-6)  # batch prices
    judge.cache.close()


def test_bedrock_batch_is_refused_in_one_line() -> None:
    with pytest.raises(
        BatchError,
        match=r"^bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0: litellm 1.110 hands "
        r"back Bedrock's output records .* run it live \(batch=false\)$",
    ):
        BatchClient("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", None, None, lambda p, _: dict(p))
