"""Loading trained models that someone else may have written, without running their code.

Trust model: a model directory is *data*. Whoever can write one must not be able to run
code in the process that opens it -- ``pickle.load`` would run any callable the file
names. (A tag index holds only ``.npy`` arrays, read with ``allow_pickle=False``:
:mod:`factcheck.tagging.store`.) So:

* **Trained models** (the classifier, the reranker) are written with skops and read by
  :func:`load_model`, which lists the file's types *before* loading and refuses the file
  unless every type is one skops trusts by default (numpy, scipy, builtins, scikit-learn
  estimators) or is listed in :data:`TRUSTED_MODEL_TYPES`. skops never unpickles: it
  rebuilds objects of trusted types from their stored state.
* Trusted types are not trusted *values*: a file made only of allowed types can still
  hold a ``coef_`` of the wrong shape, NaN weights, a label ``<script>`` or a tree whose
  child indices point outside it (scikit-learn's compiled predictor reads them unchecked).
  Before loading, the archive's inflated size is capped (:data:`MODEL_SIZE_LIMIT`: a
  2.5 MB file once inflated a 2 GiB ``coef_``) and every array's header must match its
  bytes; after loading, :func:`check_model_values` checks the structure scikit-learn
  relies on, and the caller's probe runs the model once. Any violation: one line.
* Model files are **byte-reproducible**: skops names arrays and references objects by
  ``id()`` and stamps zip entries with the current time, so :func:`dump_model` rewrites
  the archive canonically (ids and file names numbered in schema order, a fixed
  timestamp). What is loaded is unchanged (the same objects, sharing the same arrays).

:data:`TRUSTED_MODEL_TYPES` is the one allow-list of model types; a new estimator or a
new factcheck transformer class must be added there (the round-trip tests fail until it
is). It holds type *names*, so this low layer imports nothing from the layers above.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from factcheck.errors import InputError

# --------------------------------------------------------------------------- models (skops)

#: The types a saved classifier or reranker may contain beyond skops's own defaults
#: (numpy, scipy, builtins and scikit-learn estimators, which it rebuilds from state).
#: Extend it here when a model gains a factcheck-defined class or an estimator skops
#: does not trust by default; a file with any other type is refused before loading.
TRUSTED_MODEL_TYPES: tuple[str, ...] = (
    # factcheck's own classes and functions (stored by reference, never as code)
    "factcheck.classification.features.ClaimEvidenceFeatures",
    "factcheck.classification.stance.StanceFeatures",
    "factcheck.retrieval.rerank.model.RelevanceModel",
    "factcheck.retrieval.rerank.model.ModelConfig",
    "factcheck.text.analyzer.TextAnalyzer",
    "factcheck.text.analyzer.split_tags",
    "factcheck.text.analyzer.analyze",
    # scikit-learn parts skops does not trust by default
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
)


#: The most a model file may hold once inflated (the sum of its archive entries' sizes),
#: checked before anything is inflated. The course's models hold ~22 MB (classifier) and
#: ~3 MB (reranker); this is ~50 times that.
MODEL_SIZE_LIMIT = 1 << 30

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def dump_model(obj, dest: Path) -> None:
    """Write ``obj`` with skops to ``dest``, canonically (the caller makes it atomic)."""
    import skops.io as sio
    Path(dest).write_bytes(canonical_skops(sio.dumps(obj)))


def canonical_skops(data: bytes) -> bytes:
    """The same skops archive with its run-dependent parts made canonical.

    skops (0.16) writes ``"__id__": id(obj)`` for every object (on loading, equal ids are
    one shared object), names array files ``<id>.npy`` (bytes ``<uuid4>.bin``) and gives
    each zip entry the current time; it has no option for either. Ids are renumbered 1,
    2, ... and files 000001.npy, ... in the order the schema first names them (a
    bijection: what shares an id still does), and every entry gets the same timestamp;
    contents, order and compression are kept. One value scikit-learn itself stores is an
    ``id()`` too: a text vectoriser's ``_stop_words_id``, the cache key of a warning check
    (``id(self.stop_words)`` when it last ran). Stale in any other process, it is written
    as 0 (an object of its own), which no live object's id equals: the check runs again
    after loading, as it did with the stale id.
    """
    import zipfile
    src = zipfile.ZipFile(io.BytesIO(data))
    schema = json.loads(src.read("schema.json"))
    ids: dict[int, int] = {}
    files: dict[str, str] = {}

    def renumber(node):
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "__id__" and isinstance(value, int) and not isinstance(value, bool):
                    out[key] = ids.setdefault(value, len(ids) + 1)  # from 1: skops ignores a falsy id
                elif key == "file" and isinstance(value, str):
                    out[key] = files.setdefault(value, f"{len(files) + 1:06d}{Path(value).suffix}")
                elif key == "_stop_words_id" and isinstance(value, dict) and value.get("__loader__") == "JsonNode":
                    # Id 0 is never shared (skops memoizes no falsy id): the same bytes
                    # whether the stale value happened to be a small int shared elsewhere.
                    out[key] = {**value, "content": "0", "__id__": 0}
                else:
                    out[key] = renumber(value)
            return out
        if isinstance(node, list):
            return [renumber(v) for v in node]
        return node

    schema = renumber(schema)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as dst:
        for info in src.infolist():
            name = "schema.json" if info.filename == "schema.json" else files.get(info.filename)
            if name is None:
                raise ValueError(f"skops archive entry {info.filename!r} is not named by its schema")
            entry = zipfile.ZipInfo(name, date_time=_ZIP_EPOCH)
            entry.compress_type, entry.external_attr = info.compress_type, info.external_attr
            body = json.dumps(schema, indent=2).encode("utf-8") if name == "schema.json" else src.read(info)
            dst.writestr(entry, body)
    return buffer.getvalue()


def load_model(path: Path, what: str, probe=None):
    """Load a skops file whose every type is trusted and whose values are sane; anything
    else -> one-line InputError.

    ``probe(obj)``: the caller's check that the loaded model works (it runs it once on a
    tiny input and checks the output); any exception it raises is refused in one line.
    """
    import skops.io as sio
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, f"cannot read {what}: {exc.strerror or exc}") from None
    if data[:2] == b"\x80\x04" or data[:1] == b"\x80":
        raise InputError(path, None, f"refusing to load {what}: it is a pickle, which could run code "
                         "(models are saved with skops since this version; retrain it)")
    try:
        _check_archive(data)
    except BadModel as exc:
        raise InputError(path, None, f"refusing to load {what}: {exc}") from None
    except Exception as exc:  # not a zip, ...: say so in one line
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:  # not a zip, no schema, ...: say so in one line
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None
    refused = sorted(set(untrusted) - set(TRUSTED_MODEL_TYPES))
    if refused:
        raise InputError(path, None, f"refusing to load {what}: it contains types that are not trusted "
                         f"({', '.join(refused[:3])}{', ...' if len(refused) > 3 else ''})")
    try:
        obj = sio.load(io.BytesIO(data), trusted=list(untrusted))
    except Exception as exc:
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None
    try:
        check_model_values(obj)
        if probe is not None:
            probe(obj)
    except BadModel as exc:
        raise InputError(path, None, f"not a usable {what} (damaged or crafted: {exc})") from None
    except Exception as exc:  # the probe failed: the model does not work, whatever the reason
        raise InputError(path, None, f"not a usable {what} (damaged or crafted: running it failed "
                         f"with {type(exc).__name__})") from None
    return obj


class BadModel(Exception):
    """A model file's contents break what scikit-learn or our code relies on (a probe
    raises it to say why in the one-line error)."""


def _check_archive(data: bytes) -> None:
    """Before anything is inflated: the archive's declared sizes within the limit (zipfile
    never inflates an entry past its declared size), and every ``.npy`` entry's header
    describing exactly the bytes it holds (``np.load`` allocates what the header says)."""
    import zipfile
    archive = zipfile.ZipFile(io.BytesIO(data))
    infos = archive.infolist()
    total = sum(info.file_size for info in infos)
    if total > MODEL_SIZE_LIMIT:
        raise BadModel(f"it inflates to {total:,} bytes, more than the limit of {MODEL_SIZE_LIMIT:,}")
    for info in infos:
        if info.filename.endswith(".npz"):
            raise BadModel("it holds a sparse matrix (a factcheck model holds none)")
        if not info.filename.endswith(".npy"):
            continue
        with archive.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(version)
            if read_header is None:
                raise BadModel(f"array {info.filename} has an unknown .npy version {version}")
            shape, _fortran, dtype = read_header(fh, max_header_size=10_000)
            header = fh.tell()
        if dtype.hasobject or header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != info.file_size:
            raise BadModel(f"array {info.filename} does not hold what its header says")


def _label_text(value) -> bool:
    """A class label is short printable text without markup characters."""
    return isinstance(value, str) and 0 < len(value) <= 100 and value.isprintable() and not set(value) & set("<>&\"'")


def check_model_values(obj) -> None:
    """Raise :class:`BadModel` unless every array in ``obj``'s object graph has the
    structure scikit-learn's code relies on: float arrays finite; classes distinct (and, as
    text, printable labels); a linear model's ``coef_``/``intercept_`` shaped by its
    classes; a vectoriser's vocabulary exactly the columns of its IDF; a scaler's arrays
    one per feature; a gradient-boosted tree's children inside it and after their parent
    (its compiled predictor follows them unchecked), on known features, no categorical
    splits (ours have none). No sparse matrix at all (ours have none)."""
    seen: set[int] = set()
    stack = [obj]
    while stack:
        x = stack.pop()
        if id(x) in seen or x is None or isinstance(x, (str, bytes, int, float, bool, type)):
            continue
        seen.add(id(x))
        if isinstance(x, np.ndarray):
            _check_array(x)
            if x.dtype.hasobject:
                stack.extend(x.ravel().tolist())
            continue
        if isinstance(x, dict):
            stack.extend(x.values())
            continue
        if isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
            continue
        if type(x).__module__.startswith("scipy.sparse"):
            raise BadModel("it holds a sparse matrix (a factcheck model holds none)")
        attrs = getattr(x, "__dict__", None)
        if isinstance(attrs, dict):
            _check_estimator(x, attrs)
            stack.extend(attrs.values())


def _check_array(a: np.ndarray) -> None:
    if a.dtype.names:
        for name in a.dtype.names:
            if a.dtype[name].kind == "f" and not np.all(np.isfinite(a[name])):
                raise BadModel(f"a field {name!r} holds values that are not finite")
    elif a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
        raise BadModel("an array holds values that are not finite")


def _shape(x, name, shape) -> np.ndarray:
    a = getattr(x, name, None)
    if not isinstance(a, np.ndarray) or a.shape != tuple(shape):
        found = a.shape if isinstance(a, np.ndarray) else type(a).__name__
        raise BadModel(f"{type(x).__name__}.{name} is {found}, expected shape {tuple(shape)}")
    return a


def _check_estimator(x, attrs: dict) -> None:
    name = type(x).__name__
    classes = attrs.get("classes_")
    if classes is not None:
        if not isinstance(classes, np.ndarray) or classes.ndim != 1 or len(classes) < 1 \
                or len(set(classes.tolist())) != len(classes):
            raise BadModel(f"{name}.classes_ is not a list of distinct classes")
        if classes.dtype.kind in "US" and not all(_label_text(str(c)) for c in classes.tolist()):
            raise BadModel(f"{name}.classes_ holds a label that is not printable text without markup")
    n_features = attrs.get("n_features_in_")
    if "coef_" in attrs:
        if classes is None or not isinstance(n_features, (int, np.integer)):
            raise BadModel(f"{name} has coef_ but no classes_ or n_features_in_")
        rows = 1 if len(classes) == 2 else len(classes)
        _shape(x, "coef_", (rows, int(n_features)))
        _shape(x, "intercept_", (rows,))
    vocabulary = attrs.get("vocabulary_")
    if isinstance(vocabulary, dict) or "vocabulary_" in attrs:
        values = list(vocabulary.values()) if isinstance(vocabulary, dict) else None
        if values is None or not all(isinstance(k, str) for k in vocabulary) \
                or sorted(v if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else -1
                          for v in values) != list(range(len(values))):
            raise BadModel(f"{name}.vocabulary_ does not map terms onto the columns 0..n-1")
        tfidf = attrs.get("_tfidf")
        idf = getattr(tfidf, "__dict__", {}).get("idf_") if tfidf is not None else None
        if idf is not None and (not isinstance(idf, np.ndarray) or idf.shape != (len(values),)):
            raise BadModel(f"{name}'s idf_ does not have one value per vocabulary term")
    if "scale_" in attrs and isinstance(n_features, (int, np.integer)):
        for key in ("mean_", "var_", "scale_"):
            if attrs.get(key) is not None:
                _shape(x, key, (int(n_features),))
    if "_predictors" in attrs:
        _check_boosting(x, attrs)


def _check_boosting(x, attrs: dict) -> None:
    """A HistGradientBoosting model: what its compiled predictor reads without checking."""
    n_features = attrs.get("n_features_in_")
    per_iteration = attrs.get("n_trees_per_iteration_")
    predictors = attrs["_predictors"]
    if not isinstance(n_features, (int, np.integer)) or not isinstance(per_iteration, (int, np.integer)) \
            or not isinstance(predictors, list) or per_iteration < 1:
        raise BadModel("a boosted model without its sizes")
    _shape(x, "_baseline_prediction", (1, int(per_iteration)))
    mapper = attrs.get("_bin_mapper")
    is_cat = getattr(mapper, "__dict__", {}).get("is_categorical_")
    if not isinstance(is_cat, np.ndarray) or is_cat.shape != (int(n_features),) or np.any(is_cat):
        raise BadModel("a boosted model with categorical features (ours have none)")
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE
    for trees in predictors:
        if not isinstance(trees, list) or len(trees) != per_iteration:
            raise BadModel("a boosting iteration with the wrong number of trees")
        for tree in trees:
            nodes = getattr(tree, "__dict__", {}).get("nodes")
            if not isinstance(nodes, np.ndarray) or nodes.dtype != PREDICTOR_RECORD_DTYPE or nodes.ndim != 1 \
                    or len(nodes) < 1:
                raise BadModel("a tree without its node table")
            inner = np.flatnonzero(nodes["is_leaf"] == 0)
            if np.any(nodes["is_leaf"] > 1) or np.any(nodes["missing_go_to_left"] > 1) or np.any(nodes["is_categorical"]):
                raise BadModel("a tree node with an impossible flag")
            n = len(nodes)
            for child in ("left", "right"):
                c = nodes[child][inner].astype(np.int64)
                if np.any(c <= inner) or np.any(c >= n):
                    raise BadModel("a tree node whose child is outside the tree or before it")
            f = nodes["feature_idx"][inner]
            if np.any(f < 0) or np.any(f >= n_features):
                raise BadModel("a tree node splitting on a feature the model does not have")


__all__ = ["BadModel", "MODEL_SIZE_LIMIT", "TRUSTED_MODEL_TYPES", "canonical_skops", "check_model_values",
           "dump_model", "load_model"]
