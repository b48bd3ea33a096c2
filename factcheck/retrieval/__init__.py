"""Online retrieval: the 2024 tag rule, BM25, learned reranking, and chunking, all behind
one interface (:mod:`factcheck.retrieval.base`)."""
