"""Choosing and training a system on the training claims only.

``tuning`` (retriever parameter sweeps on the fixed 80/20 split), ``selection`` (which
retriever), ``rerank`` (the learned reranker's training and cut-off), ``classifier_cv``
and ``cv_evidence`` (the classifier chosen by cross-validation on out-of-fold evidence).
Dev is never read here.
"""
