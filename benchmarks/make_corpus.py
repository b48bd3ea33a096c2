"""Build an N-passage benchmark corpus shaped like the real 1.2M-sentence dump.

The real knowledge source (1,208,827 Wikipedia sentences) is not available, so the
benchmark corpus is the proxy corpus (../shared/data/evidence.json.gz) plus synthetic
filler: each filler passage draws its length from the proxy's length distribution and
its words (whitespace tokens, punctuation attached) from the proxy's unigram
distribution. Ids are ``evidence-0`` .. ``evidence-(N-1)``: the proxy keeps its own ids
and filler takes the unused ones, in ascending order, so the file looks like the real
dump. Deterministic for a given N and seed. Written in course format (one JSON object).

    python -m benchmarks.make_corpus --n 1208827 --out bench/corpus-1208827.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "evidence.json.gz"


# Sentences are drawn this many at a time: memory bounded by a block, not by the corpus.
BLOCK = 1 << 16


def load_source(source: Path) -> dict[str, str]:
    """A course-format corpus (``id -> text``; ``.gz`` read transparently)."""
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as fh:
        return json.load(fh)


class WordModel:
    """The word generator: sentence lengths and a unigram distribution (whitespace tokens,
    punctuation attached) taken from real texts, so drawn text keeps their Zipf vocabulary."""

    def __init__(self, texts):
        words_per_passage = [text.split() for text in texts]
        self.lengths = np.array([len(w) for w in words_per_passage if w], dtype=np.int64)
        unigram = Counter(w for ws in words_per_passage for w in ws)
        self.vocab = sorted(unigram)
        probs = np.array([unigram[w] for w in self.vocab], dtype=np.float64)
        self.probs = probs / probs.sum()
        self.vocab_arr = np.array(self.vocab, dtype=object)
        self._cdf = np.cumsum(self.probs)

    def word_ids(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` word indices from the unigram distribution (inverse CDF: no per-call table)."""
        return np.minimum(np.searchsorted(self._cdf, rng.random(n), side="right"), len(self.vocab) - 1)

    def words(self, rng: np.random.Generator, n: int) -> list[str]:
        return self.vocab_arr[self.word_ids(rng, n)].tolist()

    def sentences(self, rng: np.random.Generator, n: int):
        """``n`` sentences, streamed a block at a time."""
        done = 0
        while done < n:
            lengths = rng.choice(self.lengths, size=min(BLOCK, n - done)).tolist()
            words = self.words(rng, sum(lengths))
            at = 0
            for length in lengths:
                yield " ".join(words[at:at + length])
                at += length
            done += len(lengths)


def build(n: int, source: Path, seed: int = 2024) -> dict[str, str]:
    proxy = load_source(source)
    number = re.compile(r"evidence-(\d+)$")
    real = {}
    for pid, text in proxy.items():
        m = number.match(pid)
        if m:
            real[int(m.group(1))] = text
    model = WordModel(proxy.values())
    rng = np.random.default_rng(seed)

    kept = sorted(k for k in real if k < n)
    n_filler = n - len(kept)
    # Drawn in one piece (not model.sentences): the corpora measured so far came from these draws.
    filler_lengths = rng.choice(model.lengths, size=n_filler)
    filler_words = rng.choice(len(model.vocab), size=int(filler_lengths.sum()), p=model.probs)
    bounds = np.concatenate([[0], np.cumsum(filler_lengths)]).tolist()
    vocab_arr = model.vocab_arr

    out: dict[str, str] = {}
    kept_set = set(kept)
    f = 0
    for k in range(n):
        if k in kept_set:
            out[f"evidence-{k}"] = real[k]
        else:
            a, b = bounds[f], bounds[f + 1]
            out[f"evidence-{k}"] = " ".join(vocab_arr[filler_words[a:b]].tolist())
            f += 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--n", type=int, default=1_208_827, help="passages (default: 1,208,827)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="proxy corpus (evidence.json.gz)")
    ap.add_argument("--out", type=Path, required=True, help="output .json (course format)")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args(argv)
    if not args.source.is_file():
        print(f"make_bench_corpus: {args.source}: not found (needs ../shared/data)", file=sys.stderr)
        return 2
    corpus = build(args.n, args.source, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(corpus, fh, ensure_ascii=False)
    tmp.replace(args.out)
    print(f"{args.out}: {len(corpus)} passages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
