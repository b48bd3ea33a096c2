"""The offline tagging job: TF-IDF over Porter stems, top-k tags per passage, sharded.

Stages (each its own module): ``packing`` (strings <-> byte buffers), ``counting``
(text -> per-shard count matrix), ``vocabulary`` (merge counts -> vocabulary + IDF; TF-IDF rows),
``topk`` (tie-safe top-k of sparse rows), ``tag_model`` (the 1,000-term tag vectoriser),
``store`` (shard files, manifest, verification), ``outdir`` (the output directory: lock,
resume-or-refuse, ``--force``), ``tasks`` (the worker bodies), ``backends`` (where tasks
run), ``heap`` (glibc heap settings for our processes), ``job`` (orchestration),
``index`` (the loader the retrievers use) and ``derived``
(the caches retrievers keep inside an index directory).
"""
