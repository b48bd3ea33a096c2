"""Readers and writers of every file a user hands us or gets back: one module per file
format; ``evidence``, ``claims`` and ``qrels`` pick the module. See docs/formats.md."""
