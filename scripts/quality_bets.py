"""The pre-registered quality bets (``reports/quality-bets.md``), measured by cross-validation
on the training claims only.

Bets 1 and 2 need two packages outside the project's dependency list; install them into a
developer venv only (they are not in ``pyproject.toml``; the owner decides)::

    pip install lightgbm==4.7.0 gensim==4.4.0

Usage (one evidence file and one mode per call; every split's result is cached under
``--cache`` so an interrupted call resumes, and the arms share the candidates/features)::

    python -m scripts.quality_bets --index IDX --name proxy --cache /work/bets-cache/proxy \
        [--mode course|open] [--parts rerank,labels] [--check-determinism]
    python -m scripts.quality_bets --summarise /work/bets-cache   # the tables of the report

``IDX`` is a tag index of the evidence file (e.g. a ``factcheck run``'s ``OUT/index``; the
open mode needs its passage vectors). Nothing here touches dev or test claims.

Folds: ``factcheck.classification.cv.cv_splits`` (stratified 5-fold x 3, seed 90042) over
the 1,228 training claims. Inside each split's training part T every arm makes its own
choices (the default reranker exactly as ``train_reranker(index, fit, holdout,
memory_claims=T)`` on T's fixed 80/20 split); the split's test part is only scored.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from factcheck.classification.cv import cross_validate, cv_splits, in_label_order, release_workers
from factcheck.classification.features import ALL_GROUPS, take_views, views_of
from factcheck.evaluation.course_metric import evidence_f, evidence_f_from_counts
from factcheck.evaluation.intervals import bootstrap_mean, paired_bootstrap_diff
from factcheck.formats.claims import read_claims
from factcheck.formats.splits import train_holdout_split
from factcheck.retrieval.rerank import features as F
from factcheck.retrieval.rerank.model import RelevanceModel, SEED as MODEL_SEED
from factcheck.retrieval.rerank.semantic import ALL_FEATURES
from factcheck.retrieval.rerank.terms import TermIndex
from factcheck.text.analyzer import letter_runs, split_stems

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
# The defaults of today's reference runs (/work/baseline/*/metrics.json), per evidence file.
DEFAULT_READER = {"proxy": ("bm25", {"k1": 0.9, "b": 0.4, "k": 4, "method": "lucene"}),
                  "wiki": ("tags", {"t_sim": 0.0, "t_overlap": 0.0, "k": 10})}
DEFAULT_CLASSIFIER = {"proxy": {"C": 0.5, "groups": ("claim", "evidence", "stats")},
                      "wiki": {"C": 0.25, "groups": ALL_GROUPS}}
W2V = {"vector_size": 100, "window": 5, "min_count": 2, "negative": 5, "sample": 1e-3, "sg": 1,
       "seed": 90042, "workers": 1}
W2V_EPOCHS = {"proxy": 5, "wiki": 30}
LGB_GRID = ({"num_leaves": 15, "min_child_samples": 100}, {"num_leaves": 7, "min_child_samples": 200})
CUTOFF_KS = 8
SOFT_FEATURES = ["soft_cov_idf", "soft_cov_mean", "soft_unmatched", "soft_frac50", "w2v_centroid_cos"]
TAUS = tuple(round(0.10 + 0.05 * i, 2) for i in range(17))   # 0.10 .. 0.90
AUXILIARIES = ("is", "are", "was", "were", "has", "have", "had", "will", "would", "can", "could", "does",
               "do", "did", "should", "may", "might", "must")
STANDALONE_NUMBER = re.compile(r"(?<![^\W\d_])\d[\d,]*(?:\.\d+)?(?![^\W\d_]|\d)")
NEGATIONS = re.compile(r"\s+(not|never)\b|n't\b", re.I)


def claim_split(result_path: Path) -> bool:
    """Whether this process may compute the split (several processes share the splits)."""
    lock = result_path.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        lock.open("x").close()
        return True
    except FileExistsError:
        return False


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def dump(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj))
    tmp.replace(path)


# --------------------------------------------------------------------------- word vectors
class WordVectors:
    """Unit word vectors over the reranker's stems, trained on the knowledge source only."""

    def __init__(self, stems: list[str], vectors: np.ndarray, surface: dict[str, str]):
        self.stems = stems
        self.row = {s: i for i, s in enumerate(stems)}
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.unit = (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float64)
        self.surface = surface

    @classmethod
    def train_or_load(cls, index, name: str, cache: Path, check: bool = False) -> "WordVectors":
        path = cache / "w2v.npz"
        if path.is_file():
            with np.load(path, allow_pickle=False) as z:
                return cls(z["stems"].tolist(), z["vectors"], json.loads(str(z["surface"])))
        from gensim.models import Word2Vec
        t0 = time.perf_counter()
        sentences = [split_stems(t) for t in index.texts]
        surface = _surface_forms(index.texts)
        log(f"w2v: {len(sentences)} passages tokenised in {time.perf_counter() - t0:.0f} s")
        runs = []
        for _ in range(2 if check else 1):
            t1 = time.perf_counter()
            m = Word2Vec(sentences, epochs=W2V_EPOCHS[name], **W2V)
            runs.append((m, time.perf_counter() - t1))
        m, seconds = runs[0]
        stems = list(m.wv.index_to_key)
        vectors = m.wv.vectors.astype(np.float32)
        info = {"train_s": seconds, "stems": len(stems), "tokens": int(sum(map(len, sentences))),
                "params": {**W2V, "epochs": W2V_EPOCHS[name]},
                "sha256": hashlib.sha256(vectors.tobytes()).hexdigest()}
        if check:
            info["second_run_sha256"] = hashlib.sha256(runs[1][0].wv.vectors.astype(np.float32).tobytes()).hexdigest()
            info["deterministic"] = info["sha256"] == info["second_run_sha256"]
        dump(cache / "w2v.json", info)
        log("w2v:", info)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:  # renamed when complete: another process may be waiting for it
            np.savez(fh, stems=np.array(stems, dtype=str), vectors=vectors,
                     surface=np.array(json.dumps({s: surface[s] for s in stems if s in surface})))
        tmp.replace(path)
        return cls(stems, vectors, surface)

    def neighbour(self, stem: str) -> tuple[str, float] | None:
        """The nearest other stem (cosine), ties by vocabulary order."""
        i = self.row.get(stem)
        if i is None:
            return None
        sims = self.unit @ self.unit[i]
        sims[i] = -2.0
        j = int(np.argmax(sims))
        return self.stems[j], float(sims[j])


def _surface_forms(texts) -> dict[str, str]:
    """Per stem, its most frequent lower-case surface word in the corpus (ties: alphabetical)."""
    counts = Counter(w.lower() for t in texts for w in re.findall(r"[^\W\d_]+", t))
    best: dict[str, tuple[int, str]] = {}
    for w, c in counts.items():
        s = split_stems(w)
        if len(s) != 1:
            continue
        cur = best.get(s[0])
        if cur is None or c > cur[0] or (c == cur[0] and w < cur[1]):
            best[s[0]] = (c, w)
    return {s: w for s, (c, w) in best.items()}


class SoftAligner:
    """Bet 2's soft-alignment features between a claim and passages (see the report)."""

    def __init__(self, wv: WordVectors, terms: TermIndex):
        self.wv, self.terms = wv, terms
        inv = [""] * len(terms.vocab)
        for t, j in terms.vocab.items():
            inv[j] = t
        # TermIndex term id -> word-vector row (-1: no vector)
        self.tid2w = np.array([wv.row.get(t, -1) for t in inv], dtype=np.int64)

    def claim(self, term_ids: np.ndarray, idf: np.ndarray):
        w = self.tid2w[term_ids] if len(term_ids) else np.zeros(0, np.int64)
        keep = w >= 0
        return w[keep], idf[keep]

    def passages(self, qw: np.ndarray, qidf: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
        """(len(groups), 5): each group is one passage's distinct TermIndex term ids."""
        lens = np.array([len(g) for g in groups], dtype=np.int64)
        flat = np.concatenate(groups).astype(np.int64) if len(groups) else np.zeros(0, np.int64)
        return self.flat(qw, qidf, flat, np.repeat(np.arange(len(groups)), lens), len(groups))

    def flat(self, qw, qidf, tids: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
        """(n, 5) from the passages' term ids laid end to end (``owner``: passage of each)."""
        out = np.zeros((n, len(SOFT_FEATURES)))
        w = self.tid2w[tids] if len(tids) else np.zeros(0, np.int64)
        keep = w >= 0
        w, owner = w[keep], owner[keep]
        if not len(qw) or not len(w):
            return out
        nz = np.unique(owner)                        # passages with a vector (owner is sorted)
        starts = np.searchsorted(owner, nz)
        E = self.wv.unit
        uw, inv = np.unique(w, return_inverse=True)                # passages share many terms
        sims = np.einsum("qd,td->qt", E[qw], E[uw])[:, inv]        # (q, total)
        best = np.maximum.reduceat(sims, starts, axis=1)           # (q, passages with vectors)
        present = np.maximum.reduceat((qw[:, None] == w[None, :]).astype(np.float64), starts, axis=1)
        best = np.where(present > 0, 1.0, np.minimum(best, 1.0))
        widf = qidf / qidf.sum()
        absent = 1.0 - present
        n_absent = absent.sum(axis=0)
        unmatched = np.divide((best * absent).sum(axis=0), n_absent, out=np.zeros(best.shape[1]),
                              where=n_absent > 0)
        cent = np.add.reduceat(E[w] * self.wv_idf(w)[:, None], starts, axis=0)
        cent /= np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-12)
        q = (E[qw] * qidf[:, None]).sum(axis=0)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        out[nz] = np.column_stack([widf @ best, best.mean(axis=0), unmatched, (best >= 0.5).mean(axis=0),
                                   cent @ q])
        return out

    def wv_idf(self, wrows: np.ndarray) -> np.ndarray:
        """The corpus idf of word-vector rows (via the stems' TermIndex ids)."""
        if not hasattr(self, "_w_idf"):
            self._w_idf = np.zeros(len(self.wv.stems))
            ok = self.tid2w >= 0
            self._w_idf[self.tid2w[ok]] = self.terms.idf[np.flatnonzero(ok)]
        return self._w_idf[wrows]

    def pool(self, query, rows: np.ndarray) -> np.ndarray:
        """The 5 columns for a claim's pool. A (claim, passage) pair's values depend on nothing
        else, so they are memoised per claim: the pools of the two memory settings and of the
        splits overlap almost entirely."""
        from factcheck.retrieval.rerank.terms import multi_arange
        memo = self.__dict__.setdefault("_memo", {})
        known_rows, known = memo.get(query.text, (np.zeros(0, np.int64), np.zeros((0, len(SOFT_FEATURES)))))
        new = np.setdiff1d(rows, known_rows)
        if len(new):
            qw, qidf = self.claim(query.term_ids, query.idf)
            fw = self.terms.forward
            pos, owner = multi_arange(fw.indptr[new], fw.indptr[new + 1])
            vals = self.flat(qw, qidf, fw.indices[pos].astype(np.int64), owner, len(new))
            all_rows = np.concatenate([known_rows, new])
            order = np.argsort(all_rows, kind="stable")
            known_rows, known = all_rows[order], np.vstack([known, vals])[order]
            memo[query.text] = (known_rows, known)
        return known[np.searchsorted(known_rows, rows)]

    def texts(self, claim: str, passages: list[str]) -> np.ndarray:
        """Bet 2's classifier columns for one (claim, passages read) pair."""
        ids, _ = self.terms.query_weights(split_stems(claim))
        qw, qidf = self.claim(ids, self.terms.idf[ids])
        groups = [self.terms.query_weights(split_stems(p))[0] for p in passages]
        if not passages or not len(qw):
            return np.zeros(5)
        per = self.passages(qw, qidf, groups)
        union = self.passages(qw, qidf, [np.unique(np.concatenate(groups))])[0]
        return np.array([per[:, 0].max(), per[:, 0].mean(), union[0], union[2], union[4]])


# --------------------------------------------------------------------------- reranker CV
def order_of(rows: np.ndarray, bm25: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The retriever's order: score desc, ties by BM25 desc, then row."""
    return np.lexsort((rows, -bm25, -scores))


def split_claimset(cs):
    bounds = np.concatenate([[0], np.cumsum([len(r) for r in cs.rows])])
    return bounds


class LearnedCutoff:
    """Bet 1's cut-off: P(gold) from (score, score - top, log rank), then the k <= 8 with
    the largest expected set F, 2 sum_{i<=k} p_i / (k + max(1, sum_pool p))."""

    def fit(self, per_claim_scores: list[np.ndarray], per_claim_gold: list[np.ndarray]):
        from sklearn.linear_model import LogisticRegression
        X = np.vstack([self._x(s) for s in per_claim_scores if len(s)])
        y = np.concatenate([g for s, g in zip(per_claim_scores, per_claim_gold) if len(s)])
        self.lr = LogisticRegression(C=1.0, max_iter=2000).fit(X, y)
        return self

    @staticmethod
    def _x(s_desc: np.ndarray) -> np.ndarray:
        return np.column_stack([s_desc, s_desc - s_desc[0], np.log1p(np.arange(len(s_desc)))])

    def count(self, s_desc: np.ndarray) -> int:
        if not len(s_desc):
            return 0
        p = self.lr.predict_proba(self._x(s_desc))[:, 1]
        g = max(1.0, float(p.sum()))
        ks = np.arange(1, min(CUTOFF_KS, len(p)) + 1)
        ef = 2 * np.cumsum(p)[:len(ks)] / (ks + g)
        return int(ks[int(np.argmax(ef))])


def _per_claim(cs, scores):
    """Per claim of a ClaimSet: (order, gold flags in that order)."""
    bounds = split_claimset(cs)
    bm25 = cs.X[:, F.FEATURES.index("bm25")]
    for i, rows in enumerate(cs.rows):
        a, b = bounds[i], bounds[i + 1]
        o = order_of(rows, bm25[a:b], scores[a:b])
        yield rows[o], scores[a:b][o], cs.y[a:b][o]


def ltr_fit(cs, params):
    import lightgbm as lgb
    sizes = np.array([len(r) for r in cs.rows])
    keep_rows = np.repeat(sizes > 0, sizes)
    model = lgb.LGBMRanker(objective="lambdarank", n_estimators=150, learning_rate=0.1,
                           lambdarank_truncation_level=20, num_threads=1, deterministic=True,
                           force_col_wise=True, seed=MODEL_SEED, verbose=-1, **params)
    model.fit(cs.X[keep_rows], cs.y[keep_rows], group=sizes[sizes > 0])
    return model


def ltr_tune(model, holdout):
    scores = model.predict(holdout.X, num_threads=1) if len(holdout.X) else np.zeros(0)
    ordered = list(_per_claim(holdout, scores))
    cut = LearnedCutoff().fit([s for _, s, _ in ordered], [y for _, _, y in ordered])
    k = np.array([cut.count(s) for _, s, _ in ordered])
    hits = np.array([y[:kk].sum() for (_, _, y), kk in zip(ordered, k)], dtype=np.float64)
    f = float(evidence_f_from_counts(hits, k, np.asarray(holdout.n_gold, dtype=np.float64)).mean())
    return cut, f


def with_soft(cs, aligner, gen, claims):
    """A copy of a ClaimSet with bet 2's columns appended."""
    from dataclasses import replace
    parts = []
    for claim, rows in zip(claims, cs.rows):
        parts.append(aligner.pool(gen.query(claim.text), rows))
    extra = np.vstack(parts) if parts else np.zeros((0, len(SOFT_FEATURES)))
    return replace(cs, X=np.hstack([cs.X, extra]))


def soft_fit_tune(fit_set, holdout_set, n_base: int):
    from factcheck.training.rerank import DEFAULT_GRID, tune_holdout_cutoff
    best = None
    base = ALL_FEATURES[:n_base]
    for cfg in DEFAULT_GRID:
        model = RelevanceModel(base, cfg)
        model._cols = np.arange(fit_set.X.shape[1])  # the base columns plus bet 2's
        model.fit(fit_set.X, fit_set.y)
        cutoff, f = tune_holdout_cutoff(model, holdout_set)
        if best is None or f > best[2] + 1e-12:
            best = (model, cutoff, f, cfg)
    return best


def ids_of(index, rows) -> list[str]:
    return [index.ids[int(r)] for r in rows]


def rerank_cv(index, train, splits, name: str, mode: str, cache: Path, aligner, bets: set, only=range(15)):
    from factcheck.training.rerank import (DEFAULT_CANDIDATES, DENSE_CANDIDATES, TrainingData, build_claim_set,
                                           train_reranker)
    dense = mode == "open"
    configs = DENSE_CANDIDATES if dense else DEFAULT_CANDIDATES
    features = list(ALL_FEATURES) if dense else list(F.FEATURES)
    terms = TermIndex.for_index(index)
    ctx = F.FeatureContext(index, terms)
    scorer = None
    if dense:
        from factcheck.retrieval.rerank.semantic import load_scorer
        scorer = load_scorer(index)
    row_of = index.row_of
    for s_no, split in enumerate(splits):
        out_path = cache / f"rerank-{mode}" / f"split{s_no:02d}.json"
        if s_no not in only or out_path.is_file() or not claim_split(out_path):
            continue
        t0 = time.perf_counter()
        held = set(split.test.tolist())
        T = [c for i, c in enumerate(train) if i not in held]
        test = [train[i] for i in split.test.tolist()]
        fit, holdout = train_holdout_split(T)
        result = {"test_ids": [c.id for c in test], "arms": {}, "timings": {}}
        datas, retrievers = [], []
        for cfg in configs:
            d = TrainingData(index, fit, holdout, cfg, terms, ctx, progress=False, dense=scorer)
            r = train_reranker(index, fit, holdout, dense=dense, features=features, memory_claims=T, data=d,
                               progress=False)
            datas.append(d)
            retrievers.append(r)
        result["timings"]["default_s"] = time.perf_counter() - t0
        hold_f = [r.report["holdout"]["evidence_f"] for r in retrievers]
        chosen = 0 if hold_f[0] >= hold_f[1] - 1e-12 else 1  # train_reranker: later must win by > 1e-12
        default = retrievers[chosen]
        sel = default.retrieve([c.text for c in test])
        result["arms"]["default"] = {"ids": [s.ids for s in sel], "holdout_f": hold_f[chosen],
                                     "chosen": {"candidates": configs[chosen].to_json(),
                                                **default.report["chosen"]}}
        # test pools with memory = T, per candidate setting (shared by the other arms)
        tests = []
        for r in retrievers:
            tests.append(build_claim_set(r.generator, ctx, test, row_of, False, False))
        # sanity: the default arm re-derived from the cached pools equals retrieve()
        p = default.model.predict(tests[chosen].X)
        again = []
        for (rows, s, _), claim in zip(_per_claim(tests[chosen], p), test):
            again.append(ids_of(index, rows[:default.cutoff.count(s)]) if len(rows) else None)
        mismatch = sum(1 for a, b in zip(again, result["arms"]["default"]["ids"]) if a is not None and a != b)
        if mismatch:
            raise RuntimeError(f"split {s_no}: re-derived default differs for {mismatch} claims")
        fallback = {c.id: ids for c, ids, a in zip(test, result["arms"]["default"]["ids"], again) if a is None}

        def finish(cs, scores, count):
            out = []
            for (rows, s, _), claim in zip(_per_claim(cs, scores), test):
                out.append(ids_of(index, rows[:count(s)]) if len(rows) else fallback[claim.id])
            return out

        if "1" in bets:
            t1 = time.perf_counter()
            best = None
            for ci, d in enumerate(datas):
                for params in LGB_GRID:
                    model = ltr_fit(d.fit_set, params)
                    cut, f = ltr_tune(model, d.holdout_set)
                    if best is None or f > best[2] + 1e-12:
                        best = (model, cut, f, ci, params)
            model, cut, f, ci, params = best
            scores = model.predict(tests[ci].X, num_threads=1) if len(tests[ci].X) else np.zeros(0)
            result["arms"]["ltr"] = {"ids": finish(tests[ci], scores, cut.count), "holdout_f": f,
                                     "chosen": {"candidates": configs[ci].to_json(), "model": params}}
            # exploratory decomposition: the learned cut-off on the default's pointwise probabilities
            dm = default.model
            dcut, df_ = ltr_tune_pointwise(dm, datas[chosen].holdout_set)
            result["arms"]["default+learned_cutoff"] = {
                "ids": finish(tests[chosen], dm.predict(tests[chosen].X), dcut.count), "holdout_f": df_}
            result["timings"]["ltr_s"] = time.perf_counter() - t1
        if "2r" in bets:
            t2 = time.perf_counter()
            best = None
            for ci, d in enumerate(datas):
                fit_aug = with_soft(d.fit_set, aligner, query_analyser(d), fit)
                hold_aug = with_soft(d.holdout_set, aligner, query_analyser(d), holdout)
                model, cutoff, f, cfg = soft_fit_tune(fit_aug, hold_aug, len(features))
                if best is None or f > best[2] + 1e-12:
                    best = (model, cutoff, f, ci, cfg)
            model, cutoff, f, ci, cfg = best
            test_aug = with_soft(tests[ci], aligner, retrievers[ci].generator, test)
            result["arms"]["soft"] = {"ids": finish(test_aug, model.predict(test_aug.X), cutoff.count),
                                      "holdout_f": f, "chosen": {"candidates": configs[ci].to_json(),
                                                                  "model": cfg.to_json(),
                                                                  "cutoff": cutoff.to_json()}}
            result["timings"]["soft_s"] = time.perf_counter() - t2
        result["f"] = {arm: [evidence_f(ids, c.evidences) for ids, c in zip(v["ids"], test)]
                       for arm, v in result["arms"].items()}
        result["timings"]["total_s"] = time.perf_counter() - t0
        dump(out_path, result)
        log(f"rerank {name}/{mode} split {s_no}: " + ", ".join(f"{a} {np.mean(v):.3f}" for a, v in result["f"].items())
            + f" ({result['timings']['total_s']:.0f} s)")
        del datas, retrievers, tests


def query_analyser(d):
    """A generator over ``d``'s corpus: only its ``query()`` (claim analysis) is used."""
    from factcheck.retrieval.rerank.candidates import CandidateGenerator
    return CandidateGenerator(d.terms, None, d.config)


def ltr_tune_pointwise(model, holdout):
    """Exploratory: :class:`LearnedCutoff` on the pointwise model's probabilities."""
    return ltr_tune(_Pointwise(model), holdout)


class _Pointwise:
    def __init__(self, model):
        self.model = model

    def predict(self, X, num_threads=1):
        return self.model.predict(X)


# --------------------------------------------------------------------------- label CV
def reader_evidence(index, train, name: str, splits, cache: Path) -> dict:
    from factcheck.training.cv_evidence import out_of_fold_evidence
    path = cache / "reader-evidence.json"
    if path.is_file():
        return json.loads(path.read_text())
    kind, params = DEFAULT_READER[name]
    if kind == "bm25":
        from factcheck.retrieval.bm25 import BM25Retriever
        reader = BM25Retriever(**params).fit(index)
    else:
        from factcheck.retrieval.tag_rule import TagRuleRetriever
        reader = TagRuleRetriever(**params).fit(index)
    ev = out_of_fold_evidence(train, [s.test for s in splits if s.repeat == 0], reader=reader)
    dump(path, ev)
    return ev


def correct_of(result, y) -> np.ndarray:
    return np.array([result.predictions(r) == y for r in range(result.proba.shape[0])])


def label_cv(index, train, splits, name: str, mode: str, cache: Path, wv: WordVectors, aligner, bets: set,
             only=range(15)):
    out_path = cache / f"labels-{mode}.json"
    done = json.loads(out_path.read_text()) if out_path.is_file() else {"correct": {}, "timings": {}}
    y = np.array([c.label for c in train])
    ev = reader_evidence(index, train, name, splits, cache)
    texts_of = index.texts_of
    X_gold = [(c.text, texts_of(c.evidences)) for c in train]
    X_read = [(c.text, texts_of(ev[c.id])) for c in train]
    cfg = DEFAULT_CLASSIFIER[name]
    groups = tuple(cfg["groups"]) + (("dense",) if mode == "open" else ())
    grid = {"C": (cfg["C"],), "class_weight": (None,), "stats_weight": (0.3,), "augment": (True,),
            "groups": (groups,)}
    need_views = {"default", "soft"} - set(done["correct"]) if "2c" in bets else {"default"} - set(done["correct"])
    if need_views:
        t0 = time.perf_counter()
        gold_views, read_views = views_of(X_gold, groups), views_of(X_read, groups)
        log(f"labels {name}/{mode}: views {time.perf_counter() - t0:.0f} s")
        if "default" not in done["correct"]:
            t0 = time.perf_counter()
            res = cross_validate(y, splits, gold_views, [read_views] * 3, grid, "default", jobs=1)[0]
            done["correct"]["default"] = correct_of(res, y).astype(int).tolist()
            done["timings"]["default_s"] = time.perf_counter() - t0
            dump(out_path, done)
        if "2c" in bets and "soft" not in done["correct"]:
            t0 = time.perf_counter()
            soft_gold = np.array([aligner.texts(c, e) for c, e in X_gold])
            soft_read = np.array([aligner.texts(c, e) for c, e in X_read])
            g2 = dict(gold_views, stats=np.hstack([gold_views["stats"], soft_gold]))
            r2 = dict(read_views, stats=np.hstack([read_views["stats"], soft_read]))
            res = cross_validate(y, splits, g2, [r2] * 3, grid, "soft", jobs=1)[0]
            done["correct"]["soft"] = correct_of(res, y).astype(int).tolist()
            done["timings"]["soft_s"] = time.perf_counter() - t0
            dump(out_path, done)
        release_workers()
    if "3" in bets and "stance_rule" not in done["correct"]:
        t0 = time.perf_counter()
        correct, gold_correct, chosen = stance_rule_cv(train, y, splits, ev, texts_of, wv, mode,
                                                       cache / f"stance-{mode}", only)
        if correct is None:  # only some splits done (--max-splits): see the per-split files
            return
        done["correct"]["stance_rule"] = correct.astype(int).tolist()
        done["gold_correct_stance_rule"] = gold_correct.astype(int).tolist()
        done["stance_rule_thresholds"] = chosen
        done["timings"]["stance_rule_s"] = time.perf_counter() - t0
        dump(out_path, done)
    for arm, c in done["correct"].items():
        log(f"labels {name}/{mode} {arm}: " + " ".join(f"{np.mean(r):.3f}" for r in c))


# --------------------------------------------------------------------------- bet 3
def mutate(claim: str, kind: str, wv: WordVectors) -> str | None:
    if kind == "number":
        m = STANDALONE_NUMBER.search(claim)  # not the 2 of CO2
        if m is None:
            return None
        x = m.group()
        v = float(x.replace(",", ""))
        if x.isdigit() and len(x) == 4 and 1000 <= v <= 2100:  # a year
            new = str(int(v) - 50)
        elif "." in x:
            new = f"{v * 3:.{len(x.split('.')[1])}f}"
        else:
            new = f"{int(v) * 3:,}" if "," in x else str(int(v) * 3)
        return claim.replace(x, new, 1)
    if kind == "negation":
        if NEGATIONS.search(claim):
            return NEGATIONS.sub("", claim, count=1)
        for m in re.finditer(r"[A-Za-z']+", claim):
            if m.group().lower() in AUXILIARIES:
                return claim[:m.end()] + " not" + claim[m.end():]
        return "It is not true that " + claim[:1].lower() + claim[1:]
    if kind == "antonym":
        best = None
        for m in letter_runs(claim):
            w = m.group()
            if not w.islower() or len(w) < 4:
                continue
            s = split_stems(w)
            if len(s) != 1:
                continue
            nb = wv.neighbour(s[0])
            if nb is None or nb[0] not in wv.surface:
                continue
            if best is None or nb[1] > best[0] + 1e-12:
                best = (nb[1], m, wv.surface[nb[0]])
        if best is None:
            return None
        _, m, word = best
        return claim[:m.start()] + word + claim[m.end():]
    raise ValueError(kind)


MUTATIONS = ("number", "antonym", "negation")


def mutated_claims(train, wv) -> dict[int, tuple[str, str]]:
    out = {}
    for i, c in enumerate(train):
        if c.label != "SUPPORTS":
            continue
        for j in range(len(MUTATIONS)):
            kind = MUTATIONS[(i + j) % len(MUTATIONS)]
            text = mutate(c.text, kind, wv)
            if text and text != c.text:
                out[i] = (kind, text)
                break
    return out


def stance_rule_cv(train, y, splits, ev, texts_of, wv, mode, cache: Path, only=range(15)):
    from sklearn.model_selection import StratifiedKFold
    groups = PAIR_GROUPS + (("dense",) if mode == "open" else ())
    mutants = mutated_claims(train, wv)
    pairs, owner, kind, label = [], [], [], []
    for i, c in enumerate(train):
        gold = set(c.evidences)
        stance = {"SUPPORTS": "SUPPORTS", "REFUTES": "REFUTES", "NOT_ENOUGH_INFO": "IRRELEVANT"}.get(c.label)
        for e, t in zip(c.evidences, texts_of(c.evidences)):
            pairs.append((c.text, [t])); owner.append(i); kind.append("gold"); label.append(stance)
        for e, t in zip(ev[c.id], texts_of(ev[c.id])):
            pairs.append((c.text, [t])); owner.append(i); kind.append("read")
            label.append(None if e in gold else "IRRELEVANT")
        if i in mutants:
            for t in texts_of(c.evidences):
                pairs.append((mutants[i][1], [t])); owner.append(i); kind.append("mutant"); label.append("REFUTES")
    owner, kind = np.array(owner), np.array(kind)
    label = np.array(label, dtype=object)
    t0 = time.perf_counter()
    views = views_of(pairs, groups)
    log(f"stance: {len(pairs)} pairs analysed in {time.perf_counter() - t0:.0f} s; "
        f"mutations {Counter(k for k, _ in mutants.values())}")

    def fit_on(claims):
        rows = np.flatnonzero(np.isin(owner, claims) & (label != None))  # noqa: E711
        sub = take_views(views, rows)
        return _fit_stance_groups(sub, list(label[rows]), groups)

    def maxima(stance, claims, which="read"):
        rows = np.flatnonzero(np.isin(owner, claims) & (kind == which))
        p = stance_proba(stance, take_views(views, rows))
        out = np.zeros((len(train), 2))
        for r, pr in zip(rows.tolist(), p):
            i = owner[r]
            out[i] = np.maximum(out[i], pr[:2])
        return out[np.asarray(claims)]

    def rule(m, ts, tr):
        s, r = m[:, 0] >= ts, m[:, 1] >= tr
        return np.where(s & r, "DISPUTED", np.where(s, "SUPPORTS", np.where(r, "REFUTES", "NOT_ENOUGH_INFO")))

    repeats = 1 + max(s.repeat for s in splits)
    correct = np.zeros((repeats, len(train)), dtype=bool)
    gold_correct = np.zeros_like(correct)
    chosen = []
    incomplete = False
    for s_no, s in enumerate(splits):
        part = cache / f"split{s_no:02d}.json"
        if part.is_file():
            r = json.loads(part.read_text())
            correct[s.repeat, s.test] = r["correct"]
            gold_correct[s.repeat, s.test] = r["gold_correct"]
            chosen.append(r["chosen"])
            continue
        if s_no not in only or not claim_split(part):
            incomplete = True
            continue
        T = s.train
        inner = np.zeros((len(T), 2))
        skf = StratifiedKFold(INNER_FOLDS, shuffle=True, random_state=INNER_SEED)
        for tr, te in skf.split(np.zeros(len(T)), y[T]):
            inner[te] = maxima(fit_on(T[tr]), T[te])
        best = None
        for ts in TAUS:
            for tr_ in TAUS:
                acc = float(np.mean(rule(inner, ts, tr_) == y[T]))
                if best is None or acc > best[0] + 1e-12:
                    best = (acc, ts, tr_)
        stance = fit_on(T)
        pred = rule(maxima(stance, s.test), best[1], best[2])
        correct[s.repeat, s.test] = pred == y[s.test]
        gold_correct[s.repeat, s.test] = rule(maxima(stance, s.test, "gold"), best[1], best[2]) == y[s.test]
        chosen.append({"repeat": s.repeat, "fold": s.fold, "tau_s": best[1], "tau_r": best[2],
                       "inner_accuracy": best[0]})
        dump(part, {"correct": correct[s.repeat, s.test].tolist(),
                    "gold_correct": gold_correct[s.repeat, s.test].tolist(), "chosen": chosen[-1]})
        log(f"stance split r{s.repeat}f{s.fold}: tau {best[1]}/{best[2]} inner {best[0]:.3f} "
            f"test {np.mean(pred == y[s.test]):.3f}")
    if incomplete:
        return None, None, None
    return correct, gold_correct, chosen


# The stance model of bet 3 (a package module until it lost under CV; docs/decisions.md).
STANCES = ("SUPPORTS", "REFUTES", "IRRELEVANT")
PAIR_GROUPS = ("evidence", "shared", "unshared", "stats")
INNER_FOLDS, INNER_SEED = 5, 7


def _fit_stance_groups(views, stances, groups):
    """``(features, model)`` fitted on pair views and their stances (None, None: one stance only)."""
    from sklearn.linear_model import LogisticRegression
    from factcheck.classification.features import ClaimEvidenceFeatures
    if len(set(stances)) < 2:
        return None, None
    features = ClaimEvidenceFeatures(groups=groups, min_df=1).fit_views(views)
    model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=5000)
    return features, model.fit(features.transform_views(views), list(stances))


def stance_proba(stance, views: dict) -> np.ndarray:
    """(pairs, 3) in ``STANCES`` order."""
    features, model = stance
    if model is None or not len(views["claim"]):
        return np.zeros((0, len(STANCES)))
    return in_label_order(model.predict_proba(features.transform_views(views)), model.classes_, STANCES, 0.0)


# --------------------------------------------------------------------------- summary
def summarise(root: Path) -> str:
    from factcheck.classification.cv import cv_splits as _splits
    train = read_claims(DATA / "train-claims.json", require_labels=True)
    splits = _splits([c.label for c in train])
    pos = {c.id: i for i, c in enumerate(train)}
    lines = []
    for name in ("proxy", "wiki"):
        for mode in ("course", "open"):
            d = root / name / f"rerank-{mode}"
            files = sorted(d.glob("split*.json")) if d.is_dir() else []
            if files:
                vals: dict[str, np.ndarray] = {}
                for f in files:
                    r = json.loads(f.read_text())
                    s = splits[int(f.stem[5:])]
                    for arm, fs in r["f"].items():
                        vals.setdefault(arm, np.full((3, len(train)), np.nan))
                        vals[arm][s.repeat, [pos[i] for i in r["test_ids"]]] = fs
                lines.append(f"\n### rerank {name} {mode} ({len(files)}/15 splits)")
                base = vals["default"]
                for arm, v in vals.items():
                    ok = ~np.isnan(v).all(axis=0) & ~np.isnan(base).all(axis=0)
                    pc, pb = np.nanmean(v[:, ok], axis=0), np.nanmean(base[:, ok], axis=0)
                    reps = " / ".join(f"{np.nanmean(v[r]):.3f}" if (~np.isnan(v[r])).any() else "-"
                                      for r in range(3))
                    line = f"- {arm}: {bootstrap_mean(pc).fmt()} (repeats {reps}; claims {ok.sum()})"
                    if arm != "default":
                        line += f"; minus default {paired_bootstrap_diff(pc, pb).fmt()}"
                    lines.append(line)
            p = root / name / f"labels-{mode}.json"
            if p.is_file():
                r = json.loads(p.read_text())
                lines.append(f"\n### labels {name} {mode}")
                base = np.array(r["correct"]["default"], dtype=float).mean(axis=0)
                for arm, c in r["correct"].items():
                    c = np.array(c, dtype=float)
                    line = (f"- {arm}: {bootstrap_mean(c.mean(axis=0)).fmt()} (repeats "
                            + " / ".join(f"{x:.3f}" for x in c.mean(axis=1)) + ")")
                    if arm != "default":
                        line += f"; minus default {paired_bootstrap_diff(c.mean(axis=0), base).fmt()}"
                    lines.append(line)
                sdir = root / name / f"stance-{mode}"
                if "stance_rule" not in r["correct"] and sdir.is_dir():  # some splits done
                    c = np.full((3, len(train)), np.nan)
                    g = np.full((3, len(train)), np.nan)
                    for f in sorted(sdir.glob("split*.json")):
                        sp_ = splits[int(f.stem[5:])]
                        part = json.loads(f.read_text())
                        c[sp_.repeat, sp_.test] = part["correct"]
                        g[sp_.repeat, sp_.test] = part["gold_correct"]
                    full = np.array(r["correct"]["default"], dtype=float)
                    full[np.isnan(c)] = np.nan
                    ok = ~np.isnan(c).all(axis=0)
                    pc, pb = np.nanmean(c[:, ok], axis=0), np.nanmean(full[:, ok], axis=0)
                    lines.append(f"- stance_rule ({len(list(sdir.glob('split*.json')))}/15 splits): "
                                 f"{bootstrap_mean(pc).fmt()}; default on the same splits {bootstrap_mean(pb).fmt()}; "
                                 f"minus default {paired_bootstrap_diff(pc, pb).fmt()}; with gold evidence "
                                 f"{bootstrap_mean(np.nanmean(g[:, ok], axis=0)).fmt()}")
                if "gold_correct_stance_rule" in r:
                    g = np.array(r["gold_correct_stance_rule"], dtype=float).mean(axis=0)
                    lines.append(f"- stance_rule with gold evidence: {bootstrap_mean(g).fmt()}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path)
    ap.add_argument("--name", choices=("proxy", "wiki"))
    ap.add_argument("--cache", type=Path)
    ap.add_argument("--mode", choices=("course", "open"), default="course")
    ap.add_argument("--parts", default="rerank,labels")
    ap.add_argument("--bets", default="1,2r,2c,3")
    ap.add_argument("--check-determinism", action="store_true")
    ap.add_argument("--summarise", type=Path)
    ap.add_argument("--splits", default=None, help="only these split numbers (comma-separated; "
                    "processes sharing a cache take disjoint splits through lock files)")
    ap.add_argument("--wait-w2v", action="store_true", help="wait for another process to write w2v.npz")
    a = ap.parse_args(argv)
    if a.summarise:
        print(summarise(a.summarise))
        return 0
    from factcheck.tagging.index import TagIndex
    index = TagIndex.load(a.index)
    train = read_claims(DATA / "train-claims.json", require_labels=True)
    splits = cv_splits([c.label for c in train])
    bets = set(a.bets.split(","))
    only = set(range(len(splits))) if a.splits is None else {int(x) for x in a.splits.split(",")}
    while a.wait_w2v and bets & {"2r", "2c", "3"} and not (a.cache / "w2v.npz").is_file():
        time.sleep(15)
    wv = aligner = None
    if bets & {"2r", "2c", "3"}:  # the word vectors (bet 1 and the defaults do not need them)
        wv = WordVectors.train_or_load(index, a.name, a.cache, a.check_determinism)
        aligner = SoftAligner(wv, TermIndex.for_index(index))
    parts = a.parts.split(",")
    if "labels" in parts:
        label_cv(index, train, splits, a.name, a.mode, a.cache, wv, aligner, bets, only)
    if "rerank" in parts:
        rerank_cv(index, train, splits, a.name, a.mode, a.cache, aligner, bets, only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
