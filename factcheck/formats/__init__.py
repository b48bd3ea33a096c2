"""Readers and writers for every file a user hands us or gets back (BEIR-style: data
formats are kept apart from retrievers and evaluation). The lowest layer with ``text``.

``evidence`` (the knowledge source, streamed: course JSON, JSONL, CSV; the course format's
parser is ``course_json``, the shared chunked UTF-8 decoding ``utf8_stream``), ``claims`` (claim
files and leaderboard predictions), ``explanations`` (the one ``.explain.json`` sidecar),
``splits`` (the seeded training/hold-out split), ``files`` (atomic writes, checksums,
strict reads) and ``safe_load`` (loading arrays and models without running code).
"""
