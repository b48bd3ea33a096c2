"""The online half's cost curve: ``run``, ``retrieve``, ``predict`` and ``serve`` at 1.2M -> 10M passages.

Writes reports/bench-online.md (and the raw figures as .json beside it). For each
knowledge source (``proxy`` = the course's 316,312 passages; N = the bench corpus of
``benchmarks/make_corpus.py``, every gold id kept, N >= 1,208,827):

* ``factcheck run`` (tagging included), traced: per stage of the run's own timing list
  the wall time, the process tree's CPU and its peak RSS (sampled every 0.2 s);
* with that run's index and model: ``factcheck retrieve --method bm25|tags|rerank`` over
  the dev claims (BM25 k1 0.9, b 0.4 with its cache removed first, so the index build is
  included; the reranker after one unmeasured warm-up, which builds its term statistics
  if the index has none),
  ``factcheck predict`` over the dev claims and -- with ``--claims N`` -- over N claims
  drawn from the corpus's own sentences (for cost only: they have no labels), each as
  wall, CPU and tree peak RSS;
* ``factcheck serve --run``: start-up until ``/healthz`` answers, RSS, and ``/api/check``
  p50/p99 with the model's chosen retriever (repeats sent as whitespace variants so no
  per-claim cache answers them, as ``benchmarks/serve.py`` does).

Every figure is a median of ``--repeats`` runs and is also given as a ratio to the same
run's figure at the first size (1.2M by default): machine speed varies from run to run
on a shared machine, ratios within one invocation do not. The report checks the scaling
targets (each stage's wall and peak at most 1.2x linear from the first to the last size)
and the absolute ones it has data for.

    python -m benchmarks.online --sizes 1208827,5000000,10000000          # needs a quiet machine
    python -m benchmarks.online --sizes proxy,1208827 --repeats 1 --claims 100000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.run import corpus_of, data_dir
from harness.measure import ROOT, SHARED, machine, measure, per_stage, repeated, traced, write_report

STAGE = re.compile(r"^\[\s*[\d.]+s\] (.+?) \.\.\.\s*$")
START = "start-up (imports, before the first stage)"
MIB = 2 ** 20


def stage_of(line: str):
    m = STAGE.match(line)
    return m.group(1) if m else None


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "factcheck", *map(str, args)]


def sample_claims(corpus: Path, count: int, seed: int = 90042) -> Path:
    """``count`` passages of ``corpus`` as unlabelled course-format claims (cost only)."""
    path = ROOT / "bench" / f"claims-{corpus.stem}-{count}.json"
    if path.is_file():
        return path
    import numpy as np
    with open(corpus, encoding="utf-8") as fh:
        texts = [t for t in json.load(fh).values() if t.strip()]  # a claim must say something
    rows = np.sort(np.random.default_rng(seed).choice(len(texts), size=min(count, len(texts)), replace=False))
    claims = {f"sample-{i}": {"claim_text": texts[r][:500]} for i, r in enumerate(rows.tolist())}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(claims), encoding="utf-8")
    tmp.replace(path)
    return path


def bench_run(size: str, repeats: int, keep: Path) -> dict:
    corpus, n = corpus_of(size)
    return {"n": n, **trace_runs(data_dir(corpus), repeats, keep)}


def trace_runs(data: Path, repeats: int, keep: Path, scratch: Path = ROOT / "bench",
               single_over: float | None = None) -> dict:
    """``factcheck run --data-dir DATA`` ``repeats`` times (see
    :func:`harness.measure.repeated` for ``single_over``), traced: per stage of the run's
    timing list the median wall, tree CPU and tree peak RSS; the last run's directory is
    moved to ``keep``. A failed run raises :class:`harness.measure.CommandFailed`."""
    def once() -> dict:
        out = Path(tempfile.mkdtemp(prefix="bench-online-", dir=scratch)) / "run"
        try:
            trace = traced(cli("run", "--data-dir", data, "--out", out), stage_of)
            rows = per_stage(trace, START)
            timings = json.loads((out / "metrics.json").read_text())["run"]["timings"]
            shutil.rmtree(keep, ignore_errors=True)  # the latest run's directory is the one kept
            shutil.move(str(out), keep)
            return {"wall_s": trace["wall_s"], "cpu_s": trace["samples"][-1][2] if trace["samples"] else 0.0,
                    "peak_rss": max((s[1] for s in trace["samples"]), default=0), "stages": rows, "timings": timings}
        finally:
            shutil.rmtree(out.parent, ignore_errors=True)

    runs = repeated(once, repeats, single_over)
    names = [r["stage"] for r in runs[0]["stages"]]
    stages = {}
    for name in names:
        got = [next((s for s in r["stages"] if s["stage"] == name), None) for r in runs]
        got = [g for g in got if g is not None]
        stages[name] = {k: statistics.median((g[k] or 0) for g in got) for k in ("wall_s", "cpu_s", "peak_rss")}
    return {"wall_s": statistics.median(r["wall_s"] for r in runs),
            "cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "peak_rss": statistics.median(r["peak_rss"] for r in runs), "stages": stages,
            "timings_complete": all(set(r["timings"]) >= set(names[1:]) for r in runs),
            "runs": [{k: r[k] for k in ("wall_s", "cpu_s", "peak_rss", "load")} for r in runs]}


def measure_command(cmd: list, repeats: int, tree: Path = ROOT, prepare=None,
                    single_over: float | None = None, alongside=None) -> dict:
    """``cmd`` measured ``repeats`` times (``prepare()`` before each; ``single_over`` as in
    :func:`harness.measure.repeated`): the median wall, tree CPU and tree peaks (summed RSS,
    and summed PSS and anonymous memory where /proc gives them), each run's wall and load
    averages. With ``alongside``, each run is inside ``with alongside() as pids`` (a fresh
    cluster, say), the trees of ``pids`` measured with the command's (:func:`harness.measure.measure`).
    A failed run raises :class:`harness.measure.CommandFailed`."""
    def once() -> dict:
        if prepare is not None:
            prepare()
        if alongside is None:
            return measure(cmd, cwd=tree)
        with alongside() as pids:
            return measure(cmd, cwd=tree, alongside=pids)

    runs = repeated(once, repeats, single_over)
    out = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "tree_peak_rss")}
    for k in ("tree_peak_pss", "tree_peak_anon"):
        out[k] = None if any(r.get(k) is None for r in runs) else statistics.median(r[k] for r in runs)
    out["runs"] = [r["wall_s"] for r in runs]
    out["loads"] = [r["load"] for r in runs]
    return out


def bench_commands(run: Path, repeats: int, claims_file: Path | None, tree: Path = ROOT,
                   only: list[str] | None = None) -> dict:
    run = run.resolve()  # the commands may run in another tree's directory
    index, model = run / "index", run / "model"
    dev = SHARED / "dev-claims.json"
    out = {}
    work = Path(tempfile.mkdtemp(prefix="bench-online-cmd-", dir=ROOT / "bench"))
    commands = {
        "retrieve bm25": cli("retrieve", "--index", index, "--claims", dev, "--out", work / "p.json",
                             "--method", "bm25", "--k1", "0.9", "--b", "0.4"),
        "retrieve tags": cli("retrieve", "--index", index, "--claims", dev, "--out", work / "p.json", "--method", "tags"),
        "retrieve rerank": cli("retrieve", "--index", index, "--claims", dev, "--out", work / "p.json",
                               "--method", "rerank", "--rerank-model", model / "rerank.skops"),
        "predict dev": cli("predict", "--index", index, "--model", model, "--claims", dev, "--out", work / "p.json"),
    }
    if claims_file is not None:
        commands["predict sample"] = cli("predict", "--index", index, "--model", model, "--claims", claims_file,
                                         "--out", work / "p.json", "--method", "bm25")
        commands["predict sample, 2 jobs"] = commands["predict sample"] + ["--jobs", "2"]
    if only:
        unknown = sorted(set(only) - set(commands))
        if unknown:
            sys.exit(f"bench_online: --only names no command: {', '.join(unknown)} (choose from {', '.join(commands)})")
        commands = {k: v for k, v in commands.items() if k in only}
    try:
        # Warm-up, not measured: the reranker's term statistics are a cache of the index
        # (built once per index, by the run that trained it); the figures are of a warm index.
        if "retrieve rerank" in commands:
            measure(commands["retrieve rerank"], cwd=tree)
        for name, cmd in commands.items():
            def prepare(name=name):
                if name == "retrieve bm25":  # the index build included: no cached weights for (0.9, 0.4)
                    shutil.rmtree(index / "bm25" / "lucene-k1_0.9-b_0.4", ignore_errors=True)
                for p in work.glob("p.*"):
                    p.unlink()
            out[name] = measure_command(cmd, repeats, tree, prepare)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def bench_serve(run: Path, requests: int, repeats: int, tree: Path = ROOT) -> dict:
    from benchmarks.serve import serve_once
    results = [serve_once(run.resolve(), requests, cwd=tree, timeout=1800) for _ in range(repeats)]
    out = {k: statistics.median(r[k] for r in results) for k in ("startup_s", "rss_start_mib", "rss_end_mib",
                                                                  "anon_end_mib", "file_end_mib", "p50", "p99",
                                                                  "errors")}
    out["best"] = results[-1]["best"]
    return out


def ratio(value, base) -> str:
    return f"{value / base:.2f}" if base else "–"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1208827,5000000,10000000",
                    help="knowledge sources, comma-separated: 'proxy' and/or bench corpus sizes >= 1208827; "
                         "ratios are to the first")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300, help="/api/check requests per serve run")
    ap.add_argument("--claims", type=int, default=0,
                    help="also predict this many corpus sentences as claims at the first size >= 1.2M (0: no)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-online.md")
    ap.add_argument("--use-run", type=Path, default=None,
                    help="skip `factcheck run`: measure the commands and serve on this run directory (one size)")
    ap.add_argument("--only", default=None,
                    help="measure only these commands, comma-separated (e.g. 'predict sample'; default: all)")
    ap.add_argument("--no-serve", action="store_true", help="skip `factcheck serve`")
    ap.add_argument("--tree", type=Path, default=ROOT,
                    help="source tree whose factcheck the commands run (a before/after comparison; default: this one)")
    args = ap.parse_args(argv)
    (ROOT / "bench").mkdir(exist_ok=True)
    sizes = args.sizes.split(",")
    load_before = os.getloadavg()
    results = {}
    for size in sizes:
        keep = ROOT / "bench" / f"online-run-{size}"
        corpus, n = corpus_of(size)
        if args.use_run:
            keep, r = args.use_run, {"n": n, "wall_s": 0.0, "cpu_s": 0.0, "peak_rss": 0, "stages": {},
                                     "timings_complete": True, "runs": []}
        else:
            r = bench_run(size, args.repeats, keep)
        sample = (sample_claims(corpus, args.claims) if args.claims and n >= 1_200_000
                  and not any("predict sample" in x.get("commands", {}) for x in results.values()) else None)
        r["commands"] = bench_commands(keep, args.repeats, sample, args.tree,
                                       args.only.split(",") if args.only else None)
        if sample is not None:
            r["sample_claims"] = args.claims
        r["serve"] = None if args.no_serve else bench_serve(keep, args.requests, args.repeats, args.tree)
        results[size] = r
        args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    load_after = os.getloadavg()
    write_report(args.out, report(args, results, load_before, load_after))
    return 0


def report(args, results: dict, load_before, load_after) -> list[str]:
    sizes = list(results)
    base = results[sizes[0]]
    lines = [
        "# The online half at scale: `run`, `retrieve`, `predict`, `serve`", "",
        f"Machine: {machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after.", "",
        f"Command: `python -m benchmarks.online --sizes {args.sizes} --repeats {args.repeats} --requests "
        f"{args.requests} --claims {args.claims}"
        + (f" --use-run {args.use_run}" if args.use_run else "") + (f" --tree {args.tree}" if args.tree != ROOT else "")
        + (f" --only '{args.only}'" if args.only else "") + (" --no-serve" if args.no_serve else "")
        + "`. Knowledge sources: `proxy` = the course's 316,312 passages; N = "
        "`benchmarks/make_corpus.py` corpora (the proxy plus synthetic filler, every gold id kept); claims: the "
        f"course files. Each figure is the median of {args.repeats} fresh runs; peak RSS is the whole process "
        "tree's (sampled; 1 GiB = 2^30 bytes); `x first` is the ratio to the same invocation's figure at "
        f"{base['n']:,} passages, `linear` the ratio of the sizes.", "",
        "## `factcheck run`, per stage", "",
    ]
    if args.use_run:
        lines += [f"Not measured: `--use-run` measured the commands on the run directory `{args.use_run}`.", ""]
    else:
        lines += run_table(results)
    lines += command_and_serve_tables(results)
    lines += ["", "## Targets", ""] + targets(results)
    return lines


def run_table(results: dict) -> list[str]:
    """The run's stages (rows) at each size (columns); a size whose run failed (``failed``:
    its exit status) shows it in the whole-run row."""
    done = {s: r for s, r in results.items() if "failed" not in r}
    if not done:
        return ["Every run failed: " + ", ".join(f"{r['n']:,}: {r['failed']}" for r in results.values()), ""]
    sizes = list(results)
    base = done[next(iter(done))]
    lines = []
    stage_names = list(dict.fromkeys(k for s in done for k in done[s]["stages"]))
    lines += ["| stage | " + " | ".join(f"{results[s]['n']:,}: wall s / CPU s / peak MiB" for s in sizes) +
              " | wall x first | peak x first |", "|---|" + "---|" * (len(sizes) + 2)]
    for name in stage_names:
        cells, last, first = [], None, base["stages"].get(name)
        for s in sizes:
            st = results[s].get("stages", {}).get(name)
            cells.append("–" if st is None else f"{st['wall_s']:.1f} / {st['cpu_s']:.1f} / {st['peak_rss'] / MIB:,.0f}")
            last = st or last
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio(last['wall_s'], first['wall_s']) if first else '–'} | "
                     f"{ratio(last['peak_rss'], first['peak_rss']) if first and first['peak_rss'] else '–'} |")
    last = done[list(done)[-1]]
    lines += ["| **whole run** | " + " | ".join(
        f"failed ({results[s]['failed']})" if "failed" in results[s] else
        f"**{results[s]['wall_s']:.0f} / {results[s]['cpu_s']:.0f} / {results[s]['peak_rss'] / MIB:,.0f}**" for s in sizes)
        + f" | {ratio(last['wall_s'], base['wall_s'])} | {ratio(last['peak_rss'], base['peak_rss'])} |", "",
        "Every run's timing list named every stage: " + ("yes" if all(done[s]["timings_complete"] for s in done)
                                                          else "NO"), ""]
    return lines


def command_and_serve_tables(results: dict) -> list[str]:
    return command_table(results) + ["", "## `factcheck serve --run`", ""] + serve_table(results)


def command_table(results: dict) -> list[str]:
    sizes = list(results)
    base = results[sizes[0]]
    lines = ["## Commands on the run's index and model", "",
              "| command | " + " | ".join(f"{results[s]['n']:,}: wall s / CPU s / peak MiB" for s in sizes) +
              " | wall x first | peak x first |", "|---|" + "---|" * (len(sizes) + 2)]
    for name in base["commands"]:
        cells = []
        for s in sizes:
            c = results[s]["commands"].get(name)
            cells.append("–" if c is None else f"{c['wall_s']:.1f} / {c['cpu_s']:.1f} / {c['tree_peak_rss'] / MIB:,.0f}")
        last = results[sizes[-1]]["commands"].get(name)
        first = base["commands"][name]
        lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {ratio(last['wall_s'], first['wall_s']) if last else '–'} | "
                     f"{ratio(last['tree_peak_rss'], first['tree_peak_rss']) if last else '–'} |")
    return lines


def serve_table(results: dict) -> list[str]:
    """``serve`` at each size: ``results[size]["serve"]`` is :func:`bench_serve`'s figures, None
    (not measured) or ``{"failed": why}``."""
    lines = ["| passages | start-up s | RSS after start-up MiB | RSS after requests MiB (anon + file) | retriever "
              "| /api/check p50 ms | p99 ms | errors |", "|---|---|---|---|---|---|---|---|"]
    for s in results:
        v = results[s]["serve"]
        if v is None:
            lines.append(f"| {results[s]['n']:,} | not measured (--no-serve) | | | | | | |")
            continue
        if "failed" in v:
            lines.append(f"| {results[s]['n']:,} | failed: {v['failed']} | | | | | | |")
            continue
        lines.append(f"| {results[s]['n']:,} | {v['startup_s']:.1f} | {v['rss_start_mib']:,.0f} | {v['rss_end_mib']:,.0f} "
                     f"({v['anon_end_mib']:,.0f} + {v['file_end_mib']:,.0f}) | "
                     f"{v['best']} | {v['p50']:.1f} | {v['p99']:.1f} | {v['errors']:.0f} |")
    return lines


def stage_scaling(first: dict, last: dict, line) -> None:
    """The scaling check of each run stage, first size to last: wall and peak at most 1.2x
    linear; ``line(ok, text)`` records each (a stage under half a second is not timed)."""
    linear = last["n"] / first["n"]
    for name, st in last.get("stages", {}).items():
        f = first.get("stages", {}).get(name)
        if not f or name == START:
            continue
        w = st["wall_s"] / f["wall_s"] if f["wall_s"] > 0.5 else None
        p = st["peak_rss"] / f["peak_rss"] if f["peak_rss"] else None
        if w is not None:
            line(w <= 1.2 * linear, f"run stage '{name}' wall {first['n']:,} -> {last['n']:,}: x{w:.2f} "
                                    f"(limit 1.2 x {linear:.2f} = {1.2 * linear:.2f})")
        if p is not None:
            line(p <= 1.2 * linear, f"run stage '{name}' peak RSS: x{p:.2f} (limit {1.2 * linear:.2f})")


def targets(results: dict) -> list[str]:
    sizes = list(results)
    first, last = results[sizes[0]], results[sizes[-1]]
    out = []

    def line(ok: bool, text: str):
        out.append(f"- {text}: **{'met' if ok else 'missed'}**")

    if len(sizes) > 1:
        stage_scaling(first, last, line)
    for s in sizes:
        r = results[s]
        if r["n"] >= 10_000_000:
            line(r["wall_s"] <= 25 * 60, f"`factcheck run` at {r['n']:,}: {r['wall_s'] / 60:.1f} min (<= 25)")
            line(r["peak_rss"] <= 12e9, f"`factcheck run` at {r['n']:,}: {r['peak_rss'] / 1e9:.2f} GB tree peak (<= 12)")
            v = r["serve"]
            if v is not None:
                line(v["startup_s"] <= 30, f"`serve` at {r['n']:,} starts in {v['startup_s']:.1f} s (<= 30)")
                line(max(v["rss_start_mib"], v["rss_end_mib"]) * MIB <= 6e9,
                     f"`serve` at {r['n']:,} RSS {max(v['rss_start_mib'], v['rss_end_mib']) * MIB / 1e9:.2f} GB (<= 6)")
                line(v["p50"] <= 50, f"`/api/check` at {r['n']:,} ({v['best']}) p50 {v['p50']:.1f} ms (<= 50)")
        if 4_900_000 <= r["n"] <= 5_100_000 and "retrieve bm25" in r["commands"]:
            c = r["commands"]["retrieve bm25"]
            line(c["tree_peak_rss"] <= 3e9, f"`retrieve --method bm25` at {r['n']:,}: {c['tree_peak_rss'] / 1e9:.2f} GB "
                                            "peak, index build included (<= 3)")
        for name in ("predict sample", "predict sample, 2 jobs"):
            if name in r["commands"]:
                c = r["commands"][name]
                rate = r["sample_claims"] / c["wall_s"]
                line(rate >= 200, f"`{name}` (BM25 retriever and reader) over {r['sample_claims']:,} claims at "
                                  f"{r['n']:,} passages: {rate:.0f} claims/s including start-up ({c['wall_s']:.0f} s, "
                                  f"{c['tree_peak_rss'] / 1e9:.2f} GB tree peak) (>= 200)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
