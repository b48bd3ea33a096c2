"""``(claim, [passages])`` pairs -> sparse features, as a scikit-learn transformer. Groups:

* ``claim``, ``evidence``: TF-IDF of the claim's words (1-2 grams; alone, the claim-only
  baseline) and of the evidence text;
* ``shared`` / ``unshared``: bags of the claim's stems that do / do not occur in the evidence;
* ``stats``: agreement statistics (stem overlap, numbers confirmed or not, negation and
  hedging words, evidence count), standardised, times ``stats_weight``;
* ``dense`` (open mode only): claim-passage cosines of the sentence embeddings (best, mean,
  worst, centroid), scaled like ``stats``; the embedding package loads only for it;
* ``contextual`` (the two-stage classifier bet, reports/two-stage.md; offered to no CV by
  default): the same cosines from the pool's contextual model, then the evidence-averaged
  ``|q - e|`` and ``q * e``, scaled like ``stats``. Its vectors are given to :func:`views_of`
  (the pool-vector cache's, not embedded again), so it is read from precomputed views only.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import StandardScaler

from factcheck.errors import InputError
from factcheck.text.analyzer import analyze, split_tags
from factcheck.text.analyzer import cue_words, number_strings

ALL_GROUPS = ("claim", "evidence", "shared", "unshared", "stats")
OPEN_GROUPS = ALL_GROUPS + ("dense",)  # every group the open mode may offer the CV
EVERY_GROUP = OPEN_GROUPS + ("contextual",)
NEGATION = frozenset("not no never none nor cannot without neither lack lacks lacking fail fails failed "
                     "false myth myths deny denies denied contrary unlikely nothing".split())
HEDGES = frozenset("may might could possibly likely uncertain uncertainty debate debated disputed "
                   "controversial some suggest suggests suggested unclear".split())
# The groups of numbers, each scaled by its own fitted StandardScaler (these attribute names
# are part of classifier.skops' format); the other groups are TF-IDF vocabularies.
SCALED = {"stats": "scaler_", "dense": "dense_scaler_", "contextual": "contextual_scaler_"}


def dense_stats(X, embedding: dict | None = None) -> np.ndarray:
    """Per pair: (max, mean, min) claim-passage cosine and the cosine with the passages'
    centroid; zeros for a claim with no evidence. ``embedding``: the model (``None``: bundled)."""
    from factcheck.text.embedding import load_embedder
    embedder = load_embedder(embedding)
    return _pair_stats(X, lambda texts: embedder.embed(texts, kind="query"),
                       lambda texts: embedder.embed(texts, kind="passage"), contrast=False)


def contextual_stats(X, embed_claims, embed_passages) -> np.ndarray:
    """The ``contextual`` group's values: :func:`dense_stats`' four cosines, then the mean over
    the evidence of ``|q - e|`` and of ``q * e`` (claim vector q, passage vectors e).

    Parameters
    ----------
    X : list of (str, list of str)
        ``(claim, [passages])`` pairs.
    embed_claims, embed_passages : callable
        Texts -> their L2-normalised vectors (one row each) by the contextual model; the
        passages' from the pool-vector cache
        (:meth:`~factcheck.tagging.pool_vectors.PoolVectorCache.vectors`).

    Example
    -------
    >>> unit = lambda texts: np.array([[1.0, 0.0] if "sea" in t else [0.0, 1.0] for t in texts])
    >>> contextual_stats([("sea rises", ["sea level", "ice"])], unit, unit).tolist()
    [[1.0, 0.5, 0.0, 0.7071067811865475, 0.5, 0.5, 0.5, 0.0]]
    """
    return _pair_stats(X, embed_claims, embed_passages, contrast=True)


def _pair_stats(X, embed_claims, embed_passages, contrast: bool) -> np.ndarray:
    claims = sorted({c for c, _ in X})
    passages = sorted({e for _, ev in X for e in ev})
    claim_at, passage_at = ({t: i for i, t in enumerate(ts)} for ts in (claims, passages))
    claim_vectors = np.asarray(embed_claims(claims)).astype(np.float64)
    passage_vectors = np.asarray(embed_passages(passages)).astype(np.float64) if passages else None
    dim = claim_vectors.shape[1] if len(claims) else 0
    out = np.zeros((len(X), 4 + (2 * dim if contrast else 0)))
    for i, (claim, evidence) in enumerate(X):
        if not evidence:
            continue
        q = claim_vectors[claim_at[claim]]
        E = passage_vectors[[passage_at[e] for e in evidence]]
        cos = np.einsum("jd,d->j", E, q)
        centroid = E.sum(axis=0)
        norm = float(np.sqrt(np.einsum("d,d->", centroid, centroid)))
        out[i, :4] = [cos.max(), cos.mean(), cos.min(), np.einsum("d,d->", centroid, q) / norm if norm > 0 else 0.0]
        if contrast:
            out[i, 4:4 + dim] = np.abs(E - q).mean(axis=0)
            out[i, 4 + dim:] = (E * q).mean(axis=0)
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

    def _views(self, X) -> dict:
        # getattr: a model saved before local embedding models has no such attribute
        return views_of(X, self.groups, getattr(self, "embedding", None))

    def fit_views(self, views: dict) -> "ClaimEvidenceFeatures":
        """Fit on precomputed :func:`views_of` output (the CV analyses each text once)."""
        unknown = set(self.groups) - set(EVERY_GROUP)
        if unknown or not self.groups:
            raise ValueError(f"groups must be a non-empty subset of {EVERY_GROUP}, got {self.groups}")
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
        parts = []
        for g in self.groups:
            if g in SCALED:
                parts.append(sp.csr_matrix(getattr(self, SCALED[g]).transform(views[g]) * self.stats_weight))
            else:
                parts.append(self.vectorizers_[g].transform(views[g]))
        return sp.hstack(parts).tocsr()

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


def views_of(X, groups=ALL_GROUPS, embedding: dict | None = None, contextual=None) -> dict:
    """Each group's input for pairs ``X``, computed once (analysis is the costly part).
    ``contextual``: the ``contextual`` group's ``(embed_claims, embed_passages)``
    (:func:`contextual_stats`)."""
    groups = set(groups)
    if "contextual" in groups and contextual is None:
        raise InputError(None, None, "the contextual group needs the contextual model's vectors "
                         "(embed_claims, embed_passages)", param="contextual")
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
    if "contextual" in groups:
        views["contextual"] = contextual_stats(X, *contextual)
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
