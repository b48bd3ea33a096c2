"""FEVER's size on one machine and on a Dask cluster: tag, retrieve, run, predict and serve from 1.2M to 25M sentences.

Writes reports/bench-fever-size.md (and the raw figures as .json beside it), again after every
stage, so an invocation stopped part-way keeps every figure it measured. For each size N,
the FEVER-shaped data of ``benchmarks/make_fever.py`` (``WORK/fever-N``: wiki-pages and
train/dev/test claims at ``--claim-scale`` times FEVER's counts; made when missing, reused
when present and made with the same arguments) is measured in eight stages, each as wall
seconds, the process tree's CPU seconds and its peak RSS (sampled), with the 1-minute load
average before and after every run beside it (``predict``'s peak also as the tree's summed PSS
and summed anonymous memory: :mod:`harness.measure` says how they differ):

1. ``factcheck tag`` of the wiki-pages folder (``--jobs 2``);
2. ``factcheck retrieve --method bm25 --k1 0.9 --b 0.4`` over the dev claims on that index,
   its whole BM25 cache removed first (the build, counting pass included, is measured);
3. the open mode's first stage on that index: ``factcheck tag --mode open --jobs 2`` (the
   tagging found done; the static vectors and their nearest-neighbour index built), their size
   on disk, then the product's dense search of the dev claims one at a time in a process of
   its own (``python -m benchmarks.ann --search``: p50/p99, recall@100 against exact search);
4. ``factcheck run --data-dir`` on the FEVER layout (tagging included), traced per stage of
   the run's own timing list (``benchmarks/online.py``);
5. ``factcheck predict --jobs 2`` over the dev claims with that run's index and model
   (claims/s, start-up included);
6. ``factcheck serve --run``: start-up, RSS (anonymous = private, file-backed = the mapped
   index) and ``/api/check`` p50/p99 (``benchmarks/serve.py``);
7. ``factcheck tag --backend dask --scheduler ADDRESS`` of the same folder, on a cluster of 2
   single-threaded worker processes reached by its address, its index compared with stage 1's:
   the same ``manifest.json`` bytes, and ``factcheck verify`` finds every file's sha256 the
   manifest's (so every file has the same bytes);
8. ``factcheck predict --backend dask --scheduler ADDRESS`` over the dev claims with stage 4's
   index and model on such a cluster, its predictions and ``.explain.json`` compared byte for
   byte with stage 5's.

The cluster is the one ``docs/cluster.md`` starts (:mod:`harness.cluster`): ``dask scheduler``
and ``dask worker ADDRESS --nworkers 2 --nthreads 1``, separate processes, started afresh and
untimed before every run (no run finds workers warm from the one before: predict's workers keep
the index and model they opened) and stopped after it. Its two process trees (the scheduler;
the worker command, its nannies and worker processes) are sampled with the command's, so the
Dask stages' peaks are summed over the driver, the scheduler, the nannies and the workers, and
their CPU is the driver's and the cluster's while the command runs. Where the Dask output does
not have the one-machine bytes, the report says so ("same bytes: **no**") and goes on.

A figure is the median of ``--repeats`` runs when a run takes under 10 minutes, else one run.
Every figure is also a ratio to the same invocation's figure at the first size (1.2M by
default), and the scaling check asks every stage to grow no faster than 1.2x linear from the
first size to the last. A stage that fails (out of memory, say) is reported with its exit
status and the next one runs. The data are synthetic: the figures are for cost, not quality.

    python -m benchmarks.fever_size                                  # 1.2M, 5M, 10M, 25M: a quiet machine, many hours
    python -m benchmarks.fever_size --sizes 3000,6000 --claim-scale 0.001 --repeats 1 \\
        --source data/demo/evidence.json --work /tmp/fs --out /tmp/fs/report.md   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import make_fever
from benchmarks.make_corpus import DEFAULT_SOURCE
from benchmarks.online import MIB, bench_serve, cli, measure_command, ratio, run_table, stage_scaling, trace_runs
from factcheck.errors import InputError
from factcheck.formats.claims import explanations_path
from factcheck.formats.files import write_json_atomic
from factcheck.tagging.ann import ANN_FILE, MIN_PASSAGES
from factcheck.tagging.store import MANIFEST, VECTORS_DIR
from harness.cluster import address, dask_cluster
from harness.measure import ROOT, SINGLE_RUN_S, CommandFailed, machine, measure, write_report
from harness.serving import free_port

SIZES = "1208827,5000000,10000000,25000000"
DEV = make_fever.FILES["dev"]
SEED = 2024  # make_fever's default
DASK_WORKERS = 2
# The stages of the summary table, in order; "run" is the whole `factcheck run`.
STAGES = ("tag", "retrieve bm25", "open vectors", "run", "predict dev", "serve", "tag dask", "predict dask")
TITLES = {"tag": "`factcheck tag` (wiki-pages, `--jobs 2`)",
          "retrieve bm25": "`retrieve --method bm25`, BM25 build included",
          "open vectors": "`factcheck tag --mode open`: static vectors and their nearest-neighbour index",
          "run": "`factcheck run --data-dir` (whole run)",
          "predict dev": "`predict --jobs 2` over the dev claims",
          "serve": "`serve --run` start-up (peak: RSS after the requests)",
          "tag dask": f"`factcheck tag` on a Dask cluster ({DASK_WORKERS} workers, by address)",
          "predict dask": f"`predict` over the dev claims on a Dask cluster ({DASK_WORKERS} workers)"}
SEARCH_CLAIMS = 1000  # dev claims the open first stage's search is timed on, one at a time ...
RECALL_CLAIMS = 100  # ... the first of them also checked against exact search (one pass over every vector)


def failure(exc: BaseException) -> dict:
    """A failed stage as the report shows it: the exit status and the last line it printed."""
    status = exc.status if isinstance(exc, CommandFailed) else None
    tail = (exc.tail if isinstance(exc, CommandFailed) else str(exc)).strip().splitlines()
    why = f"status {status}" + (f" (killed by signal {-status})" if status is not None and status < 0 else "")
    return {"failed": why if status is not None else f"error ({type(exc).__name__})",
            "error": tail[-1][:300] if tail else ""}


def dataset(n: int, claim_scale: float, seed: int, source: Path, work: Path) -> tuple[Path, dict]:
    """``WORK/fever-N`` (``-claimsS`` when the claim scale is not 1) and its counts: reused when
    its record says it was made with these arguments, made by make_fever when missing."""
    name = f"fever-{n}" + ("" if claim_scale == 1 else f"-claims{claim_scale:g}")
    folder, record = work / name, work / f"{name}.args.json"
    wanted = {"sentences": n, "claim_scale": claim_scale, "seed": seed, "source": str(source.resolve())}
    if folder.exists() or folder.is_symlink():
        try:
            made = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # missing or unreadable: not known to match
            made = None
        if not isinstance(made, dict) or made.get("arguments") != wanted or "written" not in made:
            raise InputError(folder, None, f"exists but was not made with {wanted} (its record {record.name} "
                                           "says otherwise or is missing); remove it or choose another folder",
                             param="work")
        return folder, made["written"]
    written = make_fever.write(folder, n, source, seed, claim_scale)
    write_json_atomic(record, {"arguments": wanted, "written": written})
    return folder, written


def same_index(manifest: bytes, index: Path) -> str:
    """"yes" when ``index`` has the one-machine index's ``manifest`` bytes and ``factcheck verify``
    finds every file's sha256 the manifest's; else "no: " and why."""
    if (index / MANIFEST).read_bytes() != manifest:
        return f"no: {MANIFEST} differs"
    proc = subprocess.run(cli("verify", index), cwd=ROOT, capture_output=True, text=True)
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return "yes" if proc.returncode == 0 else f"no: factcheck verify: {lines[-1] if lines else proc.returncode}"


def same_files(*pairs: tuple[Path, Path]) -> str:
    """"yes" when every (one machine, Dask) pair of files has the same bytes; else "no: " and the first that differs."""
    for one, other in pairs:
        if one.read_bytes() != other.read_bytes():
            return f"no: {other.name} differs"
    return "yes"


def on_cluster(port: int, scratch: Path):
    """The ``alongside`` of :func:`benchmarks.online.measure_command`: a fresh cluster per run."""
    return lambda: dask_cluster(port, DASK_WORKERS, scratch)


PENDING = "not measured yet: the invocation was still running"
NOT_ASKED = "not measured: not in --stages, and no earlier figure kept"
# The stages whose output a stage reads, every one listed (closed under itself: predict dask
# reads predict dev's output and so the run's too): run for it when --stages leaves them out.
NEEDS = {"retrieve bm25": ("tag",), "open vectors": ("tag",), "tag dask": ("tag",), "predict dev": ("run",),
         "serve": ("run",), "predict dask": ("predict dev", "run")}


def open_first_stage(data: Path, index: Path, dev: Path, repeats: int, scratch: Path) -> dict:
    """The open mode's first stage on the tagged ``index``: ``factcheck tag --mode open`` again
    (the tagging found done, the wordllama vectors and their nearest-neighbour index built, as
    many times as ``repeats`` says, the vectors removed before each), their size on disk, and
    the product's dense search of the dev claims (:func:`benchmarks.ann.product_search`, in a
    process of its own, measured)."""
    vectors = index / VECTORS_DIR
    got = measure_command(cli("tag", data / "wiki-pages", "--out", index, "--mode", "open", "--jobs", 2), repeats,
                          prepare=lambda: shutil.rmtree(vectors, ignore_errors=True), single_over=SINGLE_RUN_S)
    disk = {"vectors": 0, "ann": 0}
    for f in vectors.iterdir():
        if f.suffix == ".npy":
            disk["vectors"] += f.stat().st_size
        elif f.name == ANN_FILE:
            disk["ann"] += f.stat().st_size
    log, before = scratch / "search.log", os.getloadavg()[0]
    m = measure([sys.executable, "-m", "benchmarks.ann", *map(str, ("--index", index, "--search", "--claims", dev,
                 "--requests", SEARCH_CLAIMS, "--recall-claims", RECALL_CLAIMS))], log=log)
    search = json.loads(log.read_text(encoding="utf-8").strip().splitlines()[-1])
    # The search process's own peak includes the exact pass over every vector (the recall's
    # reference); what the product's search holds is read inside it, after the timed searches.
    return {**got, "disk": disk, "search": {**search, "process_peak_rss": m["tree_peak_rss"],
                                            "load": [before, os.getloadavg()[0]]}}


def bench_size(n: int, data: Path, written: dict, args, work: Path, progress=lambda r: None,
               asked=STAGES, kept: dict | None = None, by: str = "") -> dict:
    """The stages ``asked`` (by default all eight) on the data of ``n`` sentences in ``data``
    (``written``: its counts), each figure marked as measured ``by`` this invocation; the others
    are taken from ``kept`` (an earlier invocation's stages at this size). A stage not asked for
    whose output an asked one reads (the index, the run) runs once, its figures not kept.
    ``progress(r)`` is called after every stage with the figures so far (the stages still to
    run say :data:`PENDING`)."""
    dev = data / DEV
    kept = kept or {}
    r = {"n": n, "data": str(data), "written": written,
         "stages": {name: {"failed": PENDING} if name in asked else kept.get(name, {"failed": NOT_ASKED})
                    for name in STAGES}}
    scratch = Path(tempfile.mkdtemp(prefix=f"fever-size-{n}-", dir=work))
    index, keep, out = scratch / "index", scratch / "run", scratch / "out"
    measured, ran = r["stages"], {}
    here = set(asked) | {need for name in asked for need in NEEDS.get(name, ())}  # and what they read
    manifest = {}  # the one-machine index's, compared with the Dask one's

    def times(name: str) -> int:
        return args.repeats if name in asked else 1

    def stage(name: str, fn) -> None:
        if name not in here:
            return
        failed = [need for need in NEEDS.get(name, ()) if "failed" in ran[need]]
        if failed:
            ran[name] = {"failed": f"not run: {failed[0]} failed"}
        else:
            try:
                ran[name] = fn()
            except (SystemExit, Exception) as exc:  # a failed command or server: on with the next stage
                ran[name] = failure(exc)
        if name in asked:
            measured[name] = {**ran[name], **({"by": by} if by else {})}
        print(f"fever_size: {n:,} {name}: {ran[name].get('failed', 'done')}"
              + ("" if name in asked else " (for the stages after it; not kept)"), file=sys.stderr)
        progress(r)

    def clear(*paths: Path):
        def prepare():
            for p in paths:
                if p.is_dir():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
        return prepare

    try:
        def tag():
            got = measure_command(cli("tag", data / "wiki-pages", "--out", index, "--jobs", 2), times("tag"),
                                  prepare=clear(index), single_over=SINGLE_RUN_S)
            manifest["tag"] = (index / MANIFEST).read_bytes()
            return got
        stage("tag", tag)
        stage("retrieve bm25", lambda: measure_command(
            cli("retrieve", "--index", index, "--claims", dev, "--out", out.with_suffix(".json"), "--method", "bm25",
                "--k1", 0.9, "--b", 0.4),
            times("retrieve bm25"), prepare=clear(index / "bm25", out.with_suffix(".json")), single_over=SINGLE_RUN_S))
        stage("open vectors", lambda: open_first_stage(data, index, dev, times("open vectors"), scratch))
        shutil.rmtree(index, ignore_errors=True)  # the run tags its own: one index on disk at a time

        def run():
            got = trace_runs(data, times("run"), keep, scratch=scratch, single_over=SINGLE_RUN_S)
            return {**got, "tree_peak_rss": got["peak_rss"], "loads": [x["load"] for x in got["runs"]]}
        stage("run", run)
        stage("predict dev", lambda: {**measure_command(
            cli("predict", "--index", keep / "index", "--model", keep / "model", "--claims", dev,
                "--out", out.with_suffix(".jsonl"), "--jobs", 2),
            times("predict dev"), prepare=clear(out.with_suffix(".jsonl")), single_over=SINGLE_RUN_S),
            "claims": written["dev"]})

        def serve():
            before = os.getloadavg()[0]
            got = bench_serve(keep, args.requests, times("serve"))
            return {**got, "loads": [[before, os.getloadavg()[0]]]}
        stage("serve", serve)

        def tag_dask():
            on_dask = scratch / "index-dask"
            port = free_port()
            got = measure_command(cli("tag", data / "wiki-pages", "--out", on_dask, "--backend", "dask",
                                      "--scheduler", address(port)), times("tag dask"), prepare=clear(on_dask),
                                  single_over=SINGLE_RUN_S, alongside=on_cluster(port, scratch))
            try:
                return {**got, "same_bytes": same_index(manifest["tag"], on_dask)}
            finally:
                shutil.rmtree(on_dask, ignore_errors=True)
        stage("tag dask", tag_dask)

        def predict_dask():
            mine, theirs = out.with_suffix(".jsonl"), scratch / "out-dask.jsonl"
            port = free_port()
            got = measure_command(cli("predict", "--index", keep / "index", "--model", keep / "model", "--claims", dev,
                                      "--out", theirs, "--backend", "dask", "--scheduler", address(port)),
                                  times("predict dask"), prepare=clear(theirs), single_over=SINGLE_RUN_S,
                                  alongside=on_cluster(port, scratch))
            return {**got, "claims": written["dev"], "same_bytes": same_files(
                (mine, theirs), (explanations_path(mine), explanations_path(theirs)))}
        stage("predict dask", predict_dask)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=SIZES,
                    help=f"sentences in the wiki pages, comma-separated; ratios are to the first (default {SIZES})")
    ap.add_argument("--claim-scale", type=float, default=1.0,
                    help="claims as a fraction of FEVER's 145,449 / 19,998 / 19,998 (default: 1)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per figure when a run takes under 10 minutes")
    ap.add_argument("--requests", type=int, default=300, help="/api/check requests per serve run")
    ap.add_argument("--seed", type=int, default=SEED, help=f"make_fever's seed (default {SEED})")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="make_fever's word model corpus")
    ap.add_argument("--work", type=Path, default=ROOT / "bench",
                    help="where the data (fever-N) and each stage's scratch files go (default: bench/)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-fever-size.md")
    ap.add_argument("--stages", default=None,
                    help="measure only these stages, comma-separated (" + ", ".join(slug(x) for x in STAGES)
                         + "); the others are kept from the figures beside --out (its .json), "
                           "measured at the same sizes on the same data (default: every stage)")
    args = ap.parse_args(argv)
    flags = {"work": "--work", "sentences": "--sizes", "claim_scale": "--claim-scale", "source": "--source",
             "out": "--work"}
    try:
        sizes = [int(x.replace("_", "")) for x in args.sizes.split(",")]
    except ValueError:
        print(f"fever_size: --sizes: not a comma-separated list of numbers: {args.sizes!r}", file=sys.stderr)
        return 2
    if args.repeats < 1:
        print(f"fever_size: --repeats: must be at least 1, got {args.repeats}", file=sys.stderr)
        return 2
    asked = STAGES
    if args.stages is not None:
        names = {slug(x): x for x in STAGES}
        wanted = [x.strip() for x in args.stages.split(",") if x.strip()]
        unknown = [x for x in wanted if x not in names]
        if unknown or not wanted:
            print(f"fever_size: --stages: {'unknown stage ' + repr(unknown[0]) if unknown else 'no stage named'} "
                  f"(the stages: {', '.join(names)})", file=sys.stderr)
            return 2
        asked = tuple(x for x in STAGES if slug(x) in wanted)
    args.work.mkdir(parents=True, exist_ok=True)
    try:  # every size's data first: a bad argument stops the benchmark before it measures anything
        data = {n: dataset(n, args.claim_scale, args.seed, args.source, args.work) for n in sizes}
    except InputError as exc:
        print(f"fever_size: {exc.one_line(flags)}", file=sys.stderr)
        return 2
    earlier = {}
    if asked != STAGES:  # the stages not asked for come from the figures an earlier invocation wrote
        saved = args.out.with_suffix(".json")
        try:
            earlier = json.loads(saved.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"fever_size: {saved}: --stages keeps the other stages from this file, which cannot be read "
                  f"({type(exc).__name__}); run every stage once first", file=sys.stderr)
            return 2
        for n in sizes:
            if not isinstance(earlier.get(str(n)), dict) or earlier[str(n)].get("written") != data[n][1]:
                print(f"fever_size: {saved}: --stages keeps the other stages from this file, which has no figures "
                      f"at {n:,} sentences on this data; run every stage at that size first", file=sys.stderr)
                return 2
    by = f"`{command(args)}` ({time.strftime('%Y-%m-%d', time.gmtime())})"
    load_before = os.getloadavg()
    results = {}

    def progress(r: dict) -> None:
        # The report after every stage: a long invocation stopped part-way keeps every figure it measured.
        results[str(r["n"])] = r
        partial = any(m.get("failed") == PENDING for m in r["stages"].values())
        write_json_atomic(args.out.with_suffix(".json"), results, indent=1)
        write_report(args.out, report(args, results, load_before, os.getloadavg(),
                                      pending=sizes[len(results) - partial:]))

    for n in sizes:
        bench_size(n, *data[n], args, args.work, progress, asked=asked,
                   kept=earlier.get(str(n), {}).get("stages"), by=by)
    return 0


def slug(stage: str) -> str:
    """A stage's name as --stages takes it ("open vectors" -> "open-vectors")."""
    return stage.replace(" ", "-")


def command(args) -> str:
    """The invocation, as the report shows it."""
    return (f"python -m benchmarks.fever_size --sizes {args.sizes} --claim-scale {args.claim_scale:g} "
            f"--repeats {args.repeats} --requests {args.requests}"
            + (f" --seed {args.seed}" if args.seed != SEED else "")
            + (f" --source {args.source}" if args.source != DEFAULT_SOURCE else "")
            + (f" --stages {args.stages}" if args.stages else ""))


def cell(m: dict) -> str:
    """wall s / CPU s / peak MiB (load before -> after), or why there is no figure."""
    if "failed" in m:
        return f"failed: {m['failed']}" + (f" ({m['error']})" if m.get("error") else "")
    if "startup_s" in m:  # serve: start-up, and its resident memory after the requests
        fig = f"{m['startup_s']:.1f} / – / {m['rss_end_mib']:,.0f}"
    else:
        fig = f"{m['wall_s']:.1f} / {m['cpu_s']:.1f} / {m['tree_peak_rss'] / MIB:,.0f}"
    return fig + " (load " + ", ".join(f"{a:.1f}→{b:.1f}" for a, b in m["loads"]) + ")"


def figures(m: dict) -> dict:
    """A stage's comparable figures: wall, CPU and peak bytes (serve: start-up and RSS)."""
    if "failed" in m:
        return {}
    if "startup_s" in m:
        return {"wall": m["startup_s"], "peak": m["rss_end_mib"] * MIB}
    return {"wall": m["wall_s"], "cpu": m["cpu_s"], "peak": m["tree_peak_rss"]}


def report(args, results: dict, load_before, load_after, pending=()) -> list[str]:
    """The report's lines; ``pending`` are sizes the invocation had not measured when it was written."""
    sizes = list(results)
    base = results[sizes[0]]
    first = base["n"]
    claims = base["written"]
    lines = [
        "# FEVER's size on one machine and on a Dask cluster: `tag`, `retrieve`, `run`, `predict`, `serve`", "",
        "**The data are synthetic and these figures are for cost (time, memory), not quality**: "
        "`benchmarks/make_fever.py` draws FEVER-shaped wiki pages and claims from a word model without meaning, "
        "so nothing here says how well FEVER itself is verified.", "",
        f"Machine: {machine()}; load average (1 minute) {load_before[0]:.1f} before, {load_after[0]:.1f} after "
        "the whole invocation, and beside every figure (before→after each run).", "",
        f"Command: `{command(args)}`. Data: `make_fever --sentences N --claim-scale "
        f"{args.claim_scale:g} --seed {args.seed}` (claims at the first size: train {claims['train']:,}, dev "
        f"{claims['dev']:,}, test {claims['test']:,}). A figure is the median of {args.repeats} run(s) where a run "
        f"takes under {SINGLE_RUN_S / 60:.0f} minutes, one run otherwise; peak RSS is the process tree's, sampled "
        f"(1 MiB = 2^20 bytes); `x first` is the ratio to this invocation's figure at {first:,} sentences.", "",
        "| size | sentences | pages | train / dev / test claims |", "|---|---|---|---|",
    ]
    if pending:
        lines[-2:-2] = [f"**Written while the invocation was still running**: not measured yet at "
                        f"{', '.join(f'{n:,}' for n in pending)} sentences.", ""]
    lines[-2:-2] = measured_by(results)
    for s in sizes:
        w = results[s]["written"]
        lines.append(f"| {results[s]['n']:,} | {w['sentences']:,} | {w['pages']:,} | "
                     f"{w['train']:,} / {w['dev']:,} / {w['test']:,} |")
    lines += ["", "## Every stage", "",
              "wall s / CPU s / peak MiB (serve: start-up s / – / RSS MiB after the requests), load before→after "
              "each run.", "",
              "| stage | " + " | ".join(f"{results[s]['n']:,}" for s in sizes) + " |",
              "|---|" + "---|" * len(sizes)]
    for name in STAGES:
        lines.append(f"| {TITLES[name]} | " + " | ".join(cell(results[s]["stages"][name]) for s in sizes) + " |")
    lines += ["", f"## Each stage's cost as a ratio to its cost at {first:,} sentences", "",
              "wall x first / CPU x first / peak x first (serve: start-up and RSS).", "",
              "| stage | " + " | ".join(f"{results[s]['n']:,}" for s in sizes) + " |",
              "|---|" + "---|" * len(sizes),
              "| linear (sentences x first) | " + " | ".join(f"{results[s]['n'] / first:.2f}" for s in sizes) + " |"]
    for name in STAGES:
        f0 = figures(base["stages"][name])
        row = []
        for s in sizes:
            f = figures(results[s]["stages"][name])
            row.append(" / ".join(ratio(f[k], f0[k]) if k in f and k in f0 else "–" for k in ("wall", "cpu", "peak")))
        lines.append(f"| {TITLES[name]} | " + " | ".join(row) + " |")
    runs = {s: {"n": results[s]["n"], **results[s]["stages"]["run"]} for s in sizes}
    lines += ["", "## `factcheck run`, per stage of its timing list", "", *run_table(runs), *stage_ratios(runs),
              "## `predict` and `serve`", "",
              "`predict`'s peak three ways, each the largest sampled sum over its process tree (driver and "
              "workers): **RSS** (the figure of the other tables and of the target) counts a page of the "
              "memory-mapped index once in every process that maps it, **PSS** shares each such page out "
              "between them, **anonymous** is the processes' own memory (not shared, not reclaimable).", "",
              "| size | `predict --jobs 2`: claims | claims/s (start-up included) | peak GB: summed RSS "
              "| summed PSS | summed anonymous | `serve` start-up s "
              "| private (anonymous) RSS MiB | file-backed MiB | retriever | /api/check p50 ms | p99 ms | errors |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sizes:
        p, v = results[s]["stages"]["predict dev"], results[s]["stages"]["serve"]
        pc = ("failed | | | | | " if "failed" in p else
              f"{p['claims']:,} | {p['claims'] / p['wall_s']:.1f} | {p['tree_peak_rss'] / 1e9:.2f} | "
              f"{gb(p.get('tree_peak_pss'))} | {gb(p.get('tree_peak_anon'))} | ")
        vc = (f"failed: {v['failed']} | | | | | | " if "failed" in v else
              f"{v['startup_s']:.1f} | {v['anon_end_mib']:,.0f} | {v['file_end_mib']:,.0f} | {v['best']} | "
              f"{v['p50']:.1f} | {v['p99']:.1f} | {v['errors']:.0f} |")
        lines.append(f"| {results[s]['n']:,} | " + pc + vc)
    lines += ["", "## One machine and the Dask cluster: the same bytes?", "",
              f"A cluster of {DASK_WORKERS} single-threaded worker processes (`dask scheduler`, `dask worker ADDRESS "
              f"--nworkers {DASK_WORKERS} --nthreads 1`), started afresh before every run and reached by its "
              "address; the Dask stages' figures above are summed over the driver, the scheduler, the nannies and "
              "the workers. The index: the same `manifest.json` bytes and every file's sha256 the manifest's "
              "(`factcheck verify`); the predictions: the same bytes, `.explain.json` too.", "",
              "| size | `tag` index: same bytes | `predict` output: same bytes |", "|---|---|---|"]
    for s in sizes:
        lines.append(f"| {results[s]['n']:,} | " + " | ".join(
            same_cell(results[s]["stages"][name]) for name in ("tag dask", "predict dask")) + " |")
    lines += ["", "## The open mode's first stage: static vectors and their nearest-neighbour index", "",
              "`factcheck tag --mode open --jobs 2` on the index `factcheck tag` wrote (its tagging found done): "
              "wordllama's vectors (float16) and the nearest-neighbour index `factcheck/tagging/ann.py` builds for "
              f"that many passages (exact search below {MIN_PASSAGES:,}; one thread). Then the product's dense "
              f"search in a process of its own (`python -m benchmarks.ann --search`): the retriever opened, then "
              f"the first {SEARCH_CLAIMS:,} dev claims' top 100, one claim at a time (the claim embedded, the "
              f"index's candidates re-scored exactly), with recall@100 of the first {RECALL_CLAIMS} of them "
              "against exact search over every vector; at the index's recorded search depth (**bold**, the "
              "product's default) and at shallower ones, what they would trade.", "",
              "| size | build: wall s / CPU s / peak GB, summed RSS (anonymous) | disk GB: vectors + index | index "
              "| search: opened s | resident after the default's searches GB: anonymous + file-backed |",
              "|---|---|---|---|---|---|"]
    depths = []
    for s in sizes:
        o, n = results[s]["stages"]["open vectors"], results[s]["n"]
        lines.append(f"| {n:,} | " + open_row(o) + " |")
        for i, d in enumerate([] if "failed" in o else o["search"]["depths"]):
            mark = "**" if i == 0 else ""
            at = "–" if d["search_depth"] is None else f"{mark}{d['search_depth']:,}{mark} / {d['candidates']:,}"
            depths.append(f"| {n:,} | {at} | {d['p50']:.2f} | {d['p99']:.2f} | {d['recall']:.4f} |")
    lines += ["", "| size | search depth / candidates | p50 ms | p99 ms | recall@100 against exact |",
              "|---|---|---|---|---|", *depths]
    lines += ["", "## Scaling check and targets", "", *checks(results)]
    return lines


def measured_by(results: dict) -> list[str]:
    """Which invocation measured which stages, where more than one did (``--stages``); else nothing."""
    by = {}
    for r in results.values():
        for name in STAGES:
            m = r["stages"][name]
            if m.get("failed") not in (NOT_ASKED, PENDING):
                by.setdefault(m.get("by") or "an earlier invocation (not recorded)", {}).setdefault(
                    slug(name), []).append(f"{r['n']:,}")
    if len(by) < 2:
        return []
    return ["**Measured by more than one invocation** (`--stages` measures some stages and keeps the others' "
            "figures, each with the load averages of its own runs):", "",
            *(f"- {who}: " + "; ".join(f"{name} at {' and '.join(at)}" for name, at in stages.items())
              for who, stages in by.items()), ""]


def open_row(o: dict) -> str:
    """The open first stage's cells after the size (see the table's header)."""
    if "failed" in o:
        return f"failed: {o['failed']}" + (f" ({o['error']})" if o.get("error") else "") + " |" * 4
    q = o["search"]
    d = q["depths"][0]
    return " | ".join([
        f"{o['wall_s']:.1f} / {o['cpu_s']:.1f} / {o['tree_peak_rss'] / 1e9:.2f} ({gb(o.get('tree_peak_anon'))}) "
        "(load " + ", ".join(f"{a:.1f}→{b:.1f}" for a, b in o["loads"]) + ")",
        f"{o['disk']['vectors'] / 1e9:.2f} + {o['disk']['ann'] / 1e9:.2f}",
        f"`{q['ann']}`" if q["ann"] else f"exact (under {MIN_PASSAGES:,} passages)", f"{q['opened_s']:.1f}",
        f"{d['anon_mib'] * MIB / 1e9:.2f} + {d['file_mib'] * MIB / 1e9:.2f} (load {q['load'][0]:.1f}→{q['load'][1]:.1f})"])


def same_cell(m: dict) -> str:
    """yes, **no** (and why), or why there is nothing to compare."""
    if "failed" in m:
        return f"– ({m['failed']})"
    return "yes" if m["same_bytes"] == "yes" else f"**no** ({m['same_bytes'][len('no: '):]})"


def gb(n_bytes) -> str:
    """Bytes as GB with two decimals; "–" where there is no figure."""
    return "–" if n_bytes is None else f"{n_bytes / 1e9:.2f}"


def stage_ratios(runs: dict) -> list[str]:
    """Each stage of the run's timing list at each size as a ratio to the first size's."""
    base = next(iter(runs.values()))
    names = list(base.get("stages", {}))
    if len(runs) < 2 or not names:
        return []
    lines = ["Each run stage as a ratio to the first size's: wall x first / peak x first.", "",
             "| stage | " + " | ".join(f"{r['n']:,}" for r in runs.values()) + " |", "|---|" + "---|" * len(runs)]
    for name in names:
        f0, row = base["stages"][name], []
        for r in runs.values():
            f = r.get("stages", {}).get(name)
            row.append("–" if f is None else f"{ratio(f['wall_s'], f0['wall_s'])} / "
                                              f"{ratio(f['peak_rss'] or 0, f0['peak_rss'] or 0)}")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return lines + [""]


def checks(results: dict) -> list[str]:
    """The scaling check (first size to last: every stage at most 1.2x linear, time and memory)
    and the absolute targets at the sizes measured; ``met``, ``missed`` or ``failed``."""
    sizes = list(results)
    first, last = results[sizes[0]], results[sizes[-1]]
    out = []

    def line(ok: bool, text: str):
        out.append(f"- {text}: **{'met' if ok else 'missed'}**")

    if len(sizes) > 1:
        linear = last["n"] / first["n"]
        for name in STAGES:
            f0, f1 = figures(first["stages"][name]), figures(last["stages"][name])
            if not f0 or not f1:
                out.append(f"- {TITLES[name]}, {first['n']:,} -> {last['n']:,}: **failed** (no figure at both sizes)")
                continue
            for k, what in (("wall", "time"), ("peak", "peak memory")):
                line(f1[k] <= 1.2 * linear * f0[k], f"{TITLES[name]} {what}, {first['n']:,} -> {last['n']:,}: "
                                                     f"x{f1[k] / f0[k]:.2f} (limit 1.2 x {linear:.2f} = {1.2 * linear:.2f})")
        stage_scaling({"n": first["n"], **first["stages"]["run"]}, {"n": last["n"], **last["stages"]["run"]}, line)
    else:
        out.append("- Scaling: one size only, nothing to compare")
    full = {s: r for s, r in results.items() if r["written"]["train"] >= 145_000}
    for r in results.values():
        n, st = r["n"], r["stages"]
        tag, bm25, run, predict, serve = (st[k] for k in ("tag", "retrieve bm25", "run", "predict dev", "serve"))
        if n >= 25_000_000 and "failed" not in tag:
            line(tag["wall_s"] <= 8 * 60, f"tagging {n:,} sentences: {tag['wall_s'] / 60:.1f} min (<= 8)")
        if "failed" not in bm25 and (4_900_000 <= n <= 5_100_000 or n >= 25_000_000):
            limit = 2.0 if n < 25_000_000 else 8.0
            line(bm25["tree_peak_rss"] <= limit * 1e9, f"`retrieve --method bm25` at {n:,}, build included: "
                                                       f"{bm25['tree_peak_rss'] / 1e9:.2f} GB (<= {limit:g})")
        if n >= 25_000_000 and str(n) in full and "failed" not in run:
            line(run["wall_s"] <= 2 * 3600, f"`factcheck run` at {n:,} / {r['written']['train']:,} claims: "
                                            f"{run['wall_s'] / 3600:.2f} h (<= 2)")
            line(run["peak_rss"] <= 16e9, f"`factcheck run` at {n:,}: {run['peak_rss'] / 1e9:.2f} GB tree peak (<= 16)")
        if n >= 25_000_000 and "failed" not in predict:
            rate = predict["claims"] / predict["wall_s"]
            line(rate >= 100 and predict["tree_peak_rss"] <= 6e9,
                 f"`predict --jobs 2` over {predict['claims']:,} claims at {n:,}: {rate:.0f} claims/s (>= 100), "
                 f"{predict['tree_peak_rss'] / 1e9:.2f} GB peak summed RSS (<= 6; summed PSS "
                 f"{gb(predict.get('tree_peak_pss'))} GB, anonymous {gb(predict.get('tree_peak_anon'))} GB)")
        if "failed" not in serve and 1_200_000 <= n <= 1_210_000:
            line(serve["startup_s"] <= 5, f"`serve` at {n:,} starts in {serve['startup_s']:.1f} s (<= 5)")
        if "failed" not in serve and n >= 25_000_000:
            line(serve["startup_s"] <= 15, f"`serve` at {n:,} starts in {serve['startup_s']:.1f} s (<= 15)")
            line(serve["anon_end_mib"] * MIB <= 2e9, f"`serve` at {n:,}: private RSS "
                                                      f"{serve['anon_end_mib'] * MIB / 1e9:.2f} GB (<= 2)")
            line(serve["p50"] <= 100, f"`/api/check` at {n:,} p50 {serve['p50']:.1f} ms (<= 100)")
        opened = st["open vectors"]
        if n >= 25_000_000 and "failed" not in opened:
            q, d = opened["search"], opened["search"]["depths"][0]
            line(opened["wall_s"] <= 30 * 60, f"the open first stage at {n:,}: vectors and index built in "
                                              f"{opened['wall_s'] / 60:.1f} min (<= 30)")
            line(d["p50"] <= 10, f"the open first stage at {n:,}: search p50 {d['p50']:.2f} ms at the default depth "
                                 f"(<= 10; recall@100 {d['recall']:.4f} against exact)")
            held = (d["anon_mib"] + d["file_mib"]) * MIB
            line(max(opened["tree_peak_rss"], held) <= 16e9, f"the open first stage at {n:,}: build peak "
                 f"{opened['tree_peak_rss'] / 1e9:.2f} GB summed RSS, search {held / 1e9:.2f} GB resident (<= 16)")
        for name in ("tag dask", "predict dask"):
            if "failed" not in st[name]:
                same = st[name]["same_bytes"]
                line(same == "yes", f"{TITLES[name]} at {n:,} gives the one-machine run's bytes"
                                    + ("" if same == "yes" else f" ({same[len('no: '):]})"))
        for name in STAGES:
            if "failed" in st[name]:
                out.append(f"- {TITLES[name]} at {n:,}: **failed** ({st[name]['failed']})")
    if not any(r["n"] >= 25_000_000 for r in results.values()):
        out.append("- The absolute targets at 25M: not measured (no size of 25,000,000 sentences in this invocation)")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
