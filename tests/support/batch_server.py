"""A local OpenAI-compatible batch API for tests (aiohttp on 127.0.0.1, a free port, in a background thread).

It serves what litellm's `create_file` / `create_batch` / `retrieve_batch` / `file_content` / `list_batches`
call: `POST /v1/files` (multipart upload), `GET /v1/files/{id}` and `/content`, `POST /v1/batches`,
`GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`, plus `POST /v1/chat/completions` for the live path.
The same API is served under Azure OpenAI's paths (`/openai/files`, `/openai/batches`, ...), which, as Azure
does, need an `api-version` query parameter and an `api-key` header. A batch moves validating -> in_progress ->
(after `polls` more retrievals) its outcome: `completed`, `failed` (no output at all; also any batch with a
line whose `url` is not the batch's endpoint, which the providers reject) or `expired` (only the first half
of its requests answered, the rest in the error file as `batch_expired`). Requests for which `fail(body)` is true land in the error file of a completed batch.
Hostile outputs (issue 25): `echo_auth` makes every error quote the Authorization header the batch was created
with (as a provider's "Incorrect API key provided: ..." does); `fail_status` sends failed requests as non-200
lines of the output file instead; `mangle(lines)` rewrites the output file's lines (a str is written as is:
repeated or unknown custom_ids, malformed bodies, lines that are not JSON).
Answers are `rubric_answer(body)`, exactly what the live test servers answer, so batch and live tables agree.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.support.openai_server import completion_body, rubric_answer


@dataclass
class BatchServer:
    """Counts uploads, batch creations and chat requests; `outcomes` are used in order, then "completed"."""

    polls: int = 2
    outcomes: list[str] = field(default_factory=list)
    fail: Callable[[dict[str, Any]], bool] = lambda body: False
    # OpenAI `logprobs.content` for an answer's text, sent (live and in batch output) when a request asks
    logprobs: Callable[[str], list[dict[str, Any]]] | None = None
    echo_auth: bool = False
    fail_status: int = 0  # 0: failed requests in the error file; else non-200 output lines of this status
    mangle: Callable[[list[Any]], list[Any]] | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: int = 0
    uploads: int = 0
    chat_requests: int = 0
    retrievals: int = 0
    azure_requests: int = 0  # requests on Azure's paths, each with its api-version and api-key
    # the providers' caps: an input file over `max_file_bytes` is refused at upload (HTTP 413, OpenAI's error
    # body); a batch whose tokens (prompt + max_tokens per line) would take the batches in progress past
    # `max_enqueued_tokens` fails on validation with OpenAI's `token_limit_exceeded`
    max_file_bytes: int | None = None
    max_enqueued_tokens: int | None = None
    refused_uploads: int = 0
    token_refusals: int = 0
    peak_enqueued: int = 0
    api_base: str = ""
    root: str = ""  # http://127.0.0.1:<port>: Azure's api_base (litellm adds /openai/...)
    port: int = 0  # 0: any free port; a fixed one lets a later run answer to cache keys made with it
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def _file(self, content: bytes, purpose: str) -> dict[str, Any]:
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = content
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": f"{file_id}.jsonl",
            "purpose": purpose,
            "status": "processed",
        }

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The chat-completion body for one request, the same live and in a batch's output file."""
        text = rubric_answer(request)
        wanted = self.logprobs is not None and request.get("logprobs")
        return completion_body(
            text,
            model=request.get("model", "test-model"),
            logprobs=self.logprobs(text) if wanted and self.logprobs else None,
        )

    def _finish(self, batch: dict[str, Any]) -> None:
        outcome = self.outcomes.pop(0) if self.outcomes else "completed"
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].decode().splitlines() if x.strip()]
        if any(line.get("url") != batch["endpoint"] for line in lines):
            outcome = "failed"
        out: list[Any] = []
        err: list[Any] = []
        quoted = f" (Authorization: {batch.get('_auth', '')})" if self.echo_auth else ""
        answered = (
            lines if outcome == "completed" else lines[: len(lines) // 2] if outcome == "expired" else []
        )
        for i, line in enumerate(lines):
            rid = f"batch_req_{batch['id']}_{i}"
            if line in answered and not self.fail(line["body"]):
                body = self.answer(line["body"])
                out.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "error": None,
                        "response": {"status_code": 200, "request_id": rid, "body": body},
                    }
                )
            elif line in answered and self.fail_status:
                error = {"error": {"code": "invalid_api_key", "message": f"scripted rejection{quoted}"}}
                response = {"status_code": self.fail_status, "request_id": rid, "body": error}
                out.append({"id": rid, "custom_id": line["custom_id"], "error": None, "response": response})
            elif outcome != "failed":
                code = "batch_expired" if line not in answered else "server_error"
                err.append(
                    {
                        "id": rid,
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": f"scripted {code}{quoted}"},
                    }
                )
        if self.mangle is not None and out:
            out = self.mangle(out)
        now = int(time.time())
        batch.update(
            status=outcome,
            completed_at=now if outcome == "completed" else None,
            expired_at=now if outcome == "expired" else None,
            failed_at=now if outcome == "failed" else None,
            request_counts={"total": len(lines), "completed": len(out), "failed": len(err)},
        )
        if outcome == "failed":
            batch["errors"] = {
                "object": "list",
                "data": [{"code": "invalid_request", "message": "scripted failure"}],
            }
        for kind, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
                batch[kind] = self._file(text.encode(), "batch_output")["id"]

    def _tokens(self, batch: dict[str, Any]) -> int:
        """The batch's enqueued tokens as OpenAI counts them: each line's prompt + its max_tokens."""
        from judge.spend.pricing import prompt_tokens

        total = 0
        for raw in self.files[batch["input_file_id"]].splitlines():
            if raw.strip():
                body = json.loads(raw)["body"]
                total += prompt_tokens(body["model"], body["messages"]) + int(body.get("max_tokens") or 0)
        return total

    def _model_of(self, file_id: str) -> str:
        first = next((x for x in self.files.get(file_id, b"").splitlines() if x.strip()), b"")
        return str(json.loads(first)["body"]["model"]) if first else "?"

    def _advance(self, batch: dict[str, Any]) -> None:
        if batch["status"] == "validating":
            if self.max_enqueued_tokens is not None:
                mine = batch["_tokens"] = self._tokens(batch)
                held = sum(b["_tokens"] for b in self.batches.values() if b["status"] == "in_progress")
                if held + mine > self.max_enqueued_tokens:
                    self.token_refusals += 1
                    message = (
                        f"Enqueued token limit reached for {batch['_model']} in organization org-test. "
                        f"Limit: {self.max_enqueued_tokens:,} enqueued tokens. Please try again once some "
                        "in_progress batches have been completed."
                    )
                    batch.update(
                        status="failed",
                        failed_at=int(time.time()),
                        errors={
                            "object": "list",
                            "data": [
                                {
                                    "code": "token_limit_exceeded",
                                    "message": message,
                                    "param": None,
                                    "line": None,
                                }
                            ],
                        },
                    )
                    return
                self.peak_enqueued = max(self.peak_enqueued, held + mine)
            batch.update(status="in_progress", in_progress_at=int(time.time()))
        elif batch["status"] == "in_progress":
            batch["_polls"] += 1
            done = sum(1 for _ in self.files[batch["input_file_id"]].splitlines())
            batch["request_counts"] = {"total": done, "completed": min(done, batch["_polls"]), "failed": 0}
            if batch["_polls"] >= self.polls:
                self._finish(batch)

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def app(self) -> web.Application:
        async def upload(request: web.Request) -> web.Response:
            form = await request.post()
            self.uploads += 1
            upload = form["file"]
            content = upload.file.read() if hasattr(upload, "file") else str(upload).encode()
            if self.max_file_bytes is not None and len(content) > self.max_file_bytes:
                self.refused_uploads += 1
                return web.json_response(
                    {
                        "error": {
                            "message": f"File is too large: {len(content):,} bytes; the maximum is {self.max_file_bytes:,}.",
                            "type": "invalid_request_error",
                            "param": "file",
                            "code": "file_too_large",
                        }
                    },
                    status=413,
                )
            return web.json_response(self._file(content, str(form.get("purpose", "batch"))))

        async def file_meta(request: web.Request) -> web.Response:
            file_id = request.match_info["fid"]
            if file_id not in self.files:
                return web.json_response({"error": {"message": "no such file"}}, status=404)
            return web.json_response(
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(self.files[file_id]),
                    "created_at": 0,
                    "filename": file_id,
                    "purpose": "batch",
                }
            )

        async def file_content(request: web.Request) -> web.Response:
            return web.Response(body=self.files[request.match_info["fid"]], content_type="application/jsonl")

        async def create(request: web.Request) -> web.Response:
            data = await request.json()
            self.created += 1
            batch_id = f"batch_{self.created}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": data["endpoint"],
                "errors": None,
                "input_file_id": data["input_file_id"],
                "completion_window": data["completion_window"],
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "metadata": data.get("metadata"),
                "_polls": 0,
                "_tokens": 0,
                "_model": self._model_of(data["input_file_id"]),
                "_auth": request.headers.get("Authorization", ""),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
            }
            return web.json_response(self._public(self.batches[batch_id]))

        async def retrieve(request: web.Request) -> web.Response:
            batch = self.batches[request.match_info["bid"]]
            self.retrievals += 1
            self._advance(batch)
            return web.json_response(self._public(batch))

        async def listing(_: web.Request) -> web.Response:
            data = [self._public(b) for b in reversed(self.batches.values())]
            return web.json_response(
                {
                    "object": "list",
                    "data": data,
                    "has_more": False,
                    "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None,
                }
            )

        async def cancel(request: web.Request) -> web.Response:
            batch = self.batches[request.match_info["bid"]]
            batch["status"] = "cancelled"
            return web.json_response(self._public(batch))

        async def chat(request: web.Request) -> web.Response:
            body = await request.json()
            self.chat_requests += 1
            return web.json_response(self.answer(body))

        @web.middleware
        async def azure(request: web.Request, handler: Any) -> web.StreamResponse:
            if request.path.startswith("/openai/"):
                if "api-version" not in request.query or not request.headers.get("api-key"):
                    return web.json_response(
                        {"error": {"code": "404", "message": "Resource not found"}}, status=404
                    )
                self.azure_requests += 1
            return await handler(request)

        app = web.Application(client_max_size=1 << 28, middlewares=[azure])
        for root in ("/v1", "/openai"):
            app.router.add_post(f"{root}/files", upload)
            app.router.add_get(f"{root}/files/{{fid}}", file_meta)
            app.router.add_get(f"{root}/files/{{fid}}/content", file_content)
            app.router.add_post(f"{root}/batches", create)
            app.router.add_get(f"{root}/batches", listing)
            app.router.add_get(f"{root}/batches/{{bid}}", retrieve)
            app.router.add_post(f"{root}/batches/{{bid}}/cancel", cancel)
        app.router.add_post("/v1/chat/completions", chat)
        return app

    @contextmanager
    def running(self) -> Iterator[BatchServer]:
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(self.app(), access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        loop.run_until_complete(site.start())
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.root = f"http://127.0.0.1:{port}"
        self.api_base = f"{self.root}/v1"
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.run_until_complete(runner.cleanup())
            loop.close()
