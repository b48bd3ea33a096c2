"""``factcheck tag``, ``export-tags`` and ``verify``: the offline tag index."""

from __future__ import annotations

from pathlib import Path

from factcheck.cli.options import (add_embedding_args, add_mode_arg, add_quiet_arg, add_source_args, add_tag_args,
                                   check_outputs,
                                   embedding_model_from_args, plural, source_from_args, tag_job_from_args)

__all__ = ["add_tag", "add_export_tags", "add_verify"]


def add_tag(p):
    add_source_args(p)
    p.add_argument("--out", type=Path, required=True, help="index directory to write (or resume)")
    add_tag_args(p)
    add_mode_arg(p)
    add_embedding_args(p, build=True)
    add_quiet_arg(p)

    def run(args):
        from factcheck.errors import InputError
        from factcheck.retrieval.registry import check_mode
        from factcheck.text.embedding import describe_model
        if args.scheduler and args.backend != "dask":
            raise InputError(None, None, "only meaningful with --backend dask", param="scheduler")
        embedding_model = embedding_model_from_args(args)
        check_mode(args.mode, embedding_model)  # open without its extra: one line before hours of tagging
        manifest = tag_job_from_args(args).run(source_from_args(args), args.out, force=args.force)
        print(f"{args.out}: {plural(manifest.n_passages, 'passage')} in {plural(len(manifest.shards), 'shard')}, "
              f"{manifest.data['empty_tags']} with no tags")
        if args.mode == "open":
            from factcheck.tagging.vectors import PassageVectorJob
            # the manifest the tagging job built or verified; the run's shard size: reused there
            vectors = PassageVectorJob(jobs=args.jobs, embedding_model=embedding_model).run(args.out, manifest)
            print(f"{args.out}/vectors: {plural(vectors['passages'], 'passage')} x {vectors['dim']} {vectors['dtype']} "
                  f"in {plural(len(vectors['shards']), 'shard')} ({describe_model(vectors['model'])})")
    return run


def add_export_tags(p):
    p.add_argument("index", type=Path, help="tag index directory")
    p.add_argument("--out", type=Path, required=True, help="JSONL file to write")

    def run(args):
        from factcheck.tagging.index import export_tags
        check_outputs([args.out], [args.index])
        n = export_tags(args.index, args.out)
        print(f"{args.out}: {plural(n, 'passage')}")
    return run


def add_verify(p):
    p.add_argument("index", type=Path, help="tag index directory")

    def run(args):
        from factcheck.tagging.store import check_caches, verify_index
        from factcheck.tagging.pool_vectors import POOL_VECTORS_DIR, verify_pool_vectors
        from factcheck.tagging.vectors import verify_vectors
        from factcheck.text.embedding import describe_model
        m = verify_index(args.index)  # every check of an open, and every file's sha256
        check_caches(args.index)
        print(f"{args.index}: OK ({plural(m.n_passages, 'passage')}, {plural(len(m.shards), 'shard')}, "
              f"{plural(len(m.files()), 'file')} verified)")
        v = verify_vectors(args.index, m)
        if v is not None:
            print(f"{args.index}/vectors: OK ({v['passages']} x {v['dim']} {v['dtype']}, {describe_model(v['model'])}, "
                  f"{plural(len(v['shards']), 'shard')} verified; "
                  f"content sha256 {v['content_sha256']})")
        for model, passages in verify_pool_vectors(args.index):
            print(f"{args.index}/{POOL_VECTORS_DIR}: OK ({plural(passages, 'passage')} of the candidate pools, "
                  f"{describe_model(model)})")
    return run
