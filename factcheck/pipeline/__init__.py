"""The main job and its pieces: choosing and training a system on the course data.

``tuning`` (retriever parameter sweeps), ``selection`` (which retriever), ``rerank_training``
(the reranker's training and cut-off), ``classifier_cv`` and ``cv_evidence`` (the
classifier chosen by cross-validation on out-of-fold evidence), ``fact_checker`` (a
trained system: retriever + classifier, and the model directory), ``run`` (``factcheck
run`` end to end), ``report`` and ``plots``.
"""
