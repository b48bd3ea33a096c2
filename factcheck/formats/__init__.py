"""Readers and writers for every file a user hands us or gets back (BEIR-style: data
formats are kept apart from retrievers and evaluation). The lowest layer with ``text``.

``evidence`` (the knowledge source, streamed: course JSON, JSONL, CSV, FEVER wiki pages,
Climate-FEVER's sentences, BEIR corpora; the course format's parser is ``course_json``, the
shared chunked UTF-8 decoding ``utf8_stream``, the one JSON-lines record primitive
``jsonlines``), ``claims`` (claims files in every format, predictions, label sets), ``fever``
and ``climate_fever`` (those datasets' own files), ``convert`` (one format as another, losses
listed), ``explanations`` (the one ``.explain.json`` sidecar), ``splits`` (the seeded
training/hold-out split), ``files`` (atomic writes, checksums, strict reads) and
``safe_load`` (loading arrays and models without running code). See docs/formats.md.
"""
