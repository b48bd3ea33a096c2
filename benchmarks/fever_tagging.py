"""Benchmark: tagging a FEVER wiki-pages file against the same passages in course JSON.

Writes reports/bench-fever-tagging.md: wall, CPU and peak RSS of ``factcheck tag --jobs 2`` on
the 1.2M-passage course corpus (``bench/corpus-1208827.json``) and on the same passages written
as FEVER wiki pages (``bench/wiki-1208827.jsonl``), runs alternating so both see the same machine,
median of 3 each, and their ratio. Also the driver's reading alone (the reader streamed to the
end in one process, both formats alternating), and a check that both indexes hold the same tags.

The pages are FEVER-shaped: consecutive passages grouped into pages of 1-9 lines (seeded; FEVER's
dump averages ~4.6 lines a page), each page with FEVER's ``text`` field (its sentences joined),
``lines`` as ``N<TAB>sentence``, and a hyperlink field on every other line, as FEVER's lines have.

    python -m benchmarks.fever_tagging                       # ~10 minutes on 2 busy cores
    python -m benchmarks.fever_tagging --n 20000 --repeats 1 --out /tmp/b.md   # smoke
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from harness.measure import ROOT, ensure_corpus, gib, machine, measure, median_runs, write_report

SEED = 90042


def write_wiki(corpus: Path, dest: Path) -> int:
    """The passages of a course corpus as FEVER wiki pages, in the same order; their count."""
    rng = random.Random(SEED)
    with open(corpus, encoding="utf-8") as fh:
        passages = list(json.load(fh).values())
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(json.dumps({"id": "", "text": "", "lines": ""}) + "\n")  # FEVER's dump opens with one
        at, page = 0, 0
        while at < len(passages):
            k = rng.randint(1, 9)
            sentences = passages[at:at + k]
            lines = []
            for i, s in enumerate(sentences):
                link = f"\t{s.split(' ', 1)[0]}\tPage_{page + 1}" if i % 2 and s else ""
                lines.append(f"{i}\t{s}{link}")
            out.write(json.dumps({"id": f"Page_{page}", "text": " ".join(sentences), "lines": "\n".join(lines)},
                                 ensure_ascii=False) + "\n")
            at += k
            page += 1
    tmp.replace(dest)
    return len(passages)


READ_CODE = """
import sys, time
from factcheck.formats.evidence import iter_passage_records, source_spec
t = time.perf_counter(); n = 0
for ids, texts, titles in iter_passage_records(source_spec(sys.argv[1])):
    n += len(ids)
print(n, time.perf_counter() - t)
"""


def read_time(path: Path) -> tuple[int, float]:
    import subprocess
    out = subprocess.run([sys.executable, "-c", READ_CODE, str(path)], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout.split()
    return int(out[0]), float(out[1])


def tag(path: Path, jobs: int, keep: Path | None = None) -> dict:
    out = Path(tempfile.mkdtemp(prefix="bench-fever-", dir=ROOT / "bench"))
    try:
        m = measure([sys.executable, "-m", "factcheck", "tag", str(path), "--out", str(out / "idx"),
                     "--jobs", str(jobs)])
        if keep is not None and not keep.exists():
            shutil.copytree(out / "idx", keep)
        return m
    finally:
        shutil.rmtree(out, ignore_errors=True)


def same_tags(a: Path, b: Path) -> bool:
    """Both indexes' tag shards and vocabularies byte-identical (tags depend on the texts alone)."""
    files = sorted(p.relative_to(a) for p in a.rglob("*.npy") if p.relative_to(a).parts[0] in ("tags", "vocabulary"))
    return bool(files) and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_208_827, help="passages (the corpus of benchmarks.make_corpus)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench-fever-tagging.md")
    args = ap.parse_args(argv)
    (ROOT / "bench").mkdir(exist_ok=True)
    course = ensure_corpus(args.n)
    wiki = ROOT / "bench" / f"wiki-{args.n}.jsonl"
    if not wiki.is_file():
        write_wiki(course, wiki)
    keep = Path(tempfile.mkdtemp(prefix="bench-fever-keep-", dir=ROOT / "bench"))
    try:
        reads = {"course": [], "fever": []}
        runs = {"course": [], "fever": []}
        for _ in range(args.repeats):  # alternating: both formats see the same machine
            for name, path in (("course", course), ("fever", wiki)):
                n, seconds = read_time(path)
                assert n == args.n, (name, n)
                reads[name].append(seconds)
            for name, path in (("course", course), ("fever", wiki)):
                runs[name].append(tag(path, args.jobs, keep / name))
        identical = same_tags(keep / "course", keep / "fever")
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    med = {k: median_runs(v) for k, v in runs.items()}
    ratios = [f["wall_s"] / c["wall_s"] for c, f in zip(runs["course"], runs["fever"])]
    ratio = med["fever"]["wall_s"] / med["course"]["wall_s"]
    read_ratio = statistics.median(reads["fever"]) / statistics.median(reads["course"])
    sizes = {k: p.stat().st_size for k, p in (("course", course), ("fever", wiki))}
    lines = [
        "# Benchmark: tagging FEVER wiki pages versus the same passages in course JSON", "",
        f"Machine: {machine()}.", "",
        f"Command: `python -m benchmarks.fever_tagging --n {args.n} --repeats {args.repeats} --jobs {args.jobs}`. "
        f"The course corpus is `benchmarks/make_corpus.py`'s ({args.n:,} passages, {sizes['course'] / 1e6:,.0f} MB); "
        f"the FEVER file holds the same passages in the same order as FEVER wiki pages of 1-9 lines, with FEVER's "
        f"`text` field and a hyperlink field on every other line ({sizes['fever'] / 1e6:,.0f} MB). Each figure is the "
        f"median of {args.repeats} fresh runs (new output directory each time), the two formats alternating.", "",
        "| input | passages | wall s | CPU s | peak RSS (tree) | peak RSS (driver) | reading alone s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, label in (("course", "course JSON"), ("fever", "FEVER wiki pages")):
        m = med[name]
        lines.append(f"| {label} | {args.n:,} | {m['wall_s']:.1f} | {m['cpu_s']:.1f} | {gib(m['tree_peak_rss'])} | "
                     f"{gib(m['driver_peak_rss'])} | {statistics.median(reads[name]):.2f} |")
    lines += [
        "", f"FEVER / course wall time: **{ratio:.2f}×** (median of each; per alternating pair: "
        f"{', '.join(f'{r:.2f}' for r in ratios)}). Reading alone (one process, the reader streamed to the end): "
        f"{read_ratio:.2f}×.", "",
        f"Both indexes hold byte-identical tag shards and models: **{'yes' if identical else 'NO'}** "
        "(the tags depend on the texts alone; the passage shards differ by ids and titles).", "",
        "Acceptance: a FEVER wiki-pages file of 1.2M lines tags within 1.2× the time of the same passages in "
        f"course JSON: **{ratio:.2f}×** — {'met' if ratio <= 1.2 else 'NOT met'}"
        + ("" if args.n >= 1_200_000 else f" (at {args.n:,} passages only)"), "",
        "All runs (wall s / CPU s / tree peak GiB):", "",
    ]
    for name in ("course", "fever"):
        lines.append(f"- {name}: " + "; ".join(f"{r['wall_s']:.1f} / {r['cpu_s']:.1f} / {r['tree_peak_rss'] / 2**30:.2f}"
                                                for r in runs[name])
                     + "; reading alone " + ", ".join(f"{s:.2f}" for s in reads[name]))
    write_report(args.out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
