"""A tiny OpenAI-compatible chat server for tests, on 127.0.0.1 and a free port (stdlib only).

It answers from a script: each request gets the next step (an HTTP status with headers, or a completion
text); it counts every request, so tests can assert exactly how many calls reached the "provider".
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    """One scripted answer: `status` != 200 sends an error body; else `text` is the completion content."""

    status: int = 200
    text: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    logprobs: list[dict[str, Any]] | None = None  # OpenAI `choices[0].logprobs.content`, when scripted
    body: dict[str, Any] | None = None  # sent as is instead (a malformed 200, an error body echoing a key)


def completion_body(
    text: str,
    finish_reason: str = "stop",
    model: str = "test-model",
    logprobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
    }
    if logprobs is not None:
        body["choices"][0]["logprobs"] = {"content": logprobs}
    return body


class ScriptedServer:
    """Serves `next_step(request_json)` for each POST; `requests` holds every request body received."""

    def __init__(self, next_step: Callable[[dict[str, Any]], Step]) -> None:
        self.next_step = next_step
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(body)
                    step = server.next_step(body)
                payload = step.body or (
                    completion_body(step.text, step.finish_reason, logprobs=step.logprobs)
                    if step.status == 200
                    else {
                        "error": {"message": f"scripted {step.status}", "type": "test", "code": step.status}
                    }
                )
                data = json.dumps(payload).encode()
                self.send_response(step.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in step.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    @contextmanager
    def running(self) -> Iterator[ScriptedServer]:
        thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()


def scripted(steps: list[Step], then: Step | None = None) -> Callable[[dict[str, Any]], Step]:
    """Answer with `steps` in order, then `then` forever (or the last step)."""
    queue = list(steps)

    def next_step(_: dict[str, Any]) -> Step:
        if queue:
            return queue.pop(0)
        return then or steps[-1]

    return next_step


_PLACEHOLDER = re.compile(r"<integer (\d+)-(\d+)>")


def rubric_answer(body: dict[str, Any]) -> str:
    """A valid answer to any judgescope rubric prompt, derived from the prompt itself (deterministic).

    It fills the JSON example the prompt ends with: integers from a hash of (prompt, seed), choices likewise.
    """
    prompt = body["messages"][-1]["content"]
    example = prompt.rsplit("Answer with only this JSON object", 1)[1].split("\n", 1)[1].strip()
    digest = hashlib.sha256((prompt + str(body.get("seed"))).encode()).digest()
    counter = iter(range(10_000))

    def number(match: re.Match[str]) -> str:
        low, high = int(match.group(1)), int(match.group(2))
        return str(low + digest[next(counter) % len(digest)] % (high - low + 1))

    def choice(match: re.Match[str]) -> str:
        options = re.findall(r'"([^"]+)"', match.group(0))
        return f'"{options[digest[next(counter) % len(digest)] % len(options)]}"'

    filled = _PLACEHOLDER.sub(number, example)
    return re.sub(r'"[^"]+"(?:\|"[^"]+")+', choice, filled)


def _tokens() -> tuple[Callable[[str], list[int]], Callable[[list[int]], str]]:
    """A real BPE tokenizer (the one litellm bundles for OpenAI models): encode and decode."""
    import litellm  # noqa: PLC0415  (only the provider-like answers need it)

    return (
        lambda text: list(litellm.encode(model="gpt-4o", text=text)),
        lambda tokens: str(litellm.decode(model="gpt-4o", tokens=tokens)),
    )


def provider_answer(body: dict[str, Any]) -> Step:
    """What a chat provider sends for a judgescope prompt: the rubric's answer (`rubric_answer`) written as
    chat models write JSON - pretty-printed in a ```json fence - and cut after the request's `max_tokens`
    tokens with finish_reason "length", as every real provider does."""
    answer = "```json\n" + json.dumps(json.loads(rubric_answer(body)), indent=2) + "\n```"
    encode, decode = _tokens()
    tokens = encode(answer)
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if limit is None or len(tokens) <= int(limit):
        return Step(200, answer)
    return Step(200, decode(tokens[: int(limit)]), finish_reason="length")
