"""Build a synthetic FEVER-shaped dataset of N sentences, to measure what FEVER's size costs.

FEVER's own data is not here, so this makes its shape: ``wiki-pages/wiki-001.jsonl ...``
(50,000 pages a file, FEVER's empty page first, ``id``/``text``/``lines`` with a hyperlink
field on every other line) holding N sentences in about N/4.6 pages (FEVER: 25M sentences,
5.4M pages), and ``train.jsonl``, ``shared_task_dev.jsonl``, ``shared_task_test.jsonl`` with
FEVER's claim counts (145,449 / 19,998 / 19,998, times ``--claim-scale``) and label
proportions (train 80,035 SUPPORTS, 29,775 REFUTES, 35,639 NOT ENOUGH INFO; dev and test in
thirds). The test file is unlabelled, as FEVER's shared task's is (``--test-labels`` keeps
labels and evidence).

Sentences come from ``benchmarks/make_corpus.py``'s word generator (the proxy corpus's
sentence lengths and Zipf vocabulary). Every claim is anchored on a corpus sentence: SUPPORTS
is a span of it after the page's title, one word dropped; REFUTES the same with a word swapped
or "not" inserted; NOT ENOUGH INFO the title with fresh words (evidence
``[[[annotation_id, null, null, null]]]``). Some evidence sets hold two sentences of the page,
some claims have a second, alternative set.

**Figures measured on this data are for cost (time, memory, disk), not quality**: the words
are drawn without meaning, so evidence scores and accuracy on it say nothing about FEVER.

Deterministic: the same arguments give the same bytes. Streams: pages and claims are written
as they are made (memory holds the word model and one plan entry a claim, never the corpus),
into a temporary folder renamed to ``--out`` at the end.

    python -m benchmarks.make_fever --sentences 25000000 --out bench/fever-25M
    python -m benchmarks.make_fever --sentences 10000 --claim-scale 0.002 --out /tmp/fever-10k
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from benchmarks.make_corpus import DEFAULT_SOURCE, WordModel, load_source
from factcheck.errors import InputError
from factcheck.formats.files import atomic_dir

# FEVER's release: claims per split and label (train's labels as released; dev and test in thirds).
LABELS = ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")
FEVER_COUNTS = {"train": (80_035, 29_775, 35_639), "dev": (6_666, 6_666, 6_666), "test": (6_666, 6_666, 6_666)}
FILES = {"train": "train.jsonl", "dev": "shared_task_dev.jsonl", "test": "shared_task_test.jsonl"}
SPLITS = tuple(FILES)
FULL_SENTENCES = 25_000_000
LINES_PER_PAGE = 4.6  # FEVER: ~25M sentences in ~5.4M pages
PAGES_PER_FILE = 50_000
MULTI_SENTENCE = 0.15  # verifiable claims whose set holds two sentences
ALTERNATIVE_SET = 0.2  # verifiable claims with a second evidence set
BLOCK = 1 << 16
_NOT_TITLE = re.compile(r"[^\w-]|_")


def claim_counts(scale: float) -> dict[str, tuple[int, ...]]:
    """Claims per split and label at ``scale`` times FEVER's counts: each split's total rounded,
    shared among the labels by largest remainder (so the proportions hold within one claim)."""
    out = {}
    for split, counts in FEVER_COUNTS.items():
        total = round(sum(counts) * scale)
        exact = [c * total / sum(counts) for c in counts]
        floor = [int(x) for x in exact]
        for i in sorted(range(len(counts)), key=lambda i: (floor[i] - exact[i], i))[:total - sum(floor)]:
            floor[i] += 1
        out[split] = tuple(floor)
    return out


class _Claims:
    """Claim texts and FEVER evidence sets derived from the sentences of one page."""

    def __init__(self, model: WordModel, rng: np.random.Generator):
        self.model, self.rng = model, rng
        self.next_annotation = self.next_evidence = 0

    def _entry(self, annotation: int, page: str, line: int) -> list:
        self.next_evidence += 1
        return [annotation, self.next_evidence, page, line]

    def _span(self, words: list[str]) -> list[str]:
        rng = self.rng
        m = min(len(words), int(rng.integers(5, 13)))
        start = int(rng.integers(0, len(words) - m + 1))
        return words[start:start + m]

    def make(self, cid: int, label: str, page: str, subject: str, sentences: list[str], line: int,
             with_gold: bool) -> dict:
        rng = self.rng
        self.next_annotation += 1
        annotation = self.next_annotation
        if label == LABELS[2]:
            words = self.model.words(rng, int(rng.integers(4, 10)))
            evidence = [[[annotation, None, None, None]]]
        else:
            words = self._span(sentences[line].split())
            others = [i for i in range(len(sentences)) if i != line]
            first = [self._entry(annotation, page, line)]
            if others and rng.random() < MULTI_SENTENCE:
                other = others[int(rng.integers(0, len(others)))]
                words = words[:len(words) // 2 + 1] + self._span(sentences[other].split())[len(words) // 2:]
                first.append(self._entry(annotation, page, other))
            evidence = [first]
            if others and rng.random() < ALTERNATIVE_SET:
                self.next_annotation += 1
                evidence.append([self._entry(self.next_annotation, page, others[int(rng.integers(0, len(others)))])])
            if len(words) > 4:  # lightly rewritten: one word dropped
                del words[int(rng.integers(0, len(words)))]
            if label == LABELS[1]:
                at = int(rng.integers(0, len(words) + 1))
                if rng.random() < 0.5:
                    words.insert(at, "not")
                else:
                    words[min(at, len(words) - 1)] = self.model.words(rng, 1)[0]
        rec = {"id": cid}
        if with_gold:
            rec["verifiable"] = "NOT VERIFIABLE" if label == LABELS[2] else "VERIFIABLE"
            rec["label"] = label
        rec["claim"] = f"{subject} {' '.join(words).rstrip('.')}."
        if with_gold:
            rec["evidence"] = evidence
        return rec


def _title(words: list[str], number: int) -> str:
    """A page id: a few words in FEVER's spelling (underscores), made unique by the page number."""
    kept = [w for w in (_NOT_TITLE.sub("", w) for w in words) if any(c.isalnum() for c in w)] or ["Page"]
    kept[0] = kept[0][:1].upper() + kept[0][1:]
    return "_".join(kept + [str(number)])


def write(out: Path, sentences: int, source: Path, seed: int = 2024, claim_scale: float = 1.0,
          test_labels: bool = False, pages_per_file: int = PAGES_PER_FILE) -> dict:
    """Write the dataset into the folder ``out`` (atomically); what was written, as counts."""
    if sentences < 1:
        raise InputError(None, None, f"must be at least 1, got {sentences}", param="sentences")
    if pages_per_file < 1:
        raise InputError(None, None, f"must be at least 1, got {pages_per_file}", param="pages_per_file")
    counts = claim_counts(claim_scale)
    empty = [s for s, c in counts.items() if not sum(c)]
    if empty or not claim_scale > 0:
        raise InputError(None, None, f"{claim_scale} gives no {' or '.join(empty) or 'train'} claims; raise it",
                         param="claim_scale")
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise InputError(out, None, "exists; remove it or choose another output folder", param="out")
    if not source.is_file():
        raise InputError(source, None, "not found (the word model's source: a course-format corpus)", param="source")
    model = WordModel(load_source(source).values())
    text_rng, page_rng, plan_rng, claim_rng = (np.random.Generator(np.random.PCG64(s))
                                               for s in np.random.SeedSequence(seed).spawn(4))

    # The plan, one entry a claim: its split and label in a seeded order, and an anchor sentence.
    kinds = [(s, lab) for s in range(len(SPLITS)) for lab in range(len(LABELS))]
    plan = np.repeat(np.array(kinds, dtype=np.int8), [counts[SPLITS[s]][lab] for s, lab in kinds], axis=0)
    plan = plan[plan_rng.permutation(len(plan))]
    anchors = np.sort(plan_rng.integers(0, sentences, size=len(plan)))
    claims = _Claims(model, claim_rng)
    written = {"sentences": 0, "pages": 0, "files": 0, **{s: 0 for s in FILES}}

    with atomic_dir(out) as tmp:
        (tmp / "wiki-pages").mkdir()
        claim_files = {s: open(tmp / name, "w", encoding="utf-8") for s, name in FILES.items()}
        wiki = _next_file(None, tmp, written)
        try:
            wiki.write(json.dumps({"id": "", "text": "", "lines": ""}) + "\n")  # FEVER's dump opens with one
            records = 1  # in the open wiki-pages file
            text = model.sentences(text_rng, sentences)
            lengths, at_length = [], 0
            page = ""
            at_claim = 0
            while written["sentences"] < sentences:
                if records == pages_per_file:
                    wiki, records = _next_file(wiki, tmp, written), 0
                if at_length == len(lengths):
                    lengths, at_length = page_rng.geometric(1 / LINES_PER_PAGE, size=BLOCK).tolist(), 0
                k = min(lengths[at_length], sentences - written["sentences"])
                at_length += 1
                title_words = model.words(page_rng, int(page_rng.integers(1, 4)))
                previous, page = page, _title(title_words, written["pages"])
                page_lines = [next(text) for _ in range(k)]
                numbered = []
                for i, s in enumerate(page_lines):
                    link = f"\t{s.split(' ', 1)[0]}\t{previous or page}" if i % 2 else ""
                    numbered.append(f"{i}\t{s}{link}")
                wiki.write(json.dumps({"id": page, "text": " ".join(page_lines), "lines": "\n".join(numbered)},
                                      ensure_ascii=False) + "\n")
                records += 1
                start = written["sentences"]
                written["sentences"] += k
                written["pages"] += 1
                subject = " ".join(page.split("_")[:-1])
                while at_claim < len(plan) and anchors[at_claim] < written["sentences"]:
                    split = SPLITS[plan[at_claim, 0]]
                    rec = claims.make(at_claim + 1, LABELS[plan[at_claim, 1]], page, subject, page_lines,
                                      int(anchors[at_claim]) - start, split != "test" or test_labels)
                    claim_files[split].write(json.dumps(rec, ensure_ascii=False) + "\n")
                    written[split] += 1
                    at_claim += 1
        finally:
            _next_file(wiki, None, written)
            for fh in claim_files.values():
                fh.close()
    return written


def _next_file(wiki, tmp: Path | None, written: dict):
    """Close (and sync) the open wiki-pages file; open the next one under ``tmp``."""
    if wiki is not None:
        wiki.flush()
        os.fsync(wiki.fileno())  # atomic_dir syncs its own files, not those of a nested folder
        wiki.close()
    if tmp is None:
        return None
    written["files"] += 1
    return open(tmp / "wiki-pages" / f"wiki-{written['files']:03d}.jsonl", "w", encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=FULL_SENTENCES,
                    help="sentences in the wiki pages (default: 25,000,000, FEVER's; also 1208827, 5000000, 10000000)")
    ap.add_argument("--claim-scale", type=float, default=1.0,
                    help="claims as a fraction of FEVER's 145,449 / 19,998 / 19,998 (default: 1)")
    ap.add_argument("--out", type=Path, required=True, help="output folder (must not exist)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                    help="the word model's corpus, course format (default: ../shared/data/evidence.json.gz)")
    ap.add_argument("--test-labels", action="store_true",
                    help="keep the test claims' labels and evidence (FEVER's shared-task test file has none)")
    args = ap.parse_args(argv)
    flags = {"sentences": "--sentences", "claim_scale": "--claim-scale", "out": "--out", "source": "--source"}
    try:
        written = write(args.out, args.sentences, args.source, args.seed, args.claim_scale, args.test_labels)
    except InputError as exc:
        print(f"make_fever: {exc.one_line(flags)}", file=sys.stderr)
        return 2
    print(f"{args.out}: {written['sentences']:,} sentences in {written['pages']:,} pages "
          f"({written['files']} wiki-pages files); claims: train {written['train']:,}, "
          f"dev {written['dev']:,}, test {written['test']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
