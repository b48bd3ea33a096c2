"""Loading files that someone else may have written, without running their code.

Trust model: an index, a model directory or a run directory is *data*. Whoever can
write one must not be able to run code in the process that opens it -- a plain
``joblib.load``/``pickle.load`` would run any callable the file names. So:

* **Shards** (``passages/``, ``tags/``, ``work/``) and the index's vectorisers stay
  joblib files but are read by :func:`load_joblib_arrays`, a restricted unpickler that
  admits only numpy arrays, numpy scalars/dtypes and plain containers (dict, list,
  tuple, str, bytes, numbers). Any other global in the stream is refused before it is
  imported, let alone called.
* **Trained models** (the classifier, the reranker) are written with skops and read by
  :func:`load_model`, which lists the file's types *before* loading and refuses the file
  unless every type is one skops trusts by default (numpy, scipy, builtins, scikit-learn
  estimators) or is listed in :data:`TRUSTED_MODEL_TYPES`. skops never unpickles: it
  rebuilds objects of trusted types from their stored state.

:data:`TRUSTED_MODEL_TYPES` is the one allow-list of model types; a new estimator or a
new factcheck transformer class must be added there (the round-trip tests fail until it
is). It holds type *names*, so this low layer imports nothing from the layers above.
"""

from __future__ import annotations

import io
from pathlib import Path

from factcheck.errors import InputError

# --------------------------------------------------------------------------- joblib shards

_SAFE_GLOBALS = frozenset({
    ("joblib.numpy_pickle", "NumpyArrayWrapper"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
})


class UnsafeFile(Exception):
    """The file names a global outside the allow-list (it would run code if loaded)."""


def _restricted_unpickler():
    from joblib.numpy_pickle import NumpyArrayWrapper, NumpyUnpickler

    class PlainArrayWrapper(NumpyArrayWrapper):
        # An object array's items are a nested pickle that older joblib versions read
        # with an unrestricted unpickler: refuse them (our shards never hold any).
        def read_array(self, unpickler, *args, **kwargs):
            if self.dtype.hasobject:
                raise UnsafeFile("an array of Python objects")
            return super().read_array(unpickler, *args, **kwargs)

    class RestrictedUnpickler(NumpyUnpickler):
        def find_class(self, module, name):
            if (module, name) not in _SAFE_GLOBALS:
                raise UnsafeFile(f"{module}.{name}")
            if (module, name) == ("joblib.numpy_pickle", "NumpyArrayWrapper"):
                return PlainArrayWrapper
            return super().find_class(module, name)

    return RestrictedUnpickler


def load_joblib_arrays(path: Path, mmap: bool = False):
    """``joblib.load`` restricted to numpy arrays and plain containers.

    Raises :class:`UnsafeFile` for any other type, ``FileNotFoundError`` when missing,
    and other exceptions for unreadable bytes (callers name the file in one line).
    """
    from joblib.numpy_pickle import _validate_fileobject_and_memmap

    path = Path(path)
    mmap_mode = "r" if mmap else None
    with open(path, "rb") as fh:
        with _validate_fileobject_and_memmap(fh, str(path), mmap_mode) as (fobj, mode):
            if isinstance(fobj, str):  # joblib < 0.10 layout (companion files): never ours
                raise UnsafeFile("legacy joblib format")
            unpickler = _restricted_unpickler()(str(path), fobj, mmap_mode is None, mmap_mode=mode)
            return unpickler.load()


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


def dump_model(obj, dest: Path) -> None:
    """Write ``obj`` with skops to ``dest`` (the caller makes it atomic)."""
    import skops.io as sio
    sio.dump(obj, dest)


def load_model(path: Path, what: str):
    """Load a skops file whose every type is trusted; anything else -> one-line InputError."""
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
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:  # not a zip, no schema, ...: say so in one line
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None
    refused = sorted(set(untrusted) - set(TRUSTED_MODEL_TYPES))
    if refused:
        raise InputError(path, None, f"refusing to load {what}: it contains types that are not trusted "
                         f"({', '.join(refused[:3])}{', ...' if len(refused) > 3 else ''})")
    try:
        return sio.load(io.BytesIO(data), trusted=list(untrusted))
    except Exception as exc:
        raise InputError(path, None, f"not a readable {what} ({type(exc).__name__})") from None


__all__ = ["TRUSTED_MODEL_TYPES", "UnsafeFile", "dump_model", "load_joblib_arrays", "load_model"]
