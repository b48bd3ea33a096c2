"""The offline tagging job: TF-IDF over Porter stems, top-k tags per passage, sharded.

Counting, TF-IDF and the top-k are the scoring core's (:mod:`factcheck.scoring`).

Stages (each its own module): ``packing`` (strings <-> byte buffers), ``vocabulary``
(merge counts -> vocabulary + IDF), ``store`` (shard files, manifest, verification), ``outdir`` (the output directory: lock,
resume-or-refuse, ``--force``), ``tasks`` (the worker bodies), ``backends`` (where tasks
run), ``heap`` (glibc heap settings for our processes), ``job`` (orchestration),
``index`` (the loader the retrievers use) and ``derived``
(the caches retrievers keep inside an index directory).
"""
