"""A fault-injecting OpenAI-compatible chat server for reliability tests (stdlib only).

It listens on 127.0.0.1 on a free port, is reached through litellm's normal `openai/` provider with
`api_base` (the real HTTP path, nothing patched), and answers each request by a seeded schedule:

| fault             | what the client sees                                   | judgescope's classification   |
|-------------------|--------------------------------------------------------|-------------------------------|
| `429_retry_after` | 429 with `Retry-After: 1`                               | transient: retried            |
| `429`             | 429 without Retry-After                                 | transient: retried            |
| `500`, `503`      | the status with an OpenAI-style error body              | transient: retried            |
| `drop`            | the connection closed without any response              | transient: retried            |
| `slow`            | no response before the client's timeout                 | transient: retried            |
| `not_json`        | 200 whose body is not JSON (an HTML page, cut-off JSON) | transient: retried            |
| `empty_choices`   | 200 with `"choices": []`                                | transient: retried            |
| `huge_int`, ...   | 200, a hostile completion (`HOSTILE`, `hostile_content`) | an answer: unscored, cached  |
| `off_rubric`      | 200, a completion whose content is not the rubric JSON  | an answer: unscored, cached   |
| `truncated`       | 200, a completion cut off (`finish_reason: length`)     | an answer: unscored, cached   |
| `ok`              | 200, a valid answer (`rubric_answer`)                   | an answer: scored, cached     |

A call is identified by its request (messages, seed, model); its `attempt` is how many times this server has
seen that request before. Transient faults are drawn per (call, attempt); whether the call finally gets an
`ok`, `off_rubric` or `truncated` answer - and its text - depends on the call only, so any run (and any
rerun after a crash) receives the same answers. `dead_rate` makes some calls fail with 503 on every attempt
(to exercise exhausted retries); `max_faults` caps the transient faults of the others. Every request is
counted and logged (`log`), the server stops by itself after `max_requests` requests or `max_seconds`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.openai_server import completion_body, rubric_answer

TRANSIENT = ("429_retry_after", "429", "500", "503", "drop", "slow", "not_json")
ANSWERS = ("ok", "off_rubric", "truncated")
# the hostile provider (issue 11), drawn only when asked for: a 200 with no choices (transient), and 200s with
# a completion no sane judge would give (see `hostile_content`)
EMPTY_CHOICES = "empty_choices"
HOSTILE = (
    "huge_int",
    "odd_number",
    "surrogate",
    "wrong_type",
    "duplicate_label",
    "missing_label",
    "echo_key",
)
DEFAULT_FAULTS = {
    "429_retry_after": 0.04,
    "429": 0.04,
    "500": 0.03,
    "503": 0.03,
    "drop": 0.03,
    "slow": 0.01,
    "not_json": 0.03,
}
DEFAULT_ANSWERS = {"off_rubric": 0.03, "truncated": 0.03}
OFF_RUBRIC = "I would rate this question as fairly original, but I cannot give numbers without more context."


@dataclass(frozen=True)
class Served:
    """One request as the server saw it: which call, which attempt, what it answered."""

    call: str
    attempt: int
    fault: str
    text: str | None = None  # the completion content, for 200 answers


@dataclass
class FaultServer:
    """Serve chat completions with seeded faults; see the module docstring."""

    seed: int = 0
    faults: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_FAULTS))
    answers: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ANSWERS))
    dead_rate: float = 0.0
    max_faults: int = 4  # transient faults per call at most (keep below the client's max_attempts - 1)
    slow_s: float = 6.0
    latency_s: float = 0.0
    # requests after the first `hold_after` wait for `release` before they are answered: a test can act (send
    # Ctrl-C) while the run is provably mid-way, on a signal from the run itself rather than on a timer
    hold_after: int | None = None
    answer: Callable[[dict[str, Any]], str] = rubric_answer
    echo_key: bool = False  # error bodies quote the Authorization header, as some providers do
    auth_fails: bool = False  # every request gets a 401 (quoting the key when echo_key)
    max_requests: int = 50_000
    max_seconds: float = 600.0
    log: list[Served] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()
        self.authorizations: set[str] = set()  # the Authorization headers received (to check a key was sent)
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"

    # --- the schedule ---------------------------------------------------------------------------------------

    def _rng(self, *parts: object) -> random.Random:
        digest = hashlib.sha256(repr((self.seed, *parts)).encode()).digest()
        return random.Random(int.from_bytes(digest[:8], "big"))

    @staticmethod
    def call_id(body: dict[str, Any]) -> str:
        blob = json.dumps([body.get("model"), body.get("messages"), body.get("seed")], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def is_dead(self, call: str) -> bool:
        return self._rng(call, "dead").random() < self.dead_rate

    def final_answer(self, call: str) -> str:
        """What the call gets once its transient faults are over: ok, off_rubric or truncated."""
        draw, edge = self._rng(call, "answer").random(), 0.0
        for kind, rate in self.answers.items():
            edge += rate
            if draw < edge:
                return kind
        return "ok"

    def fault_for(self, call: str, attempt: int) -> str:
        if self.is_dead(call):
            return "503"
        if attempt < self.max_faults:
            draw, edge = self._rng(call, attempt).random(), 0.0
            for kind, rate in self.faults.items():
                edge += rate
                if draw < edge:
                    return kind
        return self.final_answer(call)

    # --- serving --------------------------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length", 0))
        raw = h.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
            assert isinstance(body.get("messages"), list)
        except (ValueError, AssertionError):
            return self._send(h, 400, {"error": {"message": "not a chat completion request", "code": 400}})
        call = self.call_id(body)
        with self.lock:
            self.authorizations.add(h.headers.get("Authorization", ""))
            if len(self.log) >= self.max_requests:
                fault, attempt = "503", -1
            else:
                attempt = self.seen[call]
                self.seen[call] += 1
                fault = "401" if self.auth_fails else self.fault_for(call, attempt)
        text = None
        if fault == "ok":
            text = self.answer(body)
        elif fault == "off_rubric":
            text = OFF_RUBRIC
        elif fault == "truncated":
            full = self.answer(body)
            text = full[: max(1, len(full) // 2)]
        with self.lock:
            if attempt >= 0:
                self.log.append(Served(call, attempt, fault, text))
            held = self.hold_after is not None and len(self.log) > self.hold_after
        if held:
            self.release.wait(self.max_seconds)
        if self.latency_s:
            time.sleep(self.latency_s)
        key = h.headers.get("Authorization", "")
        quoted = f" (key: {key})" if self.echo_key else ""
        if fault == "drop":
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return None
        if fault == "slow":
            time.sleep(self.slow_s)
            return self._send(h, 200, completion_body(self.answer(body)))
        if fault == EMPTY_CHOICES:
            return self._send(h, 200, {**completion_body(""), "choices": []})
        if fault in HOSTILE:
            content = hostile_content(fault, self.answer(body), self._rng(call, "hostile"), key)
            return self._send(h, 200, completion_body(content))  # type: ignore[arg-type]
        if fault == "not_json":
            data = (
                b"<html><body>502 upstream hiccup</body></html>"
                if attempt % 2
                else b'{"id": "chatcmpl-x", "choi'
            )
            return self._send_raw(h, 200, data)
        if fault in ("429", "429_retry_after"):
            headers = {"Retry-After": "1"} if fault == "429_retry_after" else {}
            return self._send(
                h,
                429,
                {
                    "error": {
                        "message": f"Rate limit reached{quoted}",
                        "type": "requests",
                        "code": "rate_limit_exceeded",
                    }
                },
                headers,
            )
        if fault in ("500", "503", "401"):
            message = {"500": "internal error", "503": "overloaded", "401": "Incorrect API key provided"}[
                fault
            ]
            return self._send(h, int(fault), {"error": {"message": message + quoted, "code": int(fault)}})
        finish = "length" if fault == "truncated" else "stop"
        return self._send(h, 200, completion_body(text or "", finish))

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send_raw(h, status, json.dumps(payload).encode(), headers)

    @staticmethod
    def _send_raw(
        h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str] | None = None
    ) -> None:
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                h.send_header(key, value)
            h.end_headers()
            h.wfile.write(data)
        except OSError:  # the client gave up (e.g. after its timeout)
            pass

    @contextmanager
    def running(self) -> Iterator[FaultServer]:
        thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        timer = threading.Timer(self.max_seconds, self.httpd.shutdown)
        timer.daemon = True
        timer.start()
        try:
            yield self
        finally:
            self.release.set()  # no handler stays parked on a hold
            timer.cancel()
            self.httpd.shutdown()
            self.httpd.server_close()

    # --- what happened --------------------------------------------------------------------------------------

    @property
    def requests(self) -> int:
        with self.lock:
            return len(self.log)

    def counts(self) -> Counter[str]:
        with self.lock:
            return Counter(s.fault for s in self.log)

    def transient_injected(self) -> int:
        counts = self.counts()
        return sum(counts[k] for k in TRANSIENT)

    def calls(self) -> set[str]:
        with self.lock:
            return {s.call for s in self.log}

    def answered(self) -> dict[str, Served]:
        """The 200 answer each call received (the last one, if it was asked twice)."""
        with self.lock:
            return {s.call: s for s in self.log if s.fault in ANSWERS or s.fault in HOSTILE}


_FIRST_INT = re.compile(r"(:\s*)(-?\d+)")
_FIRST_LABEL = re.compile(r'"(Q\d+)"\s*:\s*(\{[^{}]*\})')
ODD_NUMBERS = (
    "1e400",
    "NaN",
    "-Infinity",
    "-1",
    "2.5",
    "1_0",
    "\uff13",
    "\u0663",
    "99",
    "true",
    '"2"',
    "null",
    "0x2",
    "+1",
    "01",
)


def hostile_content(kind: str, valid: str, rng: random.Random, key: str) -> Any:
    """A hostile completion built from a valid rubric answer (`valid`); not always a string (`wrong_type`)."""
    if kind == "huge_int":
        return _FIRST_INT.sub(lambda m: m.group(1) + "1" + "0" * rng.choice([400, 5000]), valid, count=1)
    if kind == "odd_number":
        return _FIRST_INT.sub(lambda m: m.group(1) + rng.choice(ODD_NUMBERS), valid, count=1)
    if kind == "surrogate":
        return valid.replace('"', '"\ud800', 1) if rng.random() < 0.5 else valid + " \udfff"
    if kind == "wrong_type":
        return rng.choice([123, 2.5, ["originality", 2], {"originality": 2}, True])
    if kind == "duplicate_label":
        label = _FIRST_LABEL.search(valid)
        if label:  # the same label twice with different values
            other = _FIRST_INT.sub(
                lambda m: m.group(1) + str((int(m.group(2)) + 1) % 3), label.group(2), count=1
            )
            return valid[: label.end()] + f', "{label.group(1)}": {other}' + valid[label.end() :]
        return _FIRST_INT.sub(
            lambda m: f"{m.group(0)}, {valid.split(chr(34))[1]!r}: 0".replace("'", '"'), valid, count=1
        )
    if kind == "missing_label":
        label = _FIRST_LABEL.search(valid)
        if label:
            return valid[: label.start()] + valid[label.end() :].lstrip(", ")
        return re.sub(r'"\w+"\s*:\s*-?\d+\s*,?\s*', "", valid, count=1)
    if kind == "echo_key":
        return f"{valid}\n(for the record, your key is {key})"
    raise ValueError(kind)
