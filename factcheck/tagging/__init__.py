"""The offline tagging job: TF-IDF over Porter stems, top-k tags per passage, sharded.

Stages (each its own module): ``packing`` (strings <-> byte buffers), ``counting``
(text -> per-shard count matrix), ``vocabulary`` (merge counts -> vocabulary + IDF),
``topk`` (tie-safe top-k of sparse rows), ``tag_model`` (the 1,000-term tag vectoriser),
``store`` (shard files, manifest, verification), ``job`` (orchestration and resume) and
``index`` (the loader the retrievers use).
"""
