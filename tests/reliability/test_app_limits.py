"""The explain app refuses what the CLI refuses, and never waits forever on a client.

Before: ``?claim=%ff`` was decoded to U+FFFD and answered 200; a connection that sent half a
request (or nothing) was held open for ever (uvicorn's keep-alive timeout only runs between
requests). No test here reads the clock: the connection test waits for the server to close
the connection, with a generous socket timeout that only the old code runs into.
"""

from __future__ import annotations

import socket
import threading

import pytest
from fastapi.testclient import TestClient

from helpers import in_process


@pytest.fixture(scope="module")
def client(demo_run):
    from factcheck.serve.app import create_app
    return TestClient(create_app(demo_run))


@pytest.mark.parametrize("query", ["claim=%ff%fe", "claim=sea%C3%28level", "claim=ok&method=%e9"])
def test_a_query_string_that_is_not_utf8_is_400(client, query):
    api = client.get(f"/api/check?{query}")
    assert api.status_code == 400 and "not valid UTF-8" in api.json()["detail"]
    page = client.get(f"/?{query}")
    assert page.status_code == 400 and "not valid UTF-8" in page.text
    assert page.headers["x-content-type-options"] == "nosniff"  # still behind the security headers


def test_valid_utf8_and_plus_signs_are_answered(client):
    r = client.get("/api/check?claim=Sea+levels+are+rising+in+S%C3%A3o+Paulo")
    assert r.status_code == 200 and r.json()["claim"] == "Sea levels are rising in São Paulo"


def _serve_settings(demo_run, monkeypatch) -> dict:
    """What ``factcheck serve`` passes to uvicorn.run (captured, nothing served)."""
    import uvicorn
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(kwargs))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = in_process("serve", "--run", demo_run, "--port", port)
    assert proc.returncode == 0, proc.stderr
    return seen


def test_serve_sets_its_timeouts_explicitly(demo_run, monkeypatch):
    from factcheck.serve.limits import HEADER_TIMEOUT, KEEP_ALIVE_TIMEOUT
    seen = _serve_settings(demo_run, monkeypatch)
    assert seen["timeout_keep_alive"] == KEEP_ALIVE_TIMEOUT
    assert seen["http"].header_timeout == HEADER_TIMEOUT > 0


def test_a_half_sent_request_is_closed_by_the_server(demo_run, monkeypatch):
    """uvicorn with serve's own settings (the head deadline shortened), a tiny ASGI app."""
    import uvicorn
    seen = _serve_settings(demo_run, monkeypatch)
    fast = type("FastDeadline", (seen["http"],), {"header_timeout": 0.5})

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical", lifespan="off",
                                           http=fast, timeout_keep_alive=seen["timeout_keep_alive"]))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        def connect():
            for _ in range(600):
                try:
                    return socket.create_connection(("127.0.0.1", port), timeout=60)
                except ConnectionRefusedError:
                    threading.Event().wait(0.05)
            raise AssertionError("the test server did not start")
        with connect() as ok:  # a whole request is answered
            ok.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert ok.recv(1024).startswith(b"HTTP/1.1 200")
        for partial in (b"", b"GET / HTTP/1.1\r\nHost: x\r\n"):  # nothing at all; headers never ended
            with connect() as idle:
                idle.sendall(partial)
                assert idle.recv(1024) == b""  # closed by the server (a 60 s socket timeout raises instead)
    finally:
        server.should_exit = True
        thread.join(timeout=60)
