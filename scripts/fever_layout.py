"""The course data in FEVER's file layout through ``factcheck run``: same labels and evidence?

1. Convert the course claims to FEVER claims JSONL (``train.jsonl``, ``shared_task_dev.jsonl``,
   ``shared_task_test.jsonl``; the course's four labels kept as they are) and the knowledge
   source to one FEVER wiki-pages file (each passage line 0 of its own page), with
   ``factcheck convert ... --one-line-pages``.
2. ``factcheck run --data-dir`` the FEVER layout.
3. Map the ids back (``factcheck convert predictions ... --to course --one-line-pages --claims``)
   and compare with a course-format run of the same data: sha256 of both prediction files,
   dev and test, and the number of claims whose label or evidence ids differ.

Writes reports/fever-layout.md.

    python -m scripts.fever_layout --data-dir ../shared/data --course-run /work/baseline/proxy
    python -m scripts.fever_layout --data-dir data/demo --out /tmp/fever-layout.md      # runs both (~1 min)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPLITS = {"train": ("train-claims.json", "train.jsonl"), "dev": ("dev-claims.json", "shared_task_dev.jsonl"),
          "test": ("test-claims-unlabelled.json", "shared_task_test.jsonl")}


def factcheck(*args) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "factcheck", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"factcheck {args[0]} failed:\n{proc.stderr}")
    return proc


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def differences(a: Path, b: Path) -> tuple[int, int, int]:
    """(claims, label differences, evidence-list differences) between two course predictions files."""
    pa, pb = json.loads(a.read_text("utf-8")), json.loads(b.read_text("utf-8"))
    assert list(pa) == list(pb), "different claims"
    labels = sum(pa[c].get("claim_label") != pb[c].get("claim_label") for c in pa)
    evidence = sum(pa[c]["evidences"] != pb[c]["evidences"] for c in pa)
    return len(pa), labels, evidence


def evidence_file(data_dir: Path) -> Path:
    for name in ("evidence.json", "evidence.json.gz"):
        if (data_dir / name).is_file():
            return data_dir / name
    raise SystemExit(f"{data_dir}: no evidence.json(.gz)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True, help="a course data directory")
    ap.add_argument("--course-run", type=Path, default=None,
                    help="an existing course-format run of that directory (default: run one here)")
    ap.add_argument("--work", type=Path, default=None, help="where the layout and the run go (default: a temp dir)")
    ap.add_argument("--jobs", type=int, default=-1)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "fever-layout.md")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="fever-layout-"))
    layout, run_dir = work / "layout", work / "run"
    notes = []
    t0 = time.perf_counter()
    for split, (course_name, fever_name) in SPLITS.items():
        proc = factcheck("convert", "claims", args.data_dir / course_name, "--to", "fever", "--one-line-pages",
                         "--out", layout / fever_name)
        notes += [f"{course_name}: {line.split('note: ', 1)[1]}" for line in proc.stderr.splitlines() if "note:" in line]
    evidence = evidence_file(args.data_dir)
    proc = factcheck("convert", "evidence", evidence, "--to", "fever", "--one-line-pages",
                     "--out", layout / "wiki-pages" / "wiki-001.jsonl")
    notes += [f"{evidence.name}: {line.split('note: ', 1)[1]}" for line in proc.stderr.splitlines() if "note:" in line]
    convert_s = time.perf_counter() - t0
    course_run = args.course_run
    if course_run is None:
        course_run = work / "course-run"
        factcheck("run", "--data-dir", args.data_dir, "--out", course_run, "--quiet", "--jobs", args.jobs)
    t1 = time.perf_counter()
    factcheck("run", "--data-dir", layout, "--out", run_dir, "--quiet", "--jobs", args.jobs)
    run_s = time.perf_counter() - t1
    rows = []
    same_all = True
    for split in ("dev", "test"):
        back = work / f"{split}-claims-predictions.json"
        factcheck("convert", "predictions", run_dir / f"{split}-claims-predictions.jsonl", "--to", "course",
                  "--one-line-pages", "--claims", args.data_dir / SPLITS[split][0], "--out", back)
        course = course_run / f"{split}-claims-predictions.json"
        n, labels, evidence_diff = differences(course, back)
        same = sha256(course) == sha256(back)
        same_all &= same
        rows.append(f"| {split} | {n} | `{sha256(course)}` | `{sha256(back)}` | {labels} | {evidence_diff} | "
                    f"{'yes' if same else 'NO'} |")
    layout_files = sorted(str(p.relative_to(layout)) for p in layout.rglob("*") if p.is_file())
    lines = [
        "# The course data in FEVER's file layout through `factcheck run`", "",
        f"Command: `python -m scripts.fever_layout --data-dir {args.data_dir}"
        + (f" --course-run {args.course_run}" if args.course_run else "") + "`.", "",
        f"The course files of `{args.data_dir}` written in FEVER's layout with `factcheck convert --one-line-pages` "
        f"({', '.join(f'`{f}`' for f in layout_files)}; the course's four labels kept as they are, each passage "
        "line 0 of its own wiki page, so passage `evidence-N` is FEVER's sentence `[evidence-N, 0]`), run with "
        "`factcheck run --data-dir LAYOUT`, and its FEVER predictions mapped back to course ids with "
        "`factcheck convert predictions --to course --one-line-pages --claims` "
        f"(conversion {convert_s:.0f} s, the FEVER-layout run {run_s:.0f} s on this machine).", "",
        f"Reference: the course-format run `{course_run}`.", "",
        "| split | claims | sha256 of the course run's predictions | sha256 of the FEVER run's, ids mapped back "
        "| labels differing | evidence lists differing | identical |",
        "|---|---|---|---|---|---|---|",
        *rows, "",
        f"Same labels and evidence ids: **{'yes, byte for byte' if same_all else 'NO'}**.", "",
        "What the conversion listed as not held by FEVER's formats:", "",
        *[f"- {n}" for n in notes or ["nothing"]],
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(args.out.read_text())
    return 0 if same_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
