"""The learned retriever: BM25 + label-memory candidates, relevance features, boosted
trees, and a per-claim cut-off tuned for evidence F.

``terms`` (corpus term statistics, cached in the index), ``candidates`` (the pool per
claim), ``memory`` (training claims' gold passages as neighbours), ``features`` and
``semantic`` (what the trees see), ``model`` (the trees), ``cutoff`` (how many to keep),
``explain`` (why a passage was kept) and ``retriever`` (fit, search, load, save).
Training is :mod:`factcheck.training.rerank`.
"""
