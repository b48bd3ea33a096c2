"""Online retrieval: every retriever behind one interface (:mod:`factcheck.retrieval.base`),
all scoring through :mod:`factcheck.scoring`; ``registry`` names them and runs them over
claims. Training and choosing retrievers is :mod:`factcheck.training`.
"""
