"""Which words of a passage to highlight: those whose stem, under the one text analysis, is a
shared tag; offsets are code points into the original text."""

from __future__ import annotations

from factcheck.text.analyzer import stem_token, word_runs


def highlight_spans(text: str, shared) -> list[dict]:
    """``[{"start", "end", "stem"}]`` for every word of ``text`` whose stem is in ``shared``."""
    shared = set(shared or ())
    if not shared or not text:
        return []
    stemmed = ((m, stem_token(m.group().lower())) for m in word_runs(text))
    return [{"start": m.start(), "end": m.end(), "stem": stem} for m, stem in stemmed if stem and stem in shared]


def segments(text: str, spans: list[dict]) -> list[tuple[str, str | None]]:
    """``text`` cut at the spans: ``(piece, stem)``, ``stem`` None for plain text."""
    out, pos = [], 0
    for s in spans:
        if s["start"] > pos:
            out.append((text[pos:s["start"]], None))
        out.append((text[s["start"]:s["end"]], s["stem"]))
        pos = s["end"]
    if pos < len(text):
        out.append((text[pos:], None))
    return out

