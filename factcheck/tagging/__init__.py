"""The offline tagging job: TF-IDF over Porter stems, top-k tags per passage, sharded.

``job`` (orchestration), ``tasks`` (worker bodies), ``backends`` (where tasks run),
``outdir`` (lock, resume or refuse), ``store`` (files, manifest, checks), ``index`` (the
loader), ``derived`` (caches inside an index), ``vocabulary``, ``packing`` and ``heap``.
"""
