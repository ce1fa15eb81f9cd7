"""`python -m analysis.view <run-or-multirun-dir> [--humans FILE] [--port P] [--no-browser]`

A local web page (127.0.0.1 only) to read every judgment of a study: the list of judged items, filtered,
paged and sorted by disagreement in DuckDB (analysis.view.data), and an item page with the prompt as sent,
each sample's raw answer and parse status, every judge's and mode's scores side by side and the human
labels. Server-rendered HTML (Starlette + Jinja2 templates shipped in the package): no CDN, works offline.
Starlette, not FastAPI on top of it: FastAPI's pydantic models took 0.5 s of CPU of the viewer's start, for
three query parameters.
"""

from __future__ import annotations

import argparse
import re
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Sequence
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from analysis.view.data import DEFAULT_SORT, FILTERS, PAGE_SIZE, SORTS, Study, ViewError
from core.spellings import ORIGINAL

# the hosts a page of the viewer may be asked for: a web page the user visits elsewhere can point its own name
# at 127.0.0.1 (DNS rebinding) and read the study unless other Host headers are refused
HOSTS = ("127.0.0.1", "localhost")
MAX_OFFSET = 2**53  # a page offset beyond any study (DuckDB's OFFSET is a signed 64-bit integer)
BACKGROUND = re.compile(r"<<<PAPER 1>>>.*<<<END PAPER \d+>>>\n?", re.DOTALL)
RUN_KEYS = ["judge", "rubric", "mode", "run_id", "prompt_id"]


def split_background(text: str) -> tuple[str, str, str]:
    """(before, background papers, after) of a prompt message, so the page can fold the long middle."""
    match = BACKGROUND.search(text)
    if not match:
        return text, "", ""
    return text[: match.start()], match.group(0), text[match.end() :]


def _cell(values: pd.Series) -> str:
    """A score cell: the mean over samples and each sample's value."""
    scores = values.dropna()
    if scores.empty:
        return "–"
    each = ", ".join(f"{v:g}" for v in scores)
    return f"{scores.mean():.2f} ({each})" if len(scores) > 1 else f"{scores.iloc[0]:g}"


def _value_cell(part: pd.DataFrame) -> str:
    """A rater's cell: its scores (`_cell`) of answers that parsed, as the list and the analysis count them,
    with an unparsed answer's score shown apart; or a pairwise rater's preferences (a: this text, b: the
    other, tie), one per sample, since a pairwise row has a preference and no score."""
    if part["score"].notna().any():
        unparsed = pd.Series(False, index=part.index)
        if "parse_ok" in part:  # unknown (NA) counts as parsed, as in analysis.stats.scores.usable_mask
            unparsed = part["parse_ok"].astype("boolean").eq(False).fillna(False).astype(bool)
        cell = _cell(part.loc[~unparsed, "score"])
        apart = part.loc[unparsed, "score"].dropna()
        return cell + (f" [unparsed: {', '.join(f'{v:g}' for v in apart)}]" if len(apart) else "")
    preferences = part["preference"].dropna().astype(str)
    return "/".join(preferences) if len(preferences) else "–"


def perturbed(values: pd.Series) -> np.ndarray:
    """Each row's robustness perturbation (`robustness.perturbation_names`, the analysis's one spelling), ""
    when unperturbed."""
    from analysis.stats.scores import perturbation_names  # scipy: only once an item page is drawn

    names = perturbation_names(values)
    return np.where(names == ORIGINAL, "", names)


def score_grid(rows: pd.DataFrame, humans: pd.DataFrame) -> pd.DataFrame:
    """Dimension × (judge · rubric · mode [· perturbed: p], then each annotator): every rater's score side by
    side; a robustness perturbation is a column of its own, never pooled with the unperturbed scores."""
    shown = pd.Series(perturbed(rows["perturbation"]) if "perturbation" in rows else "", index=rows.index)
    judged = rows.assign(
        rater=rows["judge"]
        + " · "
        + rows["rubric"].fillna("")
        + " · "
        + rows["mode"]
        + shown.map(lambda p: f" · perturbed: {p}" if p else "")
    )
    cells = {key: _value_cell(part) for key, part in judged.groupby(["dimension", "rater"], sort=True)}
    grid = pd.Series(cells, dtype=object).unstack() if cells else pd.DataFrame()
    grid = grid.rename_axis(index="dimension", columns="rater")
    for annotator, part in humans.groupby(
        "annotator"
    ):  # repeated labels (refused at ingest) shown, not a 500
        shown = part.groupby("dimension")["score"].agg(
            lambda s: " / ".join(f"{v:g}" for v in s.dropna()) or None
        )
        grid["human:" + str(annotator)] = shown.reindex(grid.index)
    return grid.fillna("–")


def _text(value: Any) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def _sample(part: pd.DataFrame) -> dict[str, Any]:
    """One sample of one prompt: parse status, its values for this candidate, and the raw answer."""
    first = part.iloc[0]
    values = part["score"].where(part["score"].notna(), part["preference"])
    return {
        "sample_idx": int(first["sample_idx"]),
        "parse_ok": _text(first["parse_ok"]) != "False",
        "error": _text(first["error"]),
        "finish_reason": _text(first["finish_reason"]),
        "raw": _text(first["raw"]),
        "values": " · ".join(
            f"{d} {v:g}" if isinstance(v, float) else f"{d} {v}"
            for d, v in zip(part["dimension"], values, strict=True)
            if pd.notna(v)
        ),
    }


def judgments(rows: pd.DataFrame, study: Study) -> list[dict[str, Any]]:
    """One block per prompt that showed this candidate: where it was shown, the messages, the samples."""
    keys = {(_text(r), _text(p)) for r, p in zip(rows["run_id"], rows["prompt_id"], strict=True)}
    messages = study.prompt_messages(sorted(keys))  # a row without run_id (optional): no prompt to match
    references = study.reference_scores(rows) if len(rows) else {}
    blocks = []
    for key, part in rows.groupby(RUN_KEYS, dropna=False, sort=True):
        first = part.iloc[0]
        sent = messages.get((_text(first["run_id"]), _text(first["prompt_id"])), [])
        blocks.append(
            {
                # the reference's scores in the same prompt, beside this candidate's (none: not shown there)
                "reference": ""
                if first["source"] == "reference"
                else references.get(tuple(map(_text, key)), ""),
                **{k: (_text(v) or None) for k, v in zip(RUN_KEYS, key, strict=True)},  # NaN: None
                "label": _text(first["label"]),
                "order": _text(first["order"]),
                "perturbation": perturbed(part["perturbation"].iloc[:1])[0],
                "position": None if pd.isna(first["position"]) else int(first["position"]),
                "messages": [
                    {"role": m.get("role", ""), "parts": split_background(str(m.get("content", "")))}
                    for m in sent
                ],
                "samples": [_sample(s) for _, s in part.groupby("sample_idx", sort=True)],
            }
        )
    return blocks


def item_context(study: Study, instance_id: str, candidate_id: str) -> dict[str, Any]:
    """Everything an item page shows (the served page and the static bundle's render the same template)."""
    rows = study.item_rows(instance_id, candidate_id)
    humans = study.human_rows(instance_id, candidate_id)
    return {
        "instance_id": instance_id,
        "candidate_id": candidate_id,
        "found": len(rows) > 0,
        "source": rows["source"].iloc[0] if len(rows) else "",
        "text": rows["candidate_text"].iloc[0] if len(rows) else "",
        "grid": score_grid(rows, humans) if len(rows) else pd.DataFrame(),
        "blocks": judgments(rows, study),
        "has_prompts": study.has_prompts,
        "root": str(study.root),
    }


def _query(params: dict[str, str], **change: Any) -> str:
    return "?" + urlencode({k: v for k, v in {**params, **change}.items() if v not in (None, "")})


class BadQuery(Exception):
    """A query string the viewer cannot read (one line for the user, HTTP 400)."""


def _integer(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise BadQuery(f"{name}: {text[:40]!r} is not an integer") from None


def _required(request: Request, name: str) -> str:
    value = request.query_params.get(name)
    if value is None:
        raise BadQuery(f"{name}: required")
    return value


async def _one_line(request: Request, call_next: RequestResponseEndpoint) -> Response:
    """A bug still answers one line, in the page and the log, never a traceback."""
    try:
        return await call_next(request)
    except Exception as exc:  # noqa: BLE001
        line = f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        print(f"{request.url.path}: {line}", file=sys.stderr)
        return PlainTextResponse(line, status_code=500)


def create_app(study: Study, hosts: Sequence[str] = HOSTS) -> Starlette:
    """The viewer's web app for one opened study, answering only requests addressed to `hosts` (the host it
    is bound to: any other Host header is a 400). A bad query string is a 400 and a study file that cannot be
    read now a 409, each one line of text; no request gets a traceback."""
    assets = resources.files("analysis.view")
    templates = Jinja2Templates(directory=str(assets / "templates"))
    choices = study.choices()

    def items(request: Request) -> Response:
        sort = request.query_params.get("sort", DEFAULT_SORT)
        offset = _integer(request, "offset", 0)
        filters = {c: request.query_params.get(c, "") for c in FILTERS}
        # never waits for the disagreement tables: until they are built the page says so and reloads
        page = study.page(filters, sort, min(max(offset, 0), MAX_OFFSET), wait=False)
        params = {**filters, "sort": sort}
        return templates.TemplateResponse(
            request,
            "view_list.html",
            {
                "page": page,
                "filters": filters,
                "choices": choices,
                "sort": sort,
                "sorts": SORTS,
                "size": PAGE_SIZE,
                "query": lambda **kw: _query(params, **kw),
                "root": str(study.root),
            },
        )

    def item(request: Request) -> Response:
        instance_id, candidate_id = _required(request, "instance_id"), _required(request, "candidate_id")
        context = item_context(study, instance_id, candidate_id)
        return templates.TemplateResponse(
            request, "view_item.html", context, status_code=200 if context["found"] else 404
        )

    def report(request: Request) -> Response:
        """The study's report.html (analysis.report.build's default folder), or how to write it."""
        path = study.root / "report" / "report.html"
        if path.is_file():
            return FileResponse(path, media_type="text/html")
        return templates.TemplateResponse(
            request, "view_report.html", {"root": str(study.root)}, status_code=404
        )

    def bad_query(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(f"error: {exc}", status_code=400)

    def unreadable(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(f"error: {exc}", status_code=409)

    return Starlette(
        routes=[
            Route("/", items, methods=["GET"]),
            Route("/item", item, methods=["GET"]),
            Route("/report", report, methods=["GET"]),
            Mount("/static", StaticFiles(directory=str(assets / "static")), name="static"),
        ],
        middleware=[  # the host check outermost: checked first
            Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts)),
            Middleware(BaseHTTPMiddleware, dispatch=_one_line),
        ],
        exception_handlers={BadQuery: bad_query, ViewError: unreadable},
    )


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def announce(server: uvicorn.Server, url: str, root: str, browser: bool) -> None:
    """Print the URL (and open a browser) once the server answers, not before."""
    while not server.started and not server.should_exit:
        time.sleep(0.05)
    if server.started:
        print(f"judgescope viewer for {root}: {url}  (Ctrl-C to stop)", flush=True)
        if browser:
            webbrowser.open(url)


def bind_port(port: int) -> socket.socket:
    """`bind`, with a port out of range or already taken named as the `--port` setting."""
    try:
        return bind(port)
    except (OSError, OverflowError) as exc:
        raise ViewError(f"--port {port}: {str(exc).rstrip('.')}; choose another (0: any free port)") from None


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.view", description="Serve a local page to read every judgment of a study."
    )
    parser.add_argument("root", help="a run folder or a multirun folder (searched recursively)")
    parser.add_argument(
        "--humans", help="human labels CSV (annotator, instance_id, candidate_id, source, dimension, score)"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free)"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)
    try:
        humans = None
        if args.humans:  # errors name the file (and line); the analysis's loader only for --humans
            from analysis.load.collect import load_humans

            humans = load_humans(args.humans)
        study = Study(args.root, humans)
        sock = bind_port(args.port)
    except (ViewError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # the disagreement tables start building now: a small study's are there by the first page; a large
    # one's first page comes meanwhile, in item order, and says so
    study.start_build()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    server = uvicorn.Server(uvicorn.Config(create_app(study), log_level="warning"))
    threading.Thread(
        target=announce, args=(server, url, str(args.root), not args.no_browser), daemon=True
    ).start()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn shuts down gracefully, then re-raises Ctrl-C
        print("judgescope viewer stopped", file=sys.stderr)
    finally:
        study.close()  # stops the background DuckDB build: exiting while it runs aborts the process
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
