"""The learned retriever: BM25 + label-memory candidates, relevance features, boosted
trees, and a per-claim cut-off tuned for evidence F (training: :mod:`factcheck.training.rerank`).
"""
