"""The learned retriever: candidates, relevance features, boosted trees, a per-claim cut-off."""
