"""Readers and writers of every file a user hands us or gets back, kept apart from
retrievers and evaluation (the lowest layer, with ``text``). One module per file format
(``course``, ``jsonl``, ``csvfile``, ``fever``, ``climate_fever``, ``beir``, ``trec``) detects,
reads and writes it; ``evidence`` (knowledge sources), ``claims`` (claims, predictions,
label sets) and ``qrels`` (judged queries) pick the module; ``records`` holds the streaming
primitives they share. Also: ``convert``, ``explanations`` (the ``.explain.json`` sidecar),
``rundir``, ``splits``, ``files`` (atomic writes, checksums) and ``safe_load``. See
docs/formats.md.
"""
