"""Loading trained models that someone else may have written, without running their code:
skops files whose types are all trusted (:data:`TRUSTED_MODEL_TYPES`, the one allow-list,
held as names so this low layer imports nothing above it) and whose values are sane, and
written byte-reproducibly. See docs/trust-model.md.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from factcheck.errors import InputError

#: The types a saved classifier or reranker may contain beyond skops's own defaults; a file
#: with any other type is refused before loading (a new model class must be added here).
TRUSTED_MODEL_TYPES: tuple[str, ...] = (
    # factcheck's own classes and functions (stored by reference, never as code)
    "factcheck.classification.features.ClaimEvidenceFeatures",
    "factcheck.retrieval.rerank.model.RelevanceModel",
    "factcheck.retrieval.rerank.model.ModelConfig",
    "factcheck.text.analyzer.TextAnalyzer",
    "factcheck.text.analyzer.split_tags",
    "factcheck.text.analyzer.analyze",
    # scikit-learn parts skops does not trust by default
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
)

#: The most a model file may hold once inflated, checked before anything is inflated
#: (~50 times the course's models).
MODEL_SIZE_LIMIT = 1 << 30

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def dump_model(obj, dest: Path) -> None:
    """Write ``obj`` with skops to ``dest``, canonically (the caller makes it atomic)."""
    import skops.io as sio
    Path(dest).write_bytes(canonical_skops(sio.dumps(obj)))


def canonical_skops(data: bytes) -> bytes:
    """The same skops archive with its run-dependent parts made canonical: ``id()``-based ids
    and file names renumbered in the order the schema first names them (what shares an id
    still does), every entry the same timestamp. A vectoriser's ``_stop_words_id`` (a stale
    ``id()``) is written as 0, which no live object's id equals: its check runs again."""
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
                    # skops memoizes no falsy id: the same bytes whatever the stale value was
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
    """Load a skops file whose every type is trusted and whose values are sane, else a
    one-line InputError; ``probe(obj)`` runs the loaded model once (any exception: refused)."""
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
    except Exception as exc:  # not a zip, no schema, ...: say so in one line
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None
    try:
        # skops audits every type against its defaults and our list before constructing
        # anything; the file's tree is built once (listing the untrusted types first built it
        # twice, a large share of a big classifier's load).
        obj = sio.load(io.BytesIO(data), trusted=list(TRUSTED_MODEL_TYPES))
    except Exception as exc:
        refused = _refused_types(data)
        if refused:
            raise InputError(path, None, f"refusing to load {what}: it contains types that are not trusted "
                             f"({', '.join(refused[:3])}{', ...' if len(refused) > 3 else ''})") from None
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


def _refused_types(data: bytes) -> list[str]:
    """The types of a skops archive that neither skops nor :data:`TRUSTED_MODEL_TYPES` trusts
    (none when the archive cannot be read that far): only to word a refusal."""
    import skops.io as sio
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception:
        return []
    return sorted(set(untrusted) - set(TRUSTED_MODEL_TYPES))


class BadModel(Exception):
    """A model file's contents break what scikit-learn or our code relies on."""


def _check_archive(data: bytes) -> None:
    """Before inflating: the declared sizes within the limit (zipfile never inflates past
    them), every ``.npy`` header describing exactly its bytes (``np.load`` allocates it)."""
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
    return isinstance(value, str) and 0 < len(value) <= 100 and value.isprintable() and not set(value) & set("<>&\"'")


def check_model_values(obj) -> None:
    """Raise :class:`BadModel` unless ``obj``'s object graph has the structure
    scikit-learn's code relies on (docs/trust-model.md lists the checks)."""
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
