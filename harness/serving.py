"""Run ``factcheck serve`` as a child process and wait until it answers.

The browser test and the load benchmark both need a real server on a free loopback
port; this is the one place that knows how to start it, tell "still loading the index"
from "crashed", and stop it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import subprocess
import sys
import time
import urllib.request


class ServerFailed(RuntimeError):
    pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    """``GET url`` returns 200 (the standard library: httpx is a test-only extra)."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via a proxy
    try:
        with direct.open(url, timeout=2) as response:
            return response.status == 200
    except (OSError, http.client.HTTPException, ValueError):  # refused, reset, timed out, not HTTP yet
        return False


@contextlib.contextmanager
def serving(serve_args: list[str], log_file, cwd=None, timeout: float = 90.0):
    """Yield ``(url, process)`` of ``factcheck serve SERVE_ARGS`` once ``/healthz`` answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_file, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "factcheck", "serve", *map(str, serve_args),
                                 "--port", str(port)], cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise ServerFailed(f"factcheck serve exited with {proc.returncode}: {open(log_file).read()}")
            if _answers(url + "/healthz"):
                break
            if time.monotonic() > deadline:
                raise ServerFailed(f"factcheck serve did not answer within {timeout:.0f} s: {open(log_file).read()}")
            time.sleep(0.2)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
