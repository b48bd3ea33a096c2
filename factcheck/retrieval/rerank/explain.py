"""Why a passage was returned: what it shares with the claim, who cited it, every feature value."""

from __future__ import annotations

import numpy as np

from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.semantic import ALL_FEATURES
from factcheck.text.analyzer import standalone_numbers


def explain_hit(retriever, cands, x: np.ndarray, row: int, rank: int) -> dict:
    """The explanation of the hit at ``row`` (``x``: its feature row; ``rank``: 1-based)."""
    terms = retriever.terms_
    a, b = terms.forward.indptr[row], terms.forward.indptr[row + 1]
    passage_terms = set(terms.forward.indices[a:b].tolist())
    shared = terms.names([t for t in cands.query.term_ids.tolist() if t in passage_terms])
    codes = terms.bigram_code_of(cands.query.stems)
    a, b = terms.bigram_ptr[row], terms.bigram_ptr[row + 1]
    v = len(terms.vocab)
    pairs = np.intersect1d(codes, terms.bigram_codes[a:b])
    firsts, seconds = terms.names(pairs // v), terms.names(pairs % v)
    bigrams = [f"{x} {y}" for x, y in zip(firsts, seconds)]
    in_passage = set(terms.number_columns(row).tolist())
    passage_numbers = {x for x in standalone_numbers(cands.query.text) if terms.number_vocab.get(x) in in_passage}
    names = [n for n in F.claim_names(cands.query.text) if terms.vocab.get(n) in passage_terms]
    out = {"rank": rank, "bm25": float(x[F.FEATURES.index("bm25")]), "shared_terms": shared,
           "shared_bigrams": bigrams, "shared_numbers": sorted(passage_numbers), "shared_names": names}
    nb = cands.memory
    if nb is not None and len(nb.rows):
        at = int(np.searchsorted(nb.rows, row))
        if at < len(nb.rows) and nb.rows[at] == row:
            m = retriever.memory_
            c = int(nb.best_claim[at])
            out["cited_by_similar_claim"] = {"claim": m.claim_ids[c], "text": m.texts[c],
                                             "similarity": float(nb.max_sim[at])}
    if cands.dense is not None:
        out["dense"] = round(float(x[ALL_FEATURES.index("dense_cos")]), 6)
    # a course model's row holds the lexical features only: zip stops there
    out["features"] = {f: round(float(val), 6) for f, val in zip(ALL_FEATURES, x.tolist())}
    return out
