"""Option parsers, option groups and output-path checks shared by the sub-commands (only
light library modules at module level: ``factcheck --help`` builds every parser)."""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path

from factcheck.errors import InputError, Interval, ref
from factcheck.formats.claims import CLAIM_FORMATS, PREDICTION_FORMATS
from factcheck.formats.common import plural
from factcheck.formats.evidence import FORMATS as SOURCE_FORMATS
from factcheck.retrieval.registry import ALL_METHODS, MODES, POOL_SETTINGS
from factcheck.text.analyzer import ANALYZERS

__all__ = ["plural", "Deprecated", "add_renamed", "add_quiet_arg", "text_arg", "int_type", "positive_int", "non_negative_int", "jobs_type",
           "ParamOption", "ParamChoice", "check_output_dir", "check_outputs", "add_source_args", "add_reader_args",
           "add_claims_args", "add_cap_arg", "add_index_args", "add_tag_args", "add_backend_args", "add_mode_arg",
           "add_retriever_args", "add_pool_args", "pool_settings", "pool_from_args", "pool_model_from_args", "run_embedding_from_args", "add_analyzer_arg",
           "source_from_args", "source_options", "claims_options", "read_claims_from_args", "index_from_args",
           "tag_settings", "tag_job_from_args", "retriever_from_args", "add_embedding_args", "embedding_model_from_args",
           "relocate_from_args", "SOURCE_FORMATS", "CLAIM_FORMATS", "PREDICTION_FORMATS"]

OPEN_HELP = "open: also pretrained embeddings (the optional extra: pip install -e '.[open]')"


class Deprecated(argparse.Action):
    """An old option spelling: still accepted, with a one-line warning naming the new one."""

    def __init__(self, option_strings, dest, new: str = "", **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_renamed(p: argparse.ArgumentParser, new: str, old: str, required: bool = False, **kwargs) -> None:
    """Option ``new``, with the deprecated spelling ``old`` still accepted (one-line warning)."""
    group = p.add_mutually_exclusive_group(required=required)
    kwargs["help"] = f"{kwargs.get('help', '')} (the old spelling {old} still works, with a warning)".strip()
    action = group.add_argument(new, **kwargs)
    # Hidden from usage and help (the new option's help names it), so usage stays clean.
    group.add_argument(old, dest=action.dest, type=kwargs.get("type"), action=Deprecated, new=new,
                       help=argparse.SUPPRESS)


def add_quiet_arg(p: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars or progress lines (``main`` applies it to the whole command);
    warnings, errors and the result still print."""
    p.add_argument("--quiet", action="store_true", help="no progress output (warnings and the result still print)")


def text_arg(text: str) -> str:
    """A text argument (a query, a claim) must be UTF-8: other bytes arrive as lone surrogates."""
    bad = next((c for c in text if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"is not valid UTF-8 (byte 0x{ord(bad) - 0xdc00:02x}); "
                                         "give the text in UTF-8")
    return text


def int_type(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def constrained(constraint: Interval):
    """An argparse type: the number ``constraint`` (:class:`~factcheck.errors.Interval`) allows,
    checked by the library's own check; its message, for argparse to put after the flag."""

    def parse(text: str):
        try:
            return constraint.check(int_type(text) if constraint.kind is int else float(text), "")
        except ValueError as exc:  # float's own, or the check's InputError
            raise argparse.ArgumentTypeError(getattr(exc, "message", f"expected a number, got {text!r}")) from None
    return parse


positive_int = constrained(Interval(int, 1))
non_negative_int = constrained(Interval(int, 0))


def jobs_type(text: str) -> int:
    """joblib's convention: N workers, or -1 = all cores, -2 = all but one, ...; never 0."""
    value = int_type(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (N workers, or -1 for all cores)")
    return value


class ParamOption(argparse.Action):
    """``--param`` of a parameter ``owner`` (``"module:Class"``) declares in ``_parameter_constraints``:
    its type checks that constraint, its help ends with the class's default and the bounds, so
    both are written once. ``owner`` is imported only when the option is parsed or its help
    shown (``factcheck --help`` builds every parser). Default None: the class's default."""

    def __init__(self, option_strings, dest, owner: str = "", **kwargs):
        self.owner = owner
        # A closure, not a bound method: argparse's error path takes the type's repr.
        super().__init__(option_strings, dest, type=lambda text: constrained(self._spec()[0])(text), **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)

    def _spec(self):
        module, _, name = self.owner.partition(":")
        owner = getattr(importlib.import_module(module), name)
        return owner._parameter_constraints[self.dest], inspect.signature(owner).parameters[self.dest].default

    @property
    def help(self) -> str:
        constraint, default = self._spec()
        if isinstance(constraint, tuple):  # the choices: argparse shows them as the metavar
            return f"{self._help} (default: {default})"
        return f"{self._help} (default: {default:g}; {constraint.describe()})"

    @help.setter
    def help(self, text: str) -> None:
        self._help = text


class ParamChoice(ParamOption):
    """:class:`ParamOption` of a parameter declared as a tuple of the allowed strings: they are
    its choices (argparse checks them, the parser suggesting the closest), read from the class
    when it is parsed or shown. Add it to an argument group: a parser's own ``add_argument``
    formats the choices at once, which would import ``owner`` while every parser is built."""

    def __init__(self, option_strings, dest, owner: str = "", **kwargs):
        self.owner = owner
        argparse.Action.__init__(self, option_strings, dest, **kwargs)  # a string: no type to convert it

    @property
    def choices(self):
        return self._spec()[0]

    @choices.setter
    def choices(self, value) -> None:
        pass  # argparse's None: the declaration holds the choices


def check_output_dir(path) -> None:
    """An output directory must be creatable: refuse at once, before hours of work."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(p, None, "exists and is not a directory")
    parent = next((q for q in p.parents if q.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(p, None, f"cannot be created: {parent} is not a directory")


def check_outputs(outputs, inputs) -> None:
    """No output may overwrite an input, nor a file inside an input directory."""
    for out in outputs:
        o = Path(out).resolve()
        for inp in (i for i in inputs if i is not None):
            i = Path(inp).resolve()
            if o == i or (i.is_dir() and i in o.parents):
                raise InputError(out, None, f"would overwrite the input {inp}; choose another output path")


def add_source_args(p: argparse.ArgumentParser) -> None:
    """The knowledge source as a positional file, and how to read it (``tag``)."""
    p.add_argument("evidence", type=Path, help="knowledge source: course .json/.json.gz, .jsonl, .csv, FEVER "
                   "wiki-pages (a file or the directory), Climate-FEVER's release file or a BEIR corpus.jsonl")
    add_reader_args(p)


def add_reader_args(p: argparse.ArgumentParser, indexing: bool = True) -> None:
    """How to read a knowledge source, named as ``source_spec``'s parameters."""
    g = p.add_argument_group("reading the knowledge source (docs/formats.md)")
    g.add_argument("--format", choices=SOURCE_FORMATS, default=None,
                   help="knowledge-source format (default: from the file name, and for JSON lines from the first "
                        "record)")
    g.add_argument("--id-column", default=None, help="id field/column for JSONL and CSV (default: id)")
    g.add_argument("--text-column", default=None, help="text field/column for JSONL and CSV (default: text)")
    g.add_argument("--title-column", default=None,
                   help="title field/column for JSONL and CSV (default: none; FEVER, Climate-FEVER and BEIR "
                        "have titles)")
    if indexing:
        g.add_argument("--index-titles", action=argparse.BooleanOptionalAction, default=None,
                       help="index each title with its text (default: yes for BEIR, no otherwise; titles are "
                            "always stored and shown)")
    from factcheck.formats.records import MAX_PASSAGE_CHARS
    g.add_argument("--max-passage-chars", type=positive_int, default=None, metavar="N",
                   help=f"refuse a passage whose id, text or title is longer than N characters, while reading "
                        f"(default: {MAX_PASSAGE_CHARS:,})")


def add_claims_args(p: argparse.ArgumentParser, cap: bool = True) -> None:
    """How to read claims files, named as ``read_claims``'s parameters with ``claims_`` in front."""
    g = p.add_argument_group("reading claims files (docs/formats.md)")
    if cap:
        add_cap_arg(g, "claim")
    g.add_argument("--claims-format", choices=CLAIM_FORMATS, default=None,
                   help="claims format (default: detected from the name and the first record)")
    g.add_argument("--claims-id-column", default=None, help="JSONL/CSV claims: id field (default: id)")
    g.add_argument("--claims-text-column", default=None,
                   help="JSONL/CSV claims: claim text field (default: claim or claim_text)")
    g.add_argument("--claims-label-column", default=None,
                   help="JSONL/CSV claims: label field (default: label or claim_label)")
    g.add_argument("--claims-evidence-column", default=None,
                   help="JSONL/CSV claims: gold evidence ids field (default: evidences)")


def add_cap_arg(p, what: str) -> None:
    from factcheck.formats.records import MAX_QUERY_CHARS
    p.add_argument(f"--max-{what}-chars", type=positive_int, default=None, metavar="N",
                   help=f"refuse a {what} longer than N characters (default: {MAX_QUERY_CHARS:,})")


def add_index_args(p: argparse.ArgumentParser, help_text: str = "tag index directory (from tag or run: OUT/index)"):
    """``--index DIR``, and ``--evidence FILE`` to build it there first, with the reader options."""
    p.add_argument("--index", type=Path, required=True, help=help_text)
    p.add_argument("--evidence", type=Path, default=None,
                   help="knowledge source to tag into --index first (reused when that index is complete and of "
                        "the same file)")
    add_reader_args(p)


def add_tag_args(p: argparse.ArgumentParser) -> None:
    """The tagging job's settings (:class:`~factcheck.tagging.job.TagParams`: None is its default)."""
    for flag, help in (("--top-k", "tags per passage"), ("--max-features", "TF-IDF vocabulary size"),
                       ("--tag-features", "vocabulary of the tag vectoriser"),
                       ("--shard-size", "passages per shard file")):
        p.add_argument(flag, action=ParamOption, owner="factcheck.tagging.job:TagParams", help=help)
    p.add_argument("--jobs", type=jobs_type, default=-1, help="worker processes (default: -1 = all cores)")
    add_backend_args(p)
    p.add_argument("--force", action="store_true", help="replace an existing index of a different run")


def add_backend_args(p) -> None:
    p.add_argument("--backend", choices=("loky", "dask"), default="loky",
                   help="loky: local processes; dask: a Dask cluster (default: loky)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (with --backend dask; default: start a LocalCluster)")


def add_mode_arg(p: argparse.ArgumentParser, from_model: bool = False) -> None:
    """``--mode``; commands that load a trained model default to the model's."""
    if from_model:
        p.add_argument("--mode", choices=MODES, default=None,
                       help=f"course or open (default: the mode the model was trained in; {OPEN_HELP})")
    else:
        p.add_argument("--mode", choices=MODES, default="course",
                       help=f"course: the course's rules, no pretrained weights (default); {OPEN_HELP}")


def add_embedding_args(p: argparse.ArgumentParser, build: bool = False, embed_corpus: bool = False) -> None:
    """``--embedding-model minilm|DIR`` (a string: ``./minilm`` is a directory), with its settings
    where vectors are built (``build``; ``embed_corpus``: with ``--embed-corpus``, ``run``'s
    choice between the pool and every passage); elsewhere, where the vectors' model is now."""
    g = p.add_argument_group("transformer embedding model (open mode; docs/open-mode.md says what to install)")
    if build:
        g.add_argument("--embedding-model", default=None, metavar="minilm|DIR",
                       help="the packaged all-MiniLM-L6-v2 (minilm) or the ONNX model in DIR (model.onnx + "
                            "tokenizer.json) (needs --mode open): run: it orders each claim's candidate pool "
                            "(--embed-corpus: it embeds every passage instead); tag and selftest: it embeds "
                            "every passage instead of the bundled static model")
        if embed_corpus:
            g.add_argument("--embed-corpus", action="store_true",
                           help="embed every passage with --embedding-model (slow on a large corpus) instead of "
                                "only each claim's candidate pool")
        g.add_argument("--embedding-max-length", type=positive_int, default=None, metavar="N",
                       help="tokens kept per text (default: the model's sentence_bert_config.json, "
                            "else its tokenizer's truncation, else 512)")
        g.add_argument("--embedding-pooling", choices=("mean", "cls"), default=None,
                       help="mean of the token vectors or the first token's (default: the model's "
                            "1_Pooling/config.json, else mean)")
        g.add_argument("--query-prefix", default=None, metavar="TEXT",
                       help="prepended to claims, e.g. 'query: ' for e5 (default: none)")
        g.add_argument("--passage-prefix", default=None, metavar="TEXT",
                       help="prepended to passages, e.g. 'passage: ' for e5 (default: none)")
    else:
        g.add_argument("--embedding-model", default=None, metavar="minilm|DIR",
                       help="where the model the passage vectors were built with is now "
                            "(default: where it was; it must be the same files)")


def embedding_model_from_args(args) -> dict | None:
    """The transformer embedding model the build flags name (``None``: the bundled model)."""
    flags = {"max_length": "embedding_max_length", "pooling": "embedding_pooling",
             "query_prefix": "query_prefix", "passage_prefix": "passage_prefix"}
    settings = {k: getattr(args, dest) for k, dest in flags.items()}
    if args.embedding_model is None:
        given = [k for k, v in settings.items() if v is not None]
        if given:
            raise InputError(None, None, "only with a transformer embedding model (--embedding-model minilm|DIR)",
                             param=flags[given[0]])
        return None
    if args.mode != "open":
        raise InputError(None, None, "an embedding model is for the open mode: add --mode open",
                         param="embedding_model")
    return {"path": args.embedding_model, **{k: v for k, v in settings.items() if v is not None}}


def relocate_from_args(args, index_dir) -> None:
    """``--embedding-model DIR`` on a command that uses existing vectors: their model is now in DIR."""
    if getattr(args, "embedding_model", None) is not None and index_dir is not None:
        from factcheck.tagging.vectors import relocate_embedding_model
        relocate_embedding_model(index_dir, args.embedding_model)


TAG_RULE, BM25 = "factcheck.retrieval.tag_rule:TagRuleRetriever", "factcheck.retrieval.bm25:BM25Retriever"
POOL = "factcheck.retrieval.pool:PoolRetriever"
# The retriever settings each method reads (flags' dests).
METHOD_OPTIONS = {"tags": ("t_sim", "t_overlap", "k"), "bm25": ("k1", "b", "k"), "rerank": ("rerank_model",),
                  "tfidf": ("analyzer", "k"), "dense": ("k", "exact"), "hybrid": ("k", "alpha", "fusion", "k1", "b"),
                  "pool": ("k", "pool_model", *POOL_SETTINGS, "k1", "b")}
#: --k's help where it is the evidence per claim; a test holds it to each method's default.
EVIDENCE_K_HELP = ("passages returned per claim (default: the method's own: 6 for tags, 5 for bm25 and tfidf, "
                   "4 for dense, hybrid and pool; rerank cuts off per claim)")


def add_retriever_args(p: argparse.ArgumentParser, k_help: str = EVIDENCE_K_HELP, k_default: int | None = None,
                       old_k: str = "--top-n") -> None:
    """The mode, the retriever and its settings, one argument group per method."""
    add_mode_arg(p)
    p.add_argument("--method", default="bm25", choices=ALL_METHODS,
                   help="retriever (default: bm25; dense, hybrid and pool need --mode open)")
    add_renamed(p, "--k", old_k, type=positive_int, default=k_default, metavar="N", help=k_help)
    g = p.add_argument_group("tag rule (--method tags)")
    g.add_argument("--t-sim", action=ParamOption, owner=TAG_RULE, help="cosine threshold")
    g.add_argument("--t-overlap", action=ParamOption, owner=TAG_RULE, help="tag-overlap threshold")
    g = p.add_argument_group("BM25 (--method bm25, and hybrid's BM25 side)")
    g.add_argument("--k1", action=ParamOption, owner=BM25, help="term-frequency saturation")
    g.add_argument("--b", action=ParamOption, owner=BM25, help="length normalisation")
    g = p.add_argument_group("TF-IDF (--method tfidf)")
    add_analyzer_arg(g)
    g = p.add_argument_group("reranking (--method rerank)")
    g.add_argument("--rerank-model", type=Path, default=None, help="trained reranker (from factcheck train-rerank)")
    g = p.add_argument_group("open mode (--method dense, hybrid or pool, with --mode open)")
    add_pool_args(g)
    g.add_argument("--alpha", action=ParamOption, owner="factcheck.retrieval.dense:HybridRetriever",
                   help="hybrid: weight of the dense score")
    g.add_argument("--fusion", choices=("max", "rrf"), default=None,
                   help="hybrid: max-normalised score mix or reciprocal-rank fusion (default: max)")
    g.add_argument("--exact", action="store_true", default=None,
                   help="dense: score every passage even where the vectors have a nearest-neighbour index")
    g = p.add_argument_group("chunking")
    g.add_argument("--chunk-window", type=positive_int, default=None, help="index word windows of this size")
    g.add_argument("--chunk-overlap", type=non_negative_int, default=None,
                   help="words shared by consecutive windows (default: 20)")


def add_pool_args(g, model: bool = True) -> None:
    """The two-stage retriever's settings (``--method pool``; ``run`` names its model with
    ``--embedding-model``)."""
    if model:
        g.add_argument("--pool-model", default=None, metavar="minilm|DIR",
                       help="pool: the contextual model that orders each claim's candidate pool, the packaged "
                            "minilm (the default) or an ONNX model directory")
    g.add_argument("--pool-size", action=ParamOption, owner=POOL, metavar="N",
                   help="pool: passages BM25 and the passage vectors each add to a claim's pool (run and train "
                        "tune each pool setting not given; one given, even at its default, is fixed: "
                        "docs/open-mode.md)")
    g.add_argument("--combine", action=ParamChoice, owner=POOL,
                   help="pool: how the pool is ordered: the contextual model's cosine alone; plus the first stages' "
                        "scores, each min-max normalised over the pool, times --bm25-weight and --dense-weight; or "
                        "reciprocal-rank fusion of the three orders (run and train: tuned unless given)")
    g.add_argument("--bm25-weight", action=ParamOption, owner=POOL, metavar="W",
                   help="pool, --combine weighted: weight of the BM25 score (run and train: tuned unless given)")
    g.add_argument("--dense-weight", action=ParamOption, owner=POOL, metavar="W",
                   help="pool, --combine weighted: weight of the passage vectors' cosine (the first stage's; "
                        "run and train: tuned unless given)")


def pool_settings(args) -> dict:
    """The two-stage retriever's settings given on the command line (:data:`POOL_SETTINGS`)."""
    return {k: getattr(args, k) for k in POOL_SETTINGS if getattr(args, k) is not None}


def pool_model_from_args(args):
    """``--pool-model`` as the retriever records it: ``minilm``, or a directory in full."""
    if args.pool_model is None:
        return None
    from factcheck.text.onnx_embedding import model_location
    return model_location(args.pool_model)


def pool_from_args(args) -> dict:
    """``train``'s ``--pool-model`` and the pool's settings (only with ``--method pool``)."""
    model = pool_model_from_args(args)
    given = {**({"model": model} if model is not None else {}), **pool_settings(args)}
    if given and args.method != "pool":
        raise InputError(None, None, f"only with {ref('method')} pool",
                         param="pool_model" if "model" in given else next(iter(given)))
    return given


def run_embedding_from_args(args):
    """``run``'s ``--embedding-model`` with its settings, the pool's settings and
    ``--embed-corpus``, as RunConfig's ``embedding_model``."""
    model, pool = embedding_model_from_args(args), pool_settings(args)
    if args.embed_corpus:
        if model is None:
            raise InputError(None, None, f"only with a transformer ({ref('embedding_model')})", param="embed_corpus")
        if pool or args.method == "pool":
            raise InputError(None, None, f"the pool's second stage is {ref('embedding_model')}; embedding the whole "
                             f"corpus with it is the other way to use it (choose one)", param="embed_corpus")
        return {**model, "embed_corpus": True}
    if pool:
        if args.mode != "open":
            raise InputError(None, None, f"is for the open mode: add {ref('mode')} open", param=next(iter(pool)))
        if model is None and args.method != "pool":
            raise InputError(None, None, f"only with {ref('method')} pool or {ref('embedding_model')}",
                             param=next(iter(pool)))
        return {**(model or {"path": "minilm"}), **pool}
    return model


def source_options(args) -> dict:
    """The reader options of ``args`` as ``source_spec`` keywords."""
    options = {"format": args.format, "id_column": args.id_column, "text_column": args.text_column,
               "title_column": args.title_column, "max_passage_chars": args.max_passage_chars}
    if hasattr(args, "index_titles"):
        options["index_titles"] = args.index_titles
    return options


def claims_options(args) -> dict:
    """The claims reader options of ``args`` as ``claims_*`` keywords (and ``max_claim_chars``)."""
    options = {f"claims_{k}": getattr(args, f"claims_{k}") for k in
               ("format", "id_column", "text_column", "label_column", "evidence_column")}
    if hasattr(args, "max_claim_chars"):
        options["max_claim_chars"] = args.max_claim_chars
    return options


def add_analyzer_arg(p) -> None:
    p.add_argument("--analyzer", choices=ANALYZERS, default=None,
                   help="stems: the project's Porter stems, as BM25 reads (the default); "
                        "plain: lower-cased letter/digit tokens, no stemming")


def source_from_args(args, path=None):
    from factcheck.formats.evidence import source_spec
    return source_spec(path or args.evidence, **source_options(args))


def read_claims_from_args(args, path, require_labels: bool = False):
    """Read a claims file with this command's ``--claims-*`` options (errors name those)."""
    from factcheck.formats.claims import prefixed_params, read_claims
    with prefixed_params("claims_"):
        return read_claims(path, require_labels=require_labels,
                           **{k.removeprefix("claims_"): v for k, v in claims_options(args).items()})


def index_from_args(args):
    """The verified index of ``--index``, tagged there first from ``--evidence`` when given."""
    from factcheck.tagging.index import TagIndex
    if getattr(args, "evidence", None) is not None:
        from factcheck.tagging.job import build_index
        check_outputs([args.index], [args.evidence])
        return build_index(args.evidence, args.index, jobs=-1, **source_options(args))
    for name, value in source_options(args).items():
        if value is not None:
            raise InputError(None, None, "needs --evidence (the file to read); an index is read as it was "
                             "built", param=name)
    return TagIndex.load(args.index)


def tag_settings(args) -> dict:
    """The tagging job's settings given on the command line (one not given: TagJob's default)."""
    return {k: getattr(args, k) for k in ("top_k", "max_features", "tag_features", "shard_size", "backend", "scheduler")
            if getattr(args, k) is not None}


def tag_job_from_args(args, progress=None):
    from factcheck.tagging.job import TagJob
    return TagJob(jobs=args.jobs, progress=progress, **tag_settings(args))


def retriever_from_args(args, evidence_k: bool = True):
    """The retriever ``--method`` names, unfitted; a setting it does not read is refused
    (``evidence_k``: ``--k`` is the evidence per claim, else the command's depth). The open
    mode's check loads the model ``--index``'s vectors were built with, if any: a local
    model's vectors need no bundled model."""
    from factcheck.retrieval.registry import make_retriever
    reads = METHOD_OPTIONS[args.method] if evidence_k else tuple(o for o in METHOD_OPTIONS[args.method] if o != "k")
    for name in {o for options in METHOD_OPTIONS.values() for o in options} - {"k"} - set(reads):
        if getattr(args, name) is not None:
            raise InputError(None, None, f"is not read by {ref('method')} {args.method}", param=name)
    if evidence_k and args.k is not None and "k" not in reads:
        raise InputError(None, None, f"is not read by {ref('method')} {args.method} (it cuts off per claim)",
                         param="k")
    if args.chunk_overlap is not None and not args.chunk_window:
        raise InputError(None, None, f"only with {ref('chunk_window')}", param="chunk_overlap")
    params = {name: getattr(args, name) for name in reads}
    if args.method == "rerank":
        params = {"model": params.pop("rerank_model")}
    if args.method == "pool":
        params.pop("pool_model")
        params["model"] = pool_model_from_args(args)
    vectors = None
    if args.index and args.mode == "open":  # only the open mode checks a model (the course mode skips its import)
        from factcheck.tagging.vectors import vectors_model
        vectors = vectors_model(args.index)
    return make_retriever(args.method, params, args.chunk_window,
                          20 if args.chunk_overlap is None else args.chunk_overlap, mode=args.mode,
                          embedding_model=vectors)
