"""Readers and writers for every file a user hands us or gets back (BEIR-style: data
formats are kept apart from retrievers and evaluation)."""
