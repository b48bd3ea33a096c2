"""The offline tagging job: TF-IDF over Porter stems, top-k tags per passage, sharded
(docs/tagging.md); :class:`~factcheck.tagging.index.TagIndex` loads its index.
"""
