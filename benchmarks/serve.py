"""Load-test the explain app: 1,000 /api/check requests on loopback, p50/p99, 0 errors.

Starts ``factcheck serve --run RUN`` on a free loopback port, warms it up, then sends
the run's dev claims (cycled) one request at a time from one keep-alive client:
``--requests`` with the model's chosen retriever, then ``--per-method`` for every
retriever the server loaded. Latency is the client's (request sent -> JSON parsed);
the server's own compute time (``timing_ms``) is reported next to it. The server is
then stopped and each retriever is timed in-process, split into ``retrieve`` (the
evidence + explanation), ``rank`` (the depth-100 ranking the explanation also keeps)
and the whole ``FactChecker.check`` (both plus the classifier), to show what
dominates. Writes reports/bench-serve.md.

Caches: the reranker memoises its scoring per claim text (so ``retrieve`` and ``rank``
share it), which would turn every repeat of a cycled dev claim into a cache hit. Each
repeat is therefore sent as a *variant* with extra spaces between two words: the same
stems, numbers and names (checked below: same passages, same verdict), but a new
cache key, so every request pays for the full check. The in-process timings clear the
reranker's memo before each claim for the same reason.

    python -m benchmarks.serve /tmp/serve-proxy-run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from harness.measure import ROOT, machine, pct, rss_parts_mib, write_report

from harness.serving import ServerFailed, serving


def dev_claims(run: Path, claims: Path | None) -> tuple[Path, list[str]]:
    from factcheck.formats.claims import read_claims
    from factcheck.serve.artefacts import _gold_file
    path = claims or _gold_file(run, json.loads((run / "metrics.json").read_text()))
    if path is None:
        sys.exit("bench_serve: cannot find the run's dev-claims.json; pass --claims FILE")
    return path, [c.text for c in read_claims(path)]


def summary(ms: list[float]) -> str:
    return (f"{statistics.median(ms):.1f} | {pct(ms, 99):.1f} | {statistics.fmean(ms):.1f} | {max(ms):.1f}")


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def serve_once(run: Path | None, requests: int, cwd: Path = ROOT, timeout: float = 600,
               index: Path | None = None, model: Path | None = None, claims: Path | None = None) -> dict:
    """Start ``factcheck serve --run RUN`` (or ``--index INDEX --model MODEL`` with ``run``
    None) from the source tree ``cwd``, time its start-up until ``/healthz`` answers, warm it
    with 20 requests, then send ``requests`` dev claims (the run's, or ``claims``) to
    ``/api/check`` with the chosen retriever. Returns start-up seconds, RSS (MiB) after
    start-up and after the requests (anonymous and file-backed parts too), p50/p99 ms."""
    _, texts = dev_claims(run, claims)
    args = ["--run", str(run)] if run is not None else ["--index", str(index), "--model", str(model)]
    log = Path(tempfile.mkstemp(prefix="bench-serve-", suffix=".log")[1])
    t0 = time.perf_counter()
    try:
        with serving(args, log, cwd=cwd, timeout=timeout) as (url, proc):
            startup = time.perf_counter() - t0
            rss_start = rss_mib(proc.pid)
            with httpx.Client(timeout=120) as client:
                load_test(client, url, texts, "best", 20, first_repeat=20)  # warm-up
                result = load_test(client, url, texts, "best", requests, first_repeat=1)
                best = client.get(url + "/api/methods").json().get("best")
            rss_end = rss_mib(proc.pid)
            anon_end, file_end = rss_parts_mib(proc.pid)
    finally:
        log.unlink(missing_ok=True)
    lat = result["latency"]
    return {"startup_s": startup, "rss_start_mib": rss_start, "rss_end_mib": rss_end, "anon_end_mib": anon_end,
            "file_end_mib": file_end, "best": best, "p50": statistics.median(lat), "p99": pct(lat, 99),
            "n": len(lat), "errors": len(result["errors"])}


def variant(claim: str, r: int) -> str:
    """Repeat ``r`` of a claim: the first space widened to ``r + 1`` spaces (analysis unchanged)."""
    return claim if r == 0 else claim.replace(" ", " " * (r + 1), 1)


def load_test(client: httpx.Client, url: str, claims: list[str], method: str, n: int, first_repeat: int = 0) -> dict:
    latency, compute, errors = [], [], []
    for i in range(n):
        claim = variant(claims[i % len(claims)], first_repeat + i // len(claims))
        t = time.perf_counter()
        try:
            r = client.get(url + "/api/check", params={"claim": claim, "method": method})
            data = r.json()
            ok = r.status_code == 200 and isinstance(data.get("hits"), list)
        except (httpx.HTTPError, ValueError) as exc:
            ok, data, r = False, {}, exc
        latency.append((time.perf_counter() - t) * 1000)
        if ok:
            compute.append(data["timing_ms"])
        else:
            errors.append(str(getattr(r, "status_code", r)))
    return {"method": method, "n": n, "latency": latency, "compute": compute, "errors": errors,
            "seconds": sum(latency) / 1000}


def same_results(client: httpx.Client, url: str, claims: list[str], methods: dict, n: int = 10) -> bool:
    """Does a variant (extra spaces) give the same passages and verdict as the claim itself?"""
    for m in methods["methods"]:
        for claim in claims[:n]:
            a, b = (client.get(url + "/api/check", params={"claim": c, "method": m}).json()
                    for c in (claim, variant(claim, 1)))
            if ([h["id"] for h in a["hits"]], a["verdict"]) != ([h["id"] for h in b["hits"]], b["verdict"]):
                return False
    return True


def serve_phase(args, claims: list[str]) -> tuple[dict, list[dict]]:
    extra = ["--run", str(args.run)]
    if args.claims:
        extra += ["--dev-claims", str(args.claims)]
    if args.index:
        extra += ["--index", str(args.index)]
    t0 = time.perf_counter()
    log = Path(tempfile.mkstemp(prefix="bench-serve-", suffix=".log")[1])
    try:
        with serving(extra, log, cwd=ROOT, timeout=600) as (url, proc):
            info = {"startup_s": time.perf_counter() - t0}
            with httpx.Client(timeout=30) as client:
                methods = client.get(url + "/api/methods").json()
                info.update(methods=methods, same_results=same_results(client, url, claims, methods))
                load_test(client, url, claims, "best", args.warmup, first_repeat=20)  # warm-up, not reported
                runs = [load_test(client, url, claims, "best", args.requests, first_repeat=1)]
                for m in methods["methods"]:
                    load_test(client, url, claims, m, min(args.warmup, 20), first_repeat=30)
                    runs.append(load_test(client, url, claims, m, args.per_method, first_repeat=40))
            info["rss_mib"] = rss_mib(proc.pid)
            return info, runs
    except ServerFailed as exc:
        sys.exit(f"bench_serve: {exc}")
    finally:
        log.unlink(missing_ok=True)


def breakdown(index: Path, model: Path, claims: list[str]) -> list[tuple[str, dict]]:
    """Per retriever, in-process: retrieve, rank(depth 100) and the whole check, ms per claim
    (each scores the claim afresh: no retriever keeps a claim's scores)."""
    from factcheck.formats.claims import Claim
    from factcheck.serve.retriever_set import load_retriever_set
    systems = load_retriever_set(index, model)
    out = []
    for m in systems.methods:
        system = systems.by_method[m]
        r, k, c = [], [], []
        for text in claims:
            t = time.perf_counter()
            system.retriever.retrieve([text])
            r.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            system.retriever.rank([text], 100)
            k.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            system.check([Claim("c", text)])
            c.append((time.perf_counter() - t) * 1000)
        out.append((m, {"retrieve": r, "rank": k, "check": c}))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="output directory of `factcheck run` (e.g. on ../shared/data)")
    ap.add_argument("--requests", type=int, default=1000, help="requests with the chosen retriever (default 1000)")
    ap.add_argument("--per-method", type=int, default=200, help="requests per retriever (default 200)")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--index", type=Path, default=None,
                    help="tag index, for a run made with `factcheck run --index` (default: RUN/index)")
    ap.add_argument("--claims", type=Path, default=None, help="claims to send (default: the run's dev claims)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-serve.md")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the in-process per-retriever timing")
    args = ap.parse_args(argv)

    claims_path, claims = dev_claims(args.run, args.claims)
    load_before = os.getloadavg()
    info, runs = serve_phase(args, claims)
    parts = [] if args.no_breakdown else breakdown(args.index or args.run / "index", args.run / "model", claims)
    load_after = os.getloadavg()
    metrics = json.loads((args.run / "metrics.json").read_text())
    best = info["methods"]["best"]
    main_run = runs[0]

    lines = [
        "# Explain app: /api/check under load",
        "",
        f"`python -m benchmarks.serve {' '.join(sys.argv[1:])}` — server `factcheck serve --run {args.run}"
        + (f" --index {args.index}" if args.index else "") + "` "
        f"({metrics['run'].get('passages')} passages, {metrics['run'].get('evidence')}); "
        f"claims: the {len(claims)} claims of `{claims_path}`, cycled (repeats sent as whitespace variants so "
        "no per-claim cache answers them; same passages and verdict as the original: "
        f"{'verified' if info['same_results'] else 'NOT the same, see the script'}); one keep-alive client on "
        "loopback, one request at a time, after a warm-up.",
        "",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "(the machine is shared: other processes compete for the 2 cores).",
        "",
        f"**{main_run['n']} requests, retriever `best` (= {best}): "
        f"p50 {statistics.median(main_run['latency']):.1f} ms, "
        f"p99 {pct(main_run['latency'], 99):.1f} ms, {len(main_run['errors'])} errors.**",
        "",
        "## Latency per request (ms), client side",
        "",
        "| retriever | requests | errors | p50 | p99 | mean | max | server compute p50 | requests/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        name = f"best ({best})" if run["method"] == "best" else run["method"]
        comp = f"{statistics.median(run['compute']):.1f}" if run["compute"] else "—"
        lines.append(f"| {name} | {run['n']} | {len(run['errors'])} | {summary(run['latency'])} | {comp} | "
                     f"{run['n'] / run['seconds']:.0f} |")
    if parts:
        lines += [
            "",
            "## Where the time goes (in-process, ms per claim, p50 / p99)",
            "",
            "`retrieve` = evidence + explanation; `rank` = the depth-100 ranking the explanation also "
            "records, timed right after `retrieve` (the reranker reuses its memoised scoring, hence ~0); "
            "`check` = `FactChecker.check` on one claim (retrieve + rank + classifier), caches cleared first.",
            "",
            "| retriever | retrieve | rank (depth 100) | whole check | rest (classifier, texts): p50 |",
            "|---|---|---|---|---|",
        ]
        for m, d in parts:
            rest = statistics.median(c - r - k for c, r, k in zip(d["check"], d["retrieve"], d["rank"]))
            lines.append("| " + " | ".join([m] + [f"{statistics.median(d[k]):.1f} / {pct(d[k], 99):.1f}"
                                                   for k in ("retrieve", "rank", "check")]) + f" | {rest:.1f} |")
        slow = max(parts, key=lambda p: statistics.median(p[1]["check"]))
        lines += ["", f"Slowest retriever per check: **{slow[0]}** "
                      f"(p50 {statistics.median(slow[1]['check']):.1f} ms per check)."]
    unavailable = info["methods"].get("unavailable") or {}
    lines += [
        "",
        f"Server start-up (index + every retriever loaded, warm-up) {info['startup_s']:.1f} s; "
        f"server RSS after the test {info['rss_mib']:.0f} MiB. Retrievers loaded: "
        f"{', '.join(info['methods']['methods'])}"
        + (f"; not available: {', '.join(f'{k} ({v})' for k, v in unavailable.items())}" if unavailable else "")
        + "."
        + ("" if "rerank" in info["methods"]["methods"] or "rerank" in unavailable else
           " The model directory has no reranker (the run did not train one), so `rerank` is not measured."),
    ]
    write_report(args.out, lines)
    return 1 if any(run["errors"] for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
