"""factcheck: explainable evidence retrieval and claim classification.

The package root is the API (names load lazily, so ``import factcheck`` stays fast).
The estimators follow scikit-learn's conventions; ``rank``, ``retrieve`` and
``FactChecker.check`` take one claim string (one result) or a list (a list of results).

Example
-------
>>> import factcheck
>>> index = factcheck.build_index("data/demo/evidence.json", "out/demo-index", progress=False)
>>> bm25 = factcheck.BM25Retriever(k=3).fit(index)
>>> bm25.retrieve("Sea levels are rising.").ids
['evidence-8', 'evidence-39', 'evidence-7']
>>> checker = factcheck.FactChecker.load("out/demo/index", "out/demo/model")     # doctest: +SKIP
>>> checker.check("Sea levels are rising.").label                                # doctest: +SKIP
'SUPPORTS'

docs/python-api.md is the guide to these names; docs/architecture.md, to the layers.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it (one definition per name). Everything else lives in
# submodules (docs/python-api.md lists where: factcheck.retrieval.registry.METHODS, ...).
_API = {
    # the offline job and its index
    "build_index": "factcheck.tagging.job",
    "TagIndex": "factcheck.tagging.index",
    # retrievers: fit(index), then rank(claims, k=) / retrieve(claims, depth=)
    "Retriever": "factcheck.retrieval.base",
    "Ranking": "factcheck.retrieval.base",
    "Selection": "factcheck.retrieval.base",
    "Hit": "factcheck.retrieval.base",
    "Explanation": "factcheck.retrieval.base",
    "TagRuleRetriever": "factcheck.retrieval.tag_rule",
    "BM25Retriever": "factcheck.retrieval.bm25",
    "TfidfRetriever": "factcheck.retrieval.tfidf",
    "RerankRetriever": "factcheck.retrieval.rerank.retriever",
    "ChunkedRetriever": "factcheck.retrieval.chunking",
    "DenseRetriever": "factcheck.retrieval.dense",
    "HybridRetriever": "factcheck.retrieval.dense",
    "PoolRetriever": "factcheck.retrieval.pool",
    "make_retriever": "factcheck.retrieval.registry",
    # the claim classifier and a whole system
    "make_classifier": "factcheck.classification.model",
    "FactChecker": "factcheck.system.checker",
    "Verdict": "factcheck.system.checker",
    "Verdicts": "factcheck.system.checker",
    "run_pipeline": "factcheck.pipeline.run",
    "RunConfig": "factcheck.pipeline.run",
    # readers and writers
    "Claim": "factcheck.formats.claims",
    "read_claims": "factcheck.formats.claims",
    "read_passages": "factcheck.formats.evidence",
    "read_predictions": "factcheck.formats.claims",
    "write_predictions": "factcheck.formats.claims",
    # scoring, and the workbench for any id + text collection
    "evaluate": "factcheck.evaluation.evaluate",
    "search": "factcheck.pipeline.workbench",
    "self_retrieval": "factcheck.pipeline.workbench",
    "judged_retrieval": "factcheck.pipeline.workbench",
    # errors
    "InputError": "factcheck.errors",
    "IntegrityError": "factcheck.errors",
    "FactcheckWarning": "factcheck.errors",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'factcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
