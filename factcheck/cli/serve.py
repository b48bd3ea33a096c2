"""``factcheck serve`` (the explain app) and ``factcheck check`` (its check page in a terminal).
``serve`` binds to loopback by default: the app has no authentication."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from factcheck.cli.options import (add_cap_arg, add_embedding_args, add_mode_arg, positive_int, relocate_from_args,
                                   text_arg)
from factcheck.cli.terminal import field
from factcheck.errors import InputError
from factcheck.retrieval.registry import ALL_METHODS

__all__ = ["add_serve", "add_check", "is_loopback", "url_of", "check_can_listen", "allowed_hosts_for"]

LOOPBACK_NAMES = ["127.0.0.1", "localhost"]


def is_loopback(host: str) -> bool:
    """``localhost``, any IPv4 127/8 address or ``::1``."""
    import ipaddress
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(host: str, port: int) -> str:
    host = host.strip("[]")
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def check_can_listen(host: str, port: int) -> None:
    """Bind (and release) ``host:port`` once, to refuse a port in use before start-up."""
    import errno
    import socket

    try:
        family, _, _, _, addr = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(None, None, f"cannot resolve {host!r} ({getattr(exc, 'strerror', None) or exc})",
                         param="host") from None
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(addr)
        except OSError as exc:
            param = "port" if exc.errno == errno.EADDRINUSE else "host"
            raise InputError(None, None, f"cannot listen on {url_of(host, port)} ({exc.strerror})",
                             param=param) from None


def allowed_hosts_for(host: str) -> list[str] | None:
    """The Host headers accepted when bound to a loopback address (None: not loopback)."""
    if not is_loopback(host):
        return None
    return sorted({*LOOPBACK_NAMES, host.strip("[]").lower()})


def add_serve(p):
    p.add_argument("--run", type=Path, default=None,
                   help="output directory of `factcheck run` "
                        "(uses RUN/index, RUN/model, metrics, plots, dev predictions)")
    p.add_argument("--index", type=Path, default=None, help="tag index directory (default: RUN/index)")
    p.add_argument("--model", type=Path, default=None, help="model directory (default: RUN/model)")
    p.add_argument("--dev-claims", type=Path, default=None,
                   help="gold dev claims for the dev explorer (default: dev-claims.json in the run's data_dir)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--max-claim-chars", type=positive_int, default=2000, help="longest claim accepted (default: 2000)")
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.add_argument("--debug", action="store_true", help="also serve /openapi.json and /docs")
    add_mode_arg(p, from_model=True)
    add_embedding_args(p)

    def run(args):
        from factcheck.serve.app import create_app  # first: without the app extra, one line naming it
        import uvicorn

        if not 0 <= args.port <= 65535:
            raise InputError(None, None, f"must be in 0..65535, got {args.port}", param="port")
        check_can_listen(args.host, args.port)  # before loading the index: fail in seconds, in one line
        relocate_from_args(args, args.index or (args.run / "index" if args.run else None))
        allowed = allowed_hosts_for(args.host)
        if allowed is None:
            print(f"factcheck serve: warning: binding {args.host}, not loopback: anyone who can reach this "
                  "address can use the app (it has no authentication)", file=sys.stderr)
        app = create_app(args.run, args.index, args.model, args.dev_claims, max_claim_chars=args.max_claim_chars,
                         allowed_hosts=allowed, debug=args.debug, mode=args.mode)
        s = app.state.explain.systems
        print(f"factcheck serve: {len(s.index)} passages, {s.by_method[s.best].mode} mode, retrievers "
              f"{', '.join(s.methods)} (best: {s.best}); "
              f"{url_of(args.host, args.port)}", file=sys.stderr, flush=True)
        from factcheck.serve.limits import uvicorn_settings
        uvicorn.run(app, host=args.host.strip("[]"), port=args.port, log_level="info" if args.access_log else "warning",
                    access_log=args.access_log, **uvicorn_settings())  # idle and half-sent connections time out
    return run


def add_check(p):
    p.add_argument("claim", type=text_arg, help="the claim to check (quote it)")
    p.add_argument("--run", type=Path, default=None, help="output directory of `factcheck run` (uses RUN/index, RUN/model)")
    p.add_argument("--index", type=Path, default=None, help="tag index directory (default: RUN/index)")
    p.add_argument("--model", type=Path, default=None, help="model directory (default: RUN/model)")
    p.add_argument("--method", default="best", choices=("best", *ALL_METHODS),
                   help="retriever: best = the one the run chose (default), or any tuned one")
    add_mode_arg(p, from_model=True)
    p.add_argument("--json", action="store_true", help="print the JSON record of GET /api/check instead")
    p.add_argument("--width", type=int, default=None, help="wrap text at this many columns (default: the terminal's)")
    add_cap_arg(p, "claim")
    add_embedding_args(p)

    def run(args):
        import shutil

        from factcheck.serve.check import check_claim, format_check
        relocate_from_args(args, args.index or (args.run / "index" if args.run else None))
        view = check_claim(args.claim, args.run, args.index, args.model, args.method, args.mode,
                           max_claim_chars=args.max_claim_chars)
        if args.json:
            print(json.dumps(view, indent=2, ensure_ascii=False))
        else:
            width = args.width or min(shutil.get_terminal_size((100, 24)).columns, 100)
            print(format_check(_fields_escaped(view), max(width, 40)))
    return run


def _fields_escaped(view: dict) -> dict:
    """The check record with each passage id and title as a one-line :func:`field` (a newline
    in an id would print a row of its own; the text is wrapped, its line breaks are spaces)."""
    hits = [{**h, "id": field(h["id"]), **({"title": field(h["title"])} if h.get("title") else {})}
            for h in view["hits"]]
    read = view.get("classifier_read")
    if read and read.get("ids"):
        read = {**read, "ids": [field(i) for i in read["ids"]]}
    return {**view, "hits": hits, "classifier_read": read}
