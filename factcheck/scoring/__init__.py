"""The sparse scoring core: one weight matrix per scorer, one product, one top-k."""

from factcheck.scoring.bm25 import bm25_weight, bm25_weights, length_norm, lucene_idf
from factcheck.scoring.counting import ShardCounts, count_docs, count_terms
from factcheck.scoring.matrix import PRODUCT_BUDGET, TermMatrix
from factcheck.scoring.tfidf import TfidfSpace, smoothed_idf, tfidf_rows
from factcheck.scoring.topk import top_k, top_k_rows

__all__ = ["PRODUCT_BUDGET", "ShardCounts", "TermMatrix", "TfidfSpace", "bm25_weight", "bm25_weights",
           "count_docs", "count_terms", "length_norm", "lucene_idf", "smoothed_idf", "tfidf_rows", "top_k",
           "top_k_rows"]
