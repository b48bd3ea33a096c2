"""Which words of a passage to highlight: those whose stem is a shared tag.

Tags are stems and passages are words, so the only faithful way back from a tag to
the words it came from is to run the same analysis (:mod:`factcheck.text.analyzer`)
over the passage and mark each word whose stem is shared. ``word_tokens`` lower-cases
and takes runs of word characters; here the same runs are found in the original text
so their offsets point at the characters the reader sees. Offsets are Python string
indices (code points).
"""

from __future__ import annotations

from factcheck.text.analyzer import TextAnalyzer, word_runs

_ANALYZER = TextAnalyzer()


def highlight_spans(text: str, shared) -> list[dict]:
    """``[{"start", "end", "stem"}]`` for every word of ``text`` whose stem is in ``shared``."""
    shared = set(shared or ())
    if not shared or not text:
        return []
    spans = []
    for m in word_runs(text):
        stem = _ANALYZER.stem(m.group().lower())
        if stem and stem in shared:
            spans.append({"start": m.start(), "end": m.end(), "stem": stem})
    return spans


def segments(text: str, spans: list[dict]) -> list[tuple[str, str | None]]:
    """``text`` cut at the spans: ``(piece, stem)`` with ``stem`` None for plain text.

    Templates render the pieces with autoescaping, wrapping only the marked ones in
    ``<mark>``, so passage text can never become markup.
    """
    out, pos = [], 0
    for s in spans:
        if s["start"] > pos:
            out.append((text[pos:s["start"]], None))
        out.append((text[s["start"]:s["end"]], s["stem"]))
        pos = s["end"]
    if pos < len(text):
        out.append((text[pos:], None))
    return out

