"""Online retrieval: every retriever behind one interface (:mod:`factcheck.retrieval.base`:
``fit(index)``, then ``rank(claims, k)``, ``retrieve(claims)`` and ``search(claims, k)``
from one scoring of each claim), all scoring through :mod:`factcheck.scoring`.

``tag_rule`` (the 2024 rule), ``bm25`` (Lucene's BM25 over the project's stems),
``tfidf`` (the TF-IDF cosine), ``chunking`` (word windows), ``rerank/`` (the learned
reranker), ``dense`` (open mode: embeddings and hybrid fusion) and ``registry`` (the
method names, building retrievers by name, running them over a claim set). Training and
choosing retrievers by a metric lives in :mod:`factcheck.training`.
"""
