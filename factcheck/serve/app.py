"""The FastAPI app: autoescaped Jinja2 pages under a Content-Security-Policy that allows no
script; a request names a claim, a loaded retriever or a plot, never a path."""

from __future__ import annotations

import logging
import threading
from urllib.parse import urlencode
from dataclasses import dataclass, field
from pathlib import Path

from factcheck.errors import require_extra

require_extra("app", "the explain app", "fastapi", "jinja2", "uvicorn")  # one line, not a ModuleNotFoundError

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from factcheck.errors import InputError
from factcheck.serve import dev as devview
from factcheck.serve import present
from factcheck.serve.artefacts import Artefacts, load_artefacts, read_dev_predictions, resolve_paths
from factcheck.serve.explain import RANKING_SHOWN, check_view
from factcheck.serve.highlight import segments
from factcheck.serve.limits import StrictQueryString
from factcheck.serve.results import format_interval, tables
from factcheck.serve.retriever_set import BEST, RetrieverSet, load_retriever_set

logger = logging.getLogger(__name__)  # for whoever serves the app (the CLI shows it)

MAX_CLAIM_CHARS = 2000
TEMPLATES = Path(__file__).parent / "templates"
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
                                 b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


@dataclass
class AppState:
    systems: RetrieverSet
    artefacts: Artefacts
    max_claim_chars: int = MAX_CLAIM_CHARS
    _dev: devview.DevExplorer | None = None
    _dev_lock: threading.Lock = field(default_factory=threading.Lock)

    def dev(self) -> devview.DevExplorer:
        """The dev explorer, built on first view (the run's dev predictions read then too)."""
        with self._dev_lock:
            if self._dev is None:
                try:
                    read_dev_predictions(self.artefacts)
                except InputError as exc:  # the page says so, the log names the file; the next view tries again
                    logger.error("%s", exc.one_line())
                    raise HTTPException(500, "the run's dev predictions cannot be read (the server's log names "
                                             "the file and the place)") from None
                self._dev = devview.build(self.artefacts, self.systems)
            return self._dev

    def check(self, claim: str | None, method: str | None) -> dict:
        """Validate the request's claim and method, then check the claim (HTTPException on bad input)."""
        name = self.method(method)
        if claim is None or not claim.strip():
            raise HTTPException(422, "the claim is empty; type a claim to check")
        if len(claim) > self.max_claim_chars:
            raise HTTPException(413, f"the claim is {len(claim)} characters long; the limit is {self.max_claim_chars}")
        claim = claim.strip()
        verdict, seconds = self.systems.check(name, claim)
        system = self.systems.by_method[name]
        return check_view(claim, name, self.systems.best, verdict, system.texts, seconds,
                          system.retriever.params())

    def compare(self, claim: str | None) -> list[dict]:
        """The claim checked with every loaded retriever, the model's choice first."""
        best = self.systems.best
        return [self.check(claim, name) for name in [best, *(m for m in self.systems.methods if m != best)]]

    def method(self, requested: str | None) -> str:
        """The loaded retriever ``requested`` names (``best`` or empty: the model's choice)."""
        if requested in (None, "", BEST):
            return self.systems.best
        if requested in self.systems.by_method:
            return requested
        shown = requested if len(requested) <= 40 else requested[:40] + "..."
        raise HTTPException(400, f"unknown method {shown!r}; expected one of "
                                 f"{', '.join([BEST, *self.systems.methods])}")


def create_app(run_dir: Path | None = None, index_dir: Path | None = None, model_dir: Path | None = None,
               dev_claims: Path | None = None, *, max_claim_chars: int = MAX_CLAIM_CHARS,
               allowed_hosts: list[str] | None = None, warm_up: bool = True, debug: bool = False,
               mode: str | None = None) -> FastAPI:
    """Load the system and the run's artefacts once and build the app (``allowed_hosts``: against DNS rebinding)."""
    index_dir, model_dir = resolve_paths(run_dir, index_dir, model_dir)
    systems = load_retriever_set(index_dir, model_dir, warm_up=warm_up, mode=mode)
    artefacts = load_artefacts(Path(run_dir) if run_dir else None, Path(dev_claims) if dev_claims else None)
    return build_app(AppState(systems, artefacts, max_claim_chars), allowed_hosts, debug=debug)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["interval"] = format_interval
    env.filters["num"] = lambda x, d=3: (f"{x:.{d}f}" if isinstance(x, float) else
                                         "—" if x is None else str(x))
    env.filters["label"] = present.label_name
    env.filters["label_class"] = present.label_class
    env.filters["retriever"] = present.retriever_name
    env.filters["metric"] = present.metric_name
    env.filters["param"] = present.PARAM_NAMES.get  # None: the page shows the key alone
    env.filters["check_url"] = present.check_url
    env.filters["isolate"] = present.isolate
    env.globals["segments"] = segments
    return env


def build_app(state: AppState, allowed_hosts: list[str] | None = None, debug: bool = False) -> FastAPI:
    """The app's routes and middleware over ``state``; the API schema and /docs only with ``debug``."""
    app = FastAPI(title="factcheck explain", docs_url="/docs" if debug else None, redoc_url=None,
                  openapi_url="/openapi.json" if debug else None)
    app.state.explain = state
    env = _environment()
    nav = {"methods": state.systems.methods, "best": state.systems.best,
           "unavailable": state.systems.unavailable, "max_chars": state.max_claim_chars,
           "has_run": state.artefacts.run_dir is not None,
           "labels": state.systems.labels, "label_names": [present.label_name(v) for v in state.systems.labels]}
    examples = present.examples(state.artefacts.gold)
    index = state.systems.index
    titles_of, passage_texts = present.titles_of(index), present.texts_of(index)

    def get(path: str, **kwargs):  # every page answers HEAD as well as GET
        def register(fn):
            app.api_route(path, methods=["HEAD"], **{**kwargs, "include_in_schema": False})(fn)
            return app.get(path, **kwargs)(fn)
        return register

    def page(name: str, status_code: int = 200, **ctx) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**nav, **ctx), status_code=status_code)

    def error(request: Request, status: int, detail):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": detail}, status_code=status)
        return page("error.html", status, status=status, message=detail, active="")

    @app.middleware("http")
    async def files_unchanged(request: Request, call_next):
        # Before a request reads a mapped file: one cut short under the server would be a SIGBUS.
        try:
            index.check_unchanged()
        except InputError as exc:
            logger.error("%s", exc.one_line())
            return error(request, 500, "a file of the index changed on disk after the server opened it (the "
                                       "server's log names it); restart the server")
        return await call_next(request)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return error(request, exc.status_code, exc.detail)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        return error(request, 422, "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}"
                                             for e in exc.errors()))

    @get("/", response_class=HTMLResponse)
    def check_page(claim: str | None = None, method: str = BEST):
        result, view, error, status = None, None, None, 200
        try:
            state.method(method)
            if claim is not None:
                result = state.check(claim, method)
                view = present.check_page(result, passage_texts, titles_of)
        except HTTPException as exc:
            error, status = exc.detail, exc.status_code
        return page("check.html", status, active="check", claim=claim or "", method_req=method,
                    result=result, view=view, error=error, examples=examples)

    @get("/compare", response_class=HTMLResponse)
    def compare_page(claim: str | None = None):
        cmp, error, status = None, None, 200
        try:
            if claim is not None:
                cmp = present.compare_page(state.compare(claim), titles_of)
        except HTTPException as exc:
            error, status = exc.detail, exc.status_code
        return page("compare.html", status, active="compare", claim=claim or "", cmp=cmp, error=error,
                    examples=examples)

    @get("/api", response_class=HTMLResponse)
    def api_page():
        claim = examples[0]["claims"][0]["text"] if examples else "Sea levels are rising."
        return page("api.html", active="api", ranking_shown=RANKING_SHOWN,
                    example_url="/api/check?" + urlencode({"claim": claim, "method": BEST}))

    @get("/api/check")
    def api_check(claim: str | None = None, method: str = BEST):
        return JSONResponse(state.check(claim, method))

    @get("/api/methods")
    def api_methods():
        return {"best": state.systems.best, "methods": state.systems.methods,
                "unavailable": state.systems.unavailable, "max_claim_chars": state.max_claim_chars}

    @get("/favicon.ico", include_in_schema=False)
    def favicon():  # browsers ask for it on every page; an empty answer keeps the console clean
        return Response(status_code=204)

    @get("/healthz")
    def healthz():
        return {"ok": True, "passages": len(state.systems.index)}

    @get("/dev", response_class=HTMLResponse)
    def dev_page(show: str = "all"):
        if show not in devview.FILTERS:
            raise HTTPException(400, f"unknown filter {show[:40]!r}; expected one of {', '.join(devview.FILTERS)}")
        explorer = state.dev()
        return page("dev.html", active="dev", explorer=explorer, rows=devview.select(explorer.rows, show),
                    show=show, filters=devview.FILTERS, notes=state.artefacts.notes)

    @get("/results", response_class=HTMLResponse)
    def results_page():
        a = state.artefacts
        return page("results.html", active="results", t=tables(a.metrics), plots=list(a.plots),
                    run_dir=str(a.run_dir) if a.run_dir else None, notes=a.notes)

    @get("/plots/{name}")
    def plot(name: str):
        data = state.artefacts.plots.get(name)  # a table listed at start-up; never a path
        if data is None:
            raise HTTPException(404, "no such plot")
        return Response(data, media_type="image/png", headers={"cache-control": "max-age=300"})

    app.add_middleware(StrictQueryString)  # innermost: a bad host is refused first (factcheck.serve.limits)
    if allowed_hosts:
        app.add_middleware(_HostCheck, allowed=allowed_hosts)
    app.add_middleware(_SecurityHeaders)  # added last = outermost: on every response, errors too
    return app


def host_of(header: str) -> str:
    """The host part of a Host header: ``[::1]:8000`` -> ``::1``, ``a.b:80`` -> ``a.b``."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class _HostCheck:
    """Rejects requests whose Host is not one of ``allowed`` (Starlette's own breaks IPv6 literals)."""

    def __init__(self, app, allowed):
        self.app = app
        self.allowed = {host_of(h) if h.startswith("[") else h.lower() for h in allowed}

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        host = host_of(headers.get(b"host", b"").decode("latin-1"))
        if host in self.allowed:
            return await self.app(scope, receive, send)
        response = Response("Invalid host header", status_code=400, media_type="text/plain")
        await response(scope, receive, send)


class _SecurityHeaders:
    """Adds the security headers to every response (plain ASGI: no per-request task)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
