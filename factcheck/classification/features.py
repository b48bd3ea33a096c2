"""``(claim, [passages])`` pairs -> sparse features, as a scikit-learn transformer. Groups:

* ``claim``, ``evidence``: TF-IDF of the claim's words (1-2 grams; alone, the claim-only
  baseline) and of the evidence text;
* ``shared`` / ``unshared``: bags of the claim's stems that do / do not occur in the evidence;
* ``stats``: agreement statistics (stem overlap, numbers confirmed or not, negation and
  hedging words, evidence count), standardised, times ``stats_weight``;
* ``dense`` (open mode only): claim-passage cosines of the sentence embeddings (best, mean,
  worst, centroid), scaled like ``stats``; the embedding package loads only for it.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import StandardScaler

from factcheck.errors import InputError
from factcheck.tagging.packing import pack_strings, strings_of
from factcheck.text.analyzer import analyze, split_tags
from factcheck.text.analyzer import cue_words, number_strings

ALL_GROUPS = ("claim", "evidence", "shared", "unshared", "stats")
OPEN_GROUPS = ALL_GROUPS + ("dense",)  # every group the open mode may offer the CV
NEGATION = frozenset("not no never none nor cannot without neither lack lacks lacking fail fails failed "
                     "false myth myths deny denies denied contrary unlikely nothing".split())
HEDGES = frozenset("may might could possibly likely uncertain uncertainty debate debated disputed "
                   "controversial some suggest suggests suggested unclear".split())
# The groups of numbers, each scaled by its own fitted StandardScaler (these attribute names
# are part of classifier.skops' format); the other groups are TF-IDF vocabularies.
SCALED = {"stats": "scaler_", "dense": "dense_scaler_"}


def dense_stats(X, embedding: dict | None = None) -> np.ndarray:
    """The ``dense`` group's values: :func:`cosine_stats` of the sentence embeddings.
    ``embedding``: the model (``None``: bundled)."""
    from factcheck.text.embedding import load_embedder
    embedder = load_embedder(embedding)
    return cosine_stats(X, lambda texts: embedder.embed(texts, kind="query"),
                        lambda texts: embedder.embed(texts, kind="passage"))


def cosine_stats(X, embed_claims, embed_passages) -> np.ndarray:
    """Per pair: (max, mean, min) claim-passage cosine and the cosine with the passages'
    centroid; zeros for a claim with no evidence.

    Parameters
    ----------
    X : list of (str, list of str)
        ``(claim, [passages])`` pairs.
    embed_claims, embed_passages : callable
        Texts -> their L2-normalised vectors (one row each); each is called once, with the
        distinct claims / passages of ``X`` in sorted order.

    Example
    -------
    >>> unit = lambda texts: np.array([[1.0, 0.0] if "sea" in t else [0.0, 1.0] for t in texts])
    >>> cosine_stats([("sea rises", ["sea level", "ice"]), ("sea rises", [])], unit, unit).tolist()
    [[1.0, 0.5, 0.0, 0.7071067811865475], [0.0, 0.0, 0.0, 0.0]]
    """
    claims = sorted({c for c, _ in X})
    passages = sorted({e for _, ev in X for e in ev})
    claim_at, passage_at = ({t: i for i, t in enumerate(ts)} for ts in (claims, passages))
    claim_vectors = np.asarray(embed_claims(claims)).astype(np.float64)
    passage_vectors = np.asarray(embed_passages(passages)).astype(np.float64) if passages else None
    out = np.zeros((len(X), 4))
    for i, (claim, evidence) in enumerate(X):
        if not evidence:
            continue
        q = claim_vectors[claim_at[claim]]
        E = passage_vectors[[passage_at[e] for e in evidence]]
        cos = np.einsum("jd,d->j", E, q)
        centroid = E.sum(axis=0)
        norm = float(np.sqrt(np.einsum("d,d->", centroid, centroid)))
        out[i] = [cos.max(), cos.mean(), cos.min(), np.einsum("d,d->", centroid, q) / norm if norm > 0 else 0.0]
    return out


def agreement_stats(claim: str, evidence: list[str]) -> list[float]:
    """The ``stats`` group's values of one pair."""
    claim_stems = set(analyze(claim))
    passage_stems = [set(analyze(e)) for e in evidence]
    union = set().union(*passage_stems) if passage_stems else set()
    denom = max(1, len(claim_stems))
    per_passage = [len(claim_stems & s) / denom for s in passage_stems] or [0.0]
    claim_words = cue_words(claim)
    evidence_words = cue_words(" ".join(evidence))
    per = max(1, len(evidence))
    claim_numbers = set(number_strings(claim))
    evidence_numbers = set(number_strings(" ".join(evidence)))
    return [
        max(per_passage), float(np.mean(per_passage)), len(claim_stems & union) / denom,
        float(len(evidence)),
        float(sum(w in NEGATION for w in claim_words)), sum(w in NEGATION for w in evidence_words) / per,
        float(sum(w in HEDGES for w in claim_words)), sum(w in HEDGES for w in evidence_words) / per,
        float(len(claim_numbers)), float(len(claim_numbers & evidence_numbers)),
        float(len(claim_numbers - evidence_numbers)),
    ]


class ClaimEvidenceFeatures(BaseEstimator, TransformerMixin):
    """``(claim, [passages])`` pairs -> the feature groups of the module docstring. Its
    fitted attributes are part of ``classifier.skops``' format."""

    def __init__(self, groups=ALL_GROUPS, stats_weight: float = 0.3, min_df: int = 2, embedding: dict | None = None):
        self.groups = groups
        self.stats_weight = stats_weight
        self.min_df = min_df
        self.embedding = embedding

    # Each fitted vocabulary is saved as one packed pair of arrays, not as a dict that skops
    # writes and audits one node a term: those nodes were most of loading a classifier
    # (docs/decisions.md, "Models saved packed"). Older files load as before.
    def __getstate__(self):
        state = super().__getstate__()
        if not state.get("vectorizers_"):
            return state
        vectorizers, packed = {}, {}
        for g, v in state["vectorizers_"].items():
            vocabulary = v.__dict__.get("vocabulary_")
            if isinstance(vocabulary, dict):
                v = copy.copy(v)
                del v.vocabulary_
                packed[g] = pack_strings(sorted(vocabulary, key=vocabulary.__getitem__))  # term of each column
            vectorizers[g] = v
        return {**state, "vectorizers_": vectorizers, "vocabularies_": packed}

    def __setstate__(self, state):
        packed = state.get("vocabularies_")
        if packed is not None:
            state = {k: v for k, v in state.items() if k != "vocabularies_"}
            for g, (buf, offsets) in packed.items():
                terms = strings_of(buf, offsets)
                state["vectorizers_"][g].vocabulary_ = dict(zip(terms, range(len(terms))))
        super().__setstate__(state)

    def _views(self, X) -> dict:
        # getattr: a model saved before local embedding models has no such attribute
        return views_of(X, self.groups, getattr(self, "embedding", None))

    def fit_views(self, views: dict) -> "ClaimEvidenceFeatures":
        """Fit on precomputed :func:`views_of` output (the CV analyses each text once)."""
        unknown = set(self.groups) - set(OPEN_GROUPS)
        if unknown or not self.groups:
            raise ValueError(f"groups must be a non-empty subset of {OPEN_GROUPS}, got {self.groups}")
        self.vectorizers_ = {}
        for g in self.groups:
            if g in SCALED:
                setattr(self, SCALED[g], StandardScaler().fit(views[g]))
            elif g in ("shared", "unshared"):
                self.vectorizers_[g] = TfidfVectorizer(analyzer=split_tags, sublinear_tf=True).fit(views[g])
            else:
                self.vectorizers_[g] = TfidfVectorizer(ngram_range=(1, 2) if g == "claim" else (1, 1),
                                                       sublinear_tf=True, min_df=self.min_df).fit(views[g])
        return self

    def transform_views(self, views: dict):
        """Transform precomputed :func:`views_of` output."""
        parts = self.group_matrices(views)
        return sp.hstack([parts[g] for g in self.groups]).tocsr()

    def group_matrices(self, views: dict, groups=None) -> dict:
        """Each group's columns of :meth:`transform_views` (``groups``: of those only), by group.
        A group is fitted alone, so its columns are the same in any feature set that holds it."""
        out = {}
        for g in self.groups if groups is None else groups:
            if g in SCALED:
                out[g] = sp.csr_matrix(getattr(self, SCALED[g]).transform(views[g]) * self.stats_weight)
            else:
                out[g] = self.vectorizers_[g].transform(views[g])
        return out

    def fit(self, X, y=None):
        """Fit every group's vectoriser or scaler on the pairs ``X``."""
        require_two_labels(y, param="y")
        return self.fit_views(self._views(X))

    def fit_transform(self, X, y=None):
        """:meth:`fit` then :meth:`transform`, analysing each pair once."""
        require_two_labels(y, param="y")
        views = self._views(X)
        return self.fit_views(views).transform_views(views)

    def transform(self, X):
        """The pairs ``X`` as one sparse matrix (groups side by side)."""
        return self.transform_views(self._views(X))


def require_two_labels(y, path=None, place=None, param=None) -> None:
    """A classifier learns from two labels or more: fewer is an InputError (``y`` None: no labels given).
    Before the features, whose vocabulary of one repeated text would fail first, and less clearly."""
    if y is None:
        return
    found = {str(v) for v in y}
    if len(found) < 2:
        what = f"every claim is labelled {next(iter(found))!r}" if found else "no labelled claims"
        raise InputError(path, place, f"{what}; a classifier needs training claims of at least two labels",
                         param=param)


def views_of(X, groups=ALL_GROUPS, embedding: dict | None = None) -> dict:
    """Each group's input for pairs ``X``, computed once (analysis is the costly part)."""
    groups = set(groups)
    views = {"claim": [c for c, _ in X], "evidence": [" ".join(e) for _, e in X]}
    if {"shared", "unshared"} & groups:
        shared, unshared = [], []
        for claim, ev in X:
            stems = analyze(claim)
            seen = {s for e in ev for s in analyze(e)}
            shared.append(" ".join(s for s in stems if s in seen))
            unshared.append(" ".join(s for s in stems if s not in seen))
        views["shared"], views["unshared"] = shared, unshared
    if "stats" in groups:
        views["stats"] = np.array([agreement_stats(c, e) for c, e in X], dtype=np.float64).reshape(len(X), -1)
    if "dense" in groups:
        views["dense"] = dense_stats(X, embedding)
    return views


def take_views(views: dict, rows) -> dict:
    """The views of the given rows (positions), in that order."""
    rows = np.asarray(rows, dtype=np.int64)
    return {k: (v[rows] if isinstance(v, np.ndarray) else [v[i] for i in rows]) for k, v in views.items()}


def concat_views(*parts: dict) -> dict:
    """The views of several row sets, one after the other."""
    keys = parts[0].keys()
    return {k: (np.vstack([p[k] for p in parts]) if isinstance(parts[0][k], np.ndarray)
                else [x for p in parts for x in p[k]]) for k in keys}
