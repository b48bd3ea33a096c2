"""Online retrieval: every retriever behind one interface (:mod:`factcheck.retrieval.base`:
``fit(index)``, ``rank(claims, depth)``, ``retrieve(claims)``).

``tag_rule`` (the 2024 rule), ``bm25`` (bm25s fed our stems; ``bm25_weights`` derives
BM25 weights for any ``k1``/``b`` without re-indexing), ``chunking`` (word windows),
``rerank/`` (the learned reranker), ``dense`` (open mode: embeddings and hybrid fusion)
and ``registry`` (the method names, building retrievers by name, running them over a
claim set). Training and choosing retrievers by a metric lives in :mod:`factcheck.training`.
"""
