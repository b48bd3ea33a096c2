"""The ``factcheck`` command: argument parsing and the one place errors become exit codes.

Each sub-command is a thin adapter from flags to a library call, so everything the CLI
does can be done from Python too. An :class:`~factcheck.errors.InputError` becomes one
line on stderr and exit status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from factcheck.errors import FactcheckWarning, InputError

COMMANDS = {}


def command(name: str, help: str):
    def register(fn):
        COMMANDS[name] = (fn, help)
        return fn
    return register


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 shard``, ``2 shards`` (numbers stay plain: scripts and tests parse them)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


class _Deprecated(argparse.Action):
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
    group.add_argument(old, dest=action.dest, type=kwargs.get("type"), action=_Deprecated, new=new,
                       help=argparse.SUPPRESS)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _jobs(text: str) -> int:
    """joblib's convention: N workers, or -1 = all cores, -2 = all but one, ...; never 0."""
    value = _int(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must not be 0 (N workers, or -1 for all cores)")
    return value


def check_output_dir(path) -> None:
    """An output directory must be creatable: refuse at once, before hours of work (a
    file in its place, or a parent that is a file, used to fail at the first write)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(p, None, "exists and is not a directory")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(p, None, f"cannot be created: {parent} is not a directory")
            break


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def bounded_float(lo: float, hi: float | None = None):
    """An argparse type: a finite number in ``[lo, hi]`` (no NaN, no infinity)."""
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < lo or (hi is not None and value > hi):
            where = f"in [{lo:g}, {hi:g}]" if hi is not None else f"finite and at least {lo:g}"
            raise argparse.ArgumentTypeError(f"must be {where}, got {text!r}")
        return value
    return parse


def check_outputs(outputs, inputs) -> None:
    """No output may overwrite an input: not the same file, not a file inside an input
    directory (``export-tags IDX --out IDX/manifest.json`` would replace the manifest)."""
    for out in outputs:
        o = Path(out).resolve()
        for inp in inputs:
            if inp is None:
                continue
            i = Path(inp).resolve()
            if o == i or (i.is_dir() and i in o.parents):
                raise InputError(out, None, f"would overwrite the input {inp}; choose another output path")


def _add_source_args(p: argparse.ArgumentParser, positional: bool = True) -> None:
    if positional:
        p.add_argument("evidence", type=Path, help="knowledge source: course .json/.json.gz, .jsonl or .csv")
    p.add_argument("--format", choices=("course", "jsonl", "csv"), default=None,
                   help="input format (default: from the file name)")
    p.add_argument("--id-column", default="id", help="id field/column for JSONL and CSV (default: id)")
    p.add_argument("--text-column", default="text", help="text field/column for JSONL and CSV (default: text)")


def add_tag_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top-k", type=_positive_int, default=10, help="tags per passage (default: 10)")
    p.add_argument("--max-features", type=_positive_int, default=20000,
                   help="TF-IDF vocabulary size (default: 20000)")
    p.add_argument("--tag-features", type=_positive_int, default=1000,
                   help="vocabulary of the tag vectoriser (default: 1000)")
    p.add_argument("--shard-size", type=_positive_int, default=100_000,
                   help="passages per shard file (default: 100000)")
    p.add_argument("--jobs", type=_jobs, default=-1, help="worker processes (default: -1 = all cores)")
    p.add_argument("--backend", choices=("loky", "dask"), default="loky",
                   help="loky: local processes; dask: a Dask cluster (default: loky)")
    p.add_argument("--scheduler", default=None,
                   help="Dask scheduler address (with --backend dask; default: start a LocalCluster)")
    p.add_argument("--force", action="store_true", help="replace an existing index of a different run")


def tag_job_from_args(args, progress=None):
    from factcheck.tagging.job import TagJob
    return TagJob(top_k=args.top_k, max_features=args.max_features, tag_features=args.tag_features,
                  shard_size=args.shard_size, jobs=args.jobs, backend=args.backend,
                  scheduler=args.scheduler, progress=progress)


def source_from_args(args, path=None):
    from factcheck.formats.evidence import source_spec
    return source_spec(path or args.evidence, args.format, args.id_column, args.text_column)


@command("tag", "tag every passage with its top-k TF-IDF stems (the offline job)")
def _tag(sub):
    p = sub
    _add_source_args(p)
    p.add_argument("--out", type=Path, required=True, help="index directory to write (or resume)")
    add_tag_args(p)

    def run(args):
        if args.scheduler and args.backend != "dask":
            raise InputError(None, "--scheduler", "only meaningful with --backend dask")
        manifest = tag_job_from_args(args).run(source_from_args(args), args.out, force=args.force)
        print(f"{args.out}: {plural(manifest.n_passages, 'passage')} in {plural(len(manifest.shards), 'shard')}, "
              f"{manifest.data['empty_tags']} with no tags")
    return run


@command("export-tags", "write an index's tags as JSON lines, one per passage in input order")
def _export(p):
    p.add_argument("index", type=Path, help="tag index directory")
    p.add_argument("--out", type=Path, required=True, help="JSONL file to write")

    def run(args):
        from factcheck.tagging.index import export_tags
        check_outputs([args.out], [args.index])
        n = export_tags(args.index, args.out)
        print(f"{args.out}: {plural(n, 'passage')}")
    return run


@command("verify", "check a tag index against its manifest and checksums")
def _verify(p):
    p.add_argument("index", type=Path, help="tag index directory")

    def run(args):
        from factcheck.tagging.store import check_loadable, verify_index
        m = verify_index(args.index)
        check_loadable(args.index, m)
        print(f"{args.index}: OK ({plural(m.n_passages, 'passage')}, {plural(len(m.shards), 'shard')}, "
              f"{plural(len(m.files()), 'file')} verified)")
    return run


def _load_commands() -> None:
    """Import modules that register further commands (kept lazy for start-up time)."""
    import factcheck.cli_commands  # noqa: F401


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line too (argparse prints the whole usage block first)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    _load_commands()
    parser = _Parser(prog="factcheck", description="Explainable evidence retrieval and claim "
                                     "classification over large sentence dumps. See `factcheck COMMAND --help`.")
    from factcheck import __version__
    parser.add_argument("--version", action="version", version=f"factcheck {__version__}")
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (builder, help_text) in COMMANDS.items():
        # ``help`` goes through %-formatting in the command list, ``description`` does not.
        sp = subs.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        sp.set_defaults(_run=builder(sp))
    return parser


def main(argv=None) -> int:
    # Parallelism here is explicit (joblib processes); BLAS threads on top of it only
    # oversubscribe the cores (10x slower logistic regression on 2 busy cores).
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            _route_warnings(args.command)
            args._run(args)
    except InputError as exc:
        print(f"factcheck {args.command}: error: {exc.one_line()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"factcheck {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    return 0


def _route_warnings(command: str) -> None:
    """Our own warnings become one plain line; library warnings are silenced.

    Library warnings reach a user as multi-line site-packages paths that say nothing
    actionable (the demo run printed 7 scikit-learn ``UndefinedMetricWarning``s: macro-F1
    over a 3-claim hold-out with absent labels, scored as 0 as documented). Python's own
    ``-W``/``PYTHONWARNINGS`` options still win, for debugging.
    """
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FactcheckWarning):
            print(f"factcheck {command}: warning: {message}", file=sys.stderr)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    if not sys.warnoptions:
        warnings.simplefilter("ignore")
        warnings.simplefilter("default", FactcheckWarning)
