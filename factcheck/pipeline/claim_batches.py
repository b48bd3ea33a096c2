"""Checking many claims in fixed batches, here or on workers that load the index and model
once and return each batch's verdicts; a claim's evidence never depends on its batch, so the
bytes are the same for any backend.
"""

from __future__ import annotations

import json
from pathlib import Path

from factcheck.errors import InputError, check_number
from factcheck.formats.claims import read_claims
from factcheck.formats.npy import release_mapped
from factcheck.retrieval.base import retriever_spec
from factcheck.system.checker import FactChecker, Verdicts
from factcheck.tagging.heap import return_freed_memory

__all__ = ["BATCH_SIZE", "stream_batches"]

BATCH_SIZE = 1000  # claims per task: ~1-5 s of work at 1.2M passages, a few MB of results


def stream_batches(index_dir: Path, model_dir: Path, claims_path: Path, claims: list | None, on_batch, *,
                   claims_options: dict | None = None, mode: str | None = None, method: str | None = None,
                   jobs: int = 1, backend: str = "loky", scheduler: str | None = None,
                   batch_size: int = BATCH_SIZE, progress: bool | None = None,
                   embedding_model: str | Path | None = None) -> dict:
    """Check every claim of ``claims_path`` (``claims``: already read with ``claims_options``)
    and call ``on_batch(claims, verdicts, spec)`` here for each batch as it is done, in claim
    order, ``spec`` the retriever's record, which it returns; no batch is kept after its call.
    ``embedding_model``: where the index's local embedding model is now."""
    from factcheck.tagging.backends import WorkerPool, resolve_jobs
    check_number(batch_size, "batch_size", integer=True, low=1)
    options = dict(claims_options or {})
    claims = read_claims(claims_path, **options) if claims is None else claims
    bounds = [(a, min(a + batch_size, len(claims))) for a in range(0, len(claims), batch_size)] or [(0, 0)]
    local = backend == "loky" and resolve_jobs(jobs) == 1
    if local:
        system = FactChecker.load(index_dir, model_dir, method=method, mode=mode)
        spec = retriever_spec(system.retriever)
        from factcheck.progress import progress as progress_bar
        batches = progress_bar(bounds, desc="checking claims", unit="batches", enabled=len(bounds) > 1 and progress)
        for a, b in batches:
            on_batch(claims[a:b], system.check(claims[a:b]), spec)
        return spec
    if embedding_model is not None:
        from factcheck.text.onnx_embedding import model_location
        embedding_model = model_location(embedding_model)  # a packaged name, or a directory in full
    spec = None
    args = [(str(Path(index_dir).resolve()), str(Path(model_dir).resolve()), str(Path(claims_path).resolve()),
             options, mode, method, embedding_model, a, b) for a, b in bounds]

    def done(task: tuple, result: tuple) -> None:  # here, in claim order; the batch is not kept
        nonlocal spec
        a, b = task[-2], task[-1]
        verdicts, spec = Verdicts(result[0]), spec or result[1]
        if [v.id for v in verdicts] != [c.id for c in claims[a:b]]:  # the workers read another file
            raise InputError(claims_path, None, "changed while its claims were being checked")
        on_batch(claims[a:b], verdicts, spec)

    # The caller's open of the index (its checks' temporaries, a few bytes a passage) left freed
    # heap that glibc would keep while the workers run (docs/decisions.md, "Predict's driver
    # returns its freed heap before the workers start").
    return_freed_memory()
    with WorkerPool(backend, jobs, scheduler) as pool:
        pool.check_shared(Path(claims_path))  # Dask: every worker reads the claims (and index) there
        pool.stream(_check_batch, args, desc="checking claims", progress=progress, total=len(args), on_result=done)
    return spec


_SYSTEMS: dict = {}
_CLAIMS: dict = {}


def _check_batch(index_dir: str, model_dir: str, claims_path: str, claims_options: dict, mode, method,
                 embedding_model, start: int, stop: int) -> tuple[list, dict]:
    """One task, on a worker: the verdicts of claims [start, stop) and the retriever's record
    (returned as objects: the pool carries them back, no file between)."""
    key = (index_dir, model_dir, mode, method, embedding_model)
    system = _SYSTEMS.get(key)
    if system is None:  # once per worker process: the index and model from shared storage
        _SYSTEMS.clear()
        if embedding_model is not None:  # a moved local model: found before anything names it
            from factcheck.tagging.vectors import relocate_embedding_model
            relocate_embedding_model(Path(index_dir), embedding_model)
        system = _SYSTEMS[key] = FactChecker.load(Path(index_dir), Path(model_dir), method=method, mode=mode)
    stamp = (claims_path, Path(claims_path).stat().st_mtime_ns, json.dumps(claims_options, sort_keys=True))
    claims = _CLAIMS.get(stamp)
    if claims is None:
        _CLAIMS.clear()
        claims = _CLAIMS[stamp] = read_claims(Path(claims_path), **claims_options)
    verdicts = list(system.check(claims[start:stop]))
    # loky restarts a worker whose RSS grew by 300 MB (its leak guard), and RSS counts the index
    # pages a batch read: at 25M, every few minutes, each restart opening the index and the
    # model again. Dropped here, the pages stay in the page cache for the next batch.
    release_mapped(index_dir)
    return verdicts, retriever_spec(system.retriever)
