"""Submit, resume, poll and collect a run's provider batches (see `judge.batch.provider` for the contract)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from judge.batch.journal import BatchEntry, BatchJournal
from judge.batch.provider import (
    TERMINAL,
    BatchClient,
    BatchError,
    BatchLimits,
    BatchRequest,
    BatchStats,
    completion_of,
)
from judge.cache.store import CallCache
from judge.client import CallResult
from judge.completer import valid_text
from judge.secrets import endpoint, redact
from judge.spend.pricing import Prices
from judge.types import Completion

MAX_POLL_ERRORS = 5  # consecutive failed retrievals of one batch before the run stops (it resumes on rerun)

# the error of a request over a batch cap: never sent, so a rerun with the same settings cannot answer it
NOT_SUBMITTED = "batch: not submitted: "


@dataclass
class Chunk:
    """Requests for one input file, with their JSONL lines and enqueued tokens (computed once)."""

    requests: list[BatchRequest]
    lines: list[str]
    tokens: int
    round: int


class BatchRunner:
    """Every request answered from a batch (new or resumed), retried in new batches, or unscored.

    Submissions respect the provider's limits (`judge.batch.provider.BatchLimits`): a file holds at most
    `max_requests` requests and `max_file_bytes` bytes, and the batches in flight hold at most
    `max_enqueued_tokens` tokens; the next file is submitted as earlier batches end. A request that cannot
    fit in any file on its own is unscored with the limit it exceeds."""

    def __init__(
        self,
        client: BatchClient,
        cache: CallCache,
        journal: BatchJournal,
        prices: Prices,
        *,
        model: str,
        api_base: str | None,
        poll_s: float = 30.0,
        rounds: int = 3,
        max_per_batch: int = 50_000,
        limits: BatchLimits | None = None,
        count_tokens: Callable[[BatchRequest], int] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.client, self.cache, self.journal, self.prices = client, cache, journal, prices
        self.model = model
        self.api_base = endpoint(api_base)  # for the journal (no credentials); the client sends the real one
        self.poll_s, self.rounds = poll_s, max(1, rounds)
        given = limits or BatchLimits()
        cap = (
            max(1, max_per_batch)
            if given.max_requests is None
            else max(1, min(given.max_requests, max_per_batch))
        )
        self.limits = BatchLimits(cap, given.max_file_bytes, given.max_enqueued_tokens)
        self.count_tokens = count_tokens
        self.progress = progress
        self.stats = BatchStats()
        self._poll_errors: dict[str, int] = {}
        self._queue: list[Chunk] = []
        self._tokens: dict[str, int] = {}  # enqueued tokens per batch in flight (journal local id)

    def run(self, requests: Sequence[BatchRequest]) -> dict[str, CallResult]:
        """A result for every request: an answer (cached under its key) or an unscored error."""
        wanted = {r.key: r for r in requests}
        results: dict[str, CallResult] = {}
        active = [
            e for e in self.journal.unfinished(self.model, self.api_base) if set(e.keys) & wanted.keys()
        ]
        active = [e for e in active if self._recover(e)]
        self.stats.resumed = len(active)
        for entry in active:  # a resumed batch holds its requests' tokens until it ends
            self._tokens[entry.local_id] = sum(self._tokens_of(wanted[k]) for k in entry.keys if k in wanted)
        in_flight = {k for e in active for k in e.keys}
        self._enqueue([r for r in requests if r.key not in in_flight], 1, results)
        active += self._fill(active)
        started = time.monotonic()
        while active:
            pending: list[BatchEntry] = []
            for entry in active:
                if not self._poll(entry, wanted, results, pending):
                    pending.append(entry)
            pending += self._fill(pending)
            self._report(pending, len(results), len(wanted), time.monotonic() - started)
            active = pending
            if active:
                time.sleep(self.poll_s)
        return results

    def _tokens_of(self, request: BatchRequest) -> int:
        return self.count_tokens(request) if self.count_tokens is not None else 0

    def _enqueue(self, requests: Sequence[BatchRequest], round_: int, results: dict[str, CallResult]) -> None:
        """Split `requests` into files within the limits and queue them for submission."""
        lim = self.limits
        chunk = Chunk([], [], 0, round_)
        size = 0
        for request in requests:
            line = self.client.line(request)
            nbytes, tokens = len(line.encode()) + 1, self._tokens_of(request)
            too_big = (
                f"{nbytes:,} bytes, over the batch file limit of {lim.max_file_bytes:,} bytes "
                "(batch_settings.max_file_mb, at most the provider's own)"
                if lim.max_file_bytes is not None and nbytes > lim.max_file_bytes
                else f"{tokens:,} tokens, over the enqueued-token limit of {lim.max_enqueued_tokens:,} "
                "(batch_settings.max_enqueued_tokens)"
                if lim.max_enqueued_tokens is not None and tokens > lim.max_enqueued_tokens
                else None
            )
            if too_big:
                results[request.key] = CallResult(
                    None, cached=False, retries=0, error=f"{NOT_SUBMITTED}the request is {too_big}"
                )
                continue
            full = chunk.requests and (
                len(chunk.requests) >= (lim.max_requests or len(requests) + 1)
                or (lim.max_file_bytes is not None and size + nbytes > lim.max_file_bytes)
                or (lim.max_enqueued_tokens is not None and chunk.tokens + tokens > lim.max_enqueued_tokens)
            )
            if full:
                self._queue.append(chunk)
                chunk, size = Chunk([], [], 0, round_), 0
            chunk.requests.append(request)
            chunk.lines.append(line)
            chunk.tokens += tokens
            size += nbytes
        if chunk.requests:
            self._queue.append(chunk)

    def _fill(self, active: Sequence[BatchEntry]) -> list[BatchEntry]:
        """Submit queued files while the batches in flight leave room for their tokens (one at a time when
        nothing is in flight: every queued file fits the limit on its own)."""
        cap = self.limits.max_enqueued_tokens
        live = {e.local_id for e in active}
        self._tokens = {k: v for k, v in self._tokens.items() if k in live}
        submitted: list[BatchEntry] = []
        while self._queue:
            held = sum(self._tokens.values())
            if cap is not None and held and held + self._queue[0].tokens > cap:
                break
            chunk = self._queue.pop(0)
            entry = self._submit(chunk)
            self._tokens[entry.local_id] = chunk.tokens
            submitted.append(entry)
        return submitted

    def _recover(self, entry: BatchEntry) -> bool:
        """Make a journal entry from a killed run pollable; False if nothing was ever submitted for it."""
        if entry.batch_id is None and entry.input_file_id is not None:
            entry.batch_id = self.client.find(entry.input_file_id)
            if entry.batch_id is None:
                entry.batch_id = str(self._call(self.client.create, entry.input_file_id).id)
                self.stats.batches += 1
            self.journal.save(entry)
        if entry.batch_id is None:  # killed before its upload finished: nothing can have run
            entry.finished, entry.status = True, "never submitted"
            self.journal.save(entry)
            return False
        return True

    def _submit(self, chunk: Chunk) -> BatchEntry:
        """A new batch for one file of requests, recorded before and right after every provider call."""
        entry = self.journal.new(self.model, self.api_base, [r.key for r in chunk.requests], chunk.round)
        entry.input_file_id = self._call(self.client.upload, chunk.lines)
        self.journal.save(entry)
        entry.batch_id = str(self._call(self.client.create, entry.input_file_id).id)
        entry.status = "submitted"
        self.journal.save(entry)
        self.stats.batches += 1
        self.stats.requests += len(chunk.requests)
        return entry

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001  (any provider failure: one line; the journal allows a resume)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise BatchError(
                redact(f"{self.model}: batch {fn.__name__} failed: {type(exc).__name__}: {first}")
            ) from None

    def _poll(
        self,
        entry: BatchEntry,
        wanted: dict[str, BatchRequest],
        results: dict[str, CallResult],
        pending: list[BatchEntry],
    ) -> bool:
        """Retrieve one batch; when it has ended, collect it (and queue its retries). True when it ended."""
        assert entry.batch_id is not None
        try:
            batch = self.client.retrieve(entry.batch_id)
            self._poll_errors.pop(entry.batch_id, None)
        except Exception:  # noqa: BLE001  (a failed status request: try again next poll)
            self._poll_errors[entry.batch_id] = self._poll_errors.get(entry.batch_id, 0) + 1
            if self._poll_errors[entry.batch_id] >= MAX_POLL_ERRORS:
                self._call(self.client.retrieve, entry.batch_id)  # raises the provider's error as one line
            return False
        entry.status = str(batch.status)
        counts = getattr(batch, "request_counts", None)
        entry.counts = {k: int(getattr(counts, k, 0) or 0) for k in ("total", "completed", "failed")}
        if entry.status not in TERMINAL:
            return False
        failed = self._collect(entry, batch, wanted, results)
        entry.finished = (
            True  # recorded before its retries are submitted: a kill in between resubmits nothing
        )
        self.journal.save(entry)
        self.stats.statuses[entry.status] = self.stats.statuses.get(entry.status, 0) + 1
        retry = [wanted[k] for k in failed if k in wanted and entry.round < self.rounds]
        for key, error in failed.items():
            if key in wanted and entry.round >= self.rounds:
                results[key] = CallResult(None, cached=False, retries=entry.round - 1, error=error)
        self._enqueue(retry, entry.round + 1, results)  # submitted by `_fill` as the limits allow
        return True

    def _collect(
        self, entry: BatchEntry, batch: Any, wanted: dict[str, BatchRequest], results: dict[str, CallResult]
    ) -> dict[str, str]:
        """Cache every answer of an ended batch; return {key: error} for the requests it did not answer."""
        created = float(getattr(batch, "created_at", 0) or 0)
        ended = float(getattr(batch, "completed_at", 0) or 0) or time.time()
        latency = max(0.0, ended - created) if created else 0.0
        errors: dict[str, str] = {}
        for line in self._call(self.client.lines_of, getattr(batch, "error_file_id", None)):
            error = _error_of(line)
            if error is not None:
                errors[str(line.get("custom_id"))] = error
        asked, answered = set(entry.keys), set()
        for line in self._call(self.client.lines_of, getattr(batch, "output_file_id", None)):
            key = str(line.get("custom_id")) if isinstance(line, dict) else None
            if key not in asked or key in answered:  # an unknown or repeated custom_id: paid for once at most
                self.stats.ignored += 1
                continue
            completion, error = self._answer(line, latency)
            if completion is None:
                errors[key] = error
                continue
            self.cache.set(key, completion)  # paid for: kept even if this run no longer asks for it
            answered.add(key)
            self.stats.answered += 1
            if completion.cost_usd is None:
                self.stats.cost_known = False
            else:
                self.stats.cost_usd += completion.cost_usd
            if key in wanted:
                results[key] = CallResult(completion, cached=False, retries=entry.round - 1)
        missing = [k for k in entry.keys if k not in answered]
        self.stats.failures += len(missing)
        why = batch_errors(batch) or "without an answer for this request"
        return {k: errors.get(k, _clean(f"batch: {entry.status}: {why}")) for k in missing}

    def _answer(self, line: dict[str, Any], latency: float) -> tuple[Completion | None, str]:
        """(the completion of one output line, ""), or (None, its error as the results keep it: redacted)."""
        response = line.get("response")
        body = response.get("body") if isinstance(response, dict) else None
        status = response.get("status_code") if isinstance(response, dict) else None
        if status != 200 or not isinstance(body, dict) or not body.get("choices"):
            detail = body.get("error", "") if isinstance(body, dict) else body
            return None, _clean(f"batch: status {status}: {_clean(str(detail or ''))[:200]}")
        try:
            return completion_of(body, self.prices, latency), ""
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            return None, _clean(f"batch: malformed answer ({type(exc).__name__})")

    def _report(self, pending: Sequence[BatchEntry], done: int, total: int, waited: float) -> None:
        if self.progress is None:
            return
        statuses = ", ".join(
            f"{e.batch_id} {e.status} {e.counts.get('completed', 0)}/{len(e.keys)}" for e in pending[:3]
        )
        more = f" (+{len(pending) - 3} more)" if len(pending) > 3 else ""
        ignored = ""
        if self.stats.ignored:
            ignored = f"; {self.stats.ignored} output lines ignored (unknown or repeated custom_id)"
        self.progress(
            f"batch: {done}/{total} requests done, waited {waited:.0f}s; {statuses or 'all ended'}{more}{ignored}"
        )


def batch_errors(batch: Any) -> str:
    """The provider's reason a whole batch failed (`errors.data[*]`: code and message), or ""."""
    errors = getattr(batch, "errors", None)
    data = errors.get("data") if isinstance(errors, dict) else getattr(errors, "data", None)
    parts = []
    for item in data or []:
        code = item.get("code") if isinstance(item, dict) else getattr(item, "code", None)
        message = item.get("message") if isinstance(item, dict) else getattr(item, "message", None)
        parts.append(f"{code or 'error'}: {str(message or '')[:300]}")
    return "; ".join(parts)


def _clean(error: str) -> str:
    """An error as written to the results: valid text, every known secret redacted (a provider's error file
    may quote the request's Authorization header); redacted before it is cut, so no key's prefix is left."""
    return redact(valid_text(error))


def _error_of(line: Any) -> str | None:
    """The error an error-file line records for its request, or None for a line that is no request's."""
    if not isinstance(line, dict):
        return None
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    if not isinstance(error, dict):
        error = {"message": error}
    return _clean(f"batch: {error.get('code', 'error')}: {_clean(str(error.get('message', '')))[:300]}")
