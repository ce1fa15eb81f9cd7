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
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Sequence
from importlib import resources
from typing import Any
from urllib.parse import urlencode

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

# the hosts a page of the viewer may be asked for: a web page the user visits elsewhere can point its own name
# at 127.0.0.1 (DNS rebinding) and read the study unless other Host headers are refused
HOSTS = ("127.0.0.1", "localhost")
MAX_OFFSET = 2**53  # a page offset beyond any study (DuckDB's OFFSET is a signed 64-bit integer)


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
        from analysis.view.item import item_context  # pandas, numpy, scipy: only once an item page is drawn

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
    # the disagreement tables: a small study's are built now and there by the first page; a large one's start
    # once its first page (in item order, saying so) is out, so that they do not slow it down
    if study.small:
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
