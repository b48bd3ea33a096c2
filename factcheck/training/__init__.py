"""Choosing and training a system on the training claims only: retriever sweeps, retriever
selection, reranker training, and the classifier chosen by cross-validation."""
