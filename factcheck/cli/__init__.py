"""The ``factcheck`` command: argument parsing and the one place errors become exit codes
(an InputError, OSError or MemoryError: one stderr line, status 2; anything else is a bug).

Each sub-command's builder adds its options and returns its run function, which imports
library code only when called (``--help`` stays fast).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import logging
import os
import sys
import warnings

from factcheck.cli import convert, pipeline, rerank, retrieval, serve, tagging, workbench
from factcheck.cli.terminal import escaped, escaped_stdout
from factcheck.errors import FactcheckWarning, InputError
from factcheck.progress import progress_setting

__all__ = ["COMMANDS", "build_parser", "main"]

# (name, help, builder): the builder adds the command's options and returns its run function.
COMMANDS = (
    ("tag", "tag every passage with its top-k TF-IDF stems (the offline job)", tagging.add_tag),
    ("export-tags", "write an index's tags as JSON lines, one per passage in input order", tagging.add_export_tags),
    ("verify", "check a tag index against its manifest and checksums", tagging.add_verify),
    ("retrieve", "retrieve evidence for claims (course-format predictions + explanations)", retrieval.add_retrieve),
    ("evaluate", "score predictions with the course metric, recall@k and MRR, with 95% intervals",
     retrieval.add_evaluate),
    ("selftest", "self-retrieval test of any id + text collection: each row's query column (e.g. a title) "
                 "must find its own row; recall@k and MRR per retriever, whole and chunked", workbench.add_selftest),
    ("search", "rank an index's passages for free text and show the scores", workbench.add_search),
    ("evaluate-retrieval", "score judged queries (BEIR queries + TREC/BEIR qrels): recall@k, MRR, nDCG@10, MAP "
                           "with 95% intervals; write a TREC run", workbench.add_evaluate_retrieval),
    ("run", "the whole pipeline end to end on a course data directory", pipeline.add_run),
    ("train", "tune the retriever and train the claim classifier on training claims", pipeline.add_train),
    ("predict", "leaderboard-format predictions (label + evidence) for a claims file", pipeline.add_predict),
    ("ablation", "the classifier on gold versus retrieved evidence, with paired tests", pipeline.add_ablation),
    ("serve", "the explain app: check claims and see why each passage was picked (FastAPI)", serve.add_serve),
    ("check", "check one claim: verdict, probabilities and why each passage was picked (the app's "
              "check page in a terminal)", serve.add_check),
    ("train-rerank", "train the learned reranker (fit on 4/5 of the claims, tune on the other 1/5)",
     rerank.add_train_rerank),
    ("convert", "convert claims, knowledge sources or predictions between course JSON, JSONL, CSV, FEVER and "
                "Climate-FEVER (what a format cannot hold is listed)", convert.add_convert),
)


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, with "did you mean --quiet?" for a misspelled option or choice."""

    _given: list[str] = []      # the arguments this parser was last asked to parse
    _extras: list[str] = []     # the ones it did not recognise

    def parse_known_args(self, args=None, namespace=None):
        # For error(): argparse reports a misspelled required option as missing.
        self._given = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        self._extras = list(extras)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            # Reported by the sub-command that did not recognise them; the rest came before its name.
            sub = _chosen_subparser(self, namespace)
            if sub is not None and sub._extras:
                sub.error(f"unrecognized arguments: {' '.join(sub._extras)}")
            self.error(f"unrecognized arguments: {' '.join(extras)}" + _misplaced(extras, sub))
        return namespace

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}{self._suggestion(message)} (see `{self.prog} --help`)\n")

    def _check_value(self, action, value):
        # argparse's own check, with the closest choice instead of the whole list when one is close.
        if action.choices is not None and value not in action.choices:
            close = _closest(str(value), [str(c) for c in action.choices])
            if close:
                raise argparse.ArgumentError(action, f"invalid choice: {value!r}; did you mean {close!r}?")
        super()._check_value(action, value)

    def _suggestion(self, message: str) -> str:
        """``; did you mean --quiet?`` for the misspelled options among this parser's arguments."""
        if not message.startswith(("unrecognized arguments", "the following arguments are required",
                                   "one of the arguments")):
            return ""
        pairs = [(typo, close) for typo in _unknown_options(self, self._given)
                 if (close := _closest(typo, _option_spellings(self)))]
        if not pairs:
            return ""
        if len(pairs) == 1 and message.startswith("unrecognized"):
            return f"; did you mean {pairs[0][1]}?"
        return "; did you mean " + ", ".join(f"{close} instead of {typo}" for typo, close in pairs) + "?"


def _closest(word: str, candidates: list[str]) -> str | None:
    """The candidate nearest ``word`` (difflib), compared without leading dashes."""
    import difflib
    bare = {c.lstrip("-"): c for c in candidates}
    match = difflib.get_close_matches(word.lstrip("-"), list(bare), n=1)
    return bare[match[0]] if match else None


def _option_spellings(parser: argparse.ArgumentParser) -> list[str]:
    """The long options ``--help`` shows (deprecated spellings are hidden there, and here)."""
    return [s for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
            for s in a.option_strings if s.startswith("--")]


def _unknown_options(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    """The arguments that look like options but are none of ``parser``'s (nor a prefix of one)."""
    known = [s for a in parser._actions for s in a.option_strings]
    out = []
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if not name.startswith("-") or len(name) < 2 or name in out or _is_number(name):
            continue
        if name.startswith("--"):
            if not any(k.startswith(name) for k in known if k.startswith("--")):
                out.append(name)
        elif name[:2] not in known:
            out.append(name)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _chosen_subparser(parser: argparse.ArgumentParser, namespace) -> "_Parser | None":
    subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return None if subs is None else subs.choices.get(getattr(namespace, subs.dest, None))


def _misplaced(extras: list[str], sub) -> str:
    """``factcheck --quiet run ...``: the command's options go after its name."""
    if sub is None:
        return ""
    theirs = [e for e in extras if e.split("=", 1)[0] in _option_spellings(sub)]
    return f"; {theirs[0]} is an option of `{sub.prog}`: put it after the command name" if theirs else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="factcheck", description="Explainable evidence retrieval and claim "
                                     "classification over large sentence dumps. See `factcheck COMMAND --help`.")
    from factcheck import __version__
    parser.add_argument("--version", action="version", version=f"factcheck {__version__}")
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text, builder in COMMANDS:
        # ``help`` goes through %-formatting in the command list, ``description`` does not.
        sp = subs.add_parser(name, help=help_text.replace("%", "%%"), description=help_text)
        sp.set_defaults(_run=builder(sp))
    return parser


def flags_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Parameter name -> how this command spells it (``--chunk-window``, ``CLAIM``)."""
    flags = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):  # a command's own sub-commands (convert KIND)
            for sub in action.choices.values():
                flags = {**flags_of(sub), **flags}
            continue
        if action.option_strings:
            long = [s for s in action.option_strings if s.startswith("--")] or action.option_strings
            flags.setdefault(action.dest, long[0])
        elif action.dest != argparse.SUPPRESS:
            flags.setdefault(action.dest, action.metavar or action.dest.upper())
    return flags


def _command_flags(parser: argparse.ArgumentParser, command: str, method: str | None = None) -> dict[str, str]:
    """This command's flags first, then the other commands' (for a library error naming another)."""
    own = flags_of(_chosen_subparser(parser, argparse.Namespace(command=command)))
    flags = {**flags_of(parser), **own}
    if method == "pool" and "pool_model" in own and "embedding_model" not in own:
        # The embedding model such a command loads is the pool's: not run's --embedding-model.
        flags["embedding_model"] = own["pool_model"]
    # The library's other names for a flag: claims.text_column, source.format, index_dir.
    for dest, flag in list(flags.items()):
        flags[f"source.{dest}"] = flag
        flags.setdefault(f"{dest}_dir", flag)
        if dest.startswith("claims_"):
            flags[f"claims.{dest.removeprefix('claims_')}"] = flag
    return flags


def main(argv=None) -> int:
    # A fatal signal (SIGBUS: a mapped index file cut short under a running command, despite
    # the checks of docs/trust-model.md) prints where it happened instead of nothing at all.
    if not faulthandler.is_enabled():
        with contextlib.suppress(ValueError, OSError):  # a stderr without a descriptor (in tests)
            faulthandler.enable()
    # Parallelism here is explicit (joblib processes); BLAS threads on top only oversubscribe.
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # loky's resource tracker (a child process) warns about what a killed run left: nothing to do.
    if not sys.warnoptions and "PYTHONWARNINGS" not in os.environ:
        os.environ["PYTHONWARNINGS"] = "ignore:resource_tracker:UserWarning"
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        quiet = getattr(args, "quiet", False)
        with warnings.catch_warnings(), _library_log(args.command, quiet), escaped_stdout(), \
                progress_setting(False if quiet else None):
            _route_warnings(args.command)
            args._run(args)
    except InputError as exc:
        flags = _command_flags(parser, args.command, getattr(args, "method", None))
        print(f"factcheck {args.command}: error: {escaped(exc.one_line(flags))}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"factcheck {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except OSError as exc:  # the machine's refusal (a full disk, a quota, an I/O error), not a bug of ours
        print(f"factcheck {args.command}: error: {escaped(os_error_line(exc))}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"factcheck {args.command}: error: out of memory (MemoryError)", file=sys.stderr)
        return 2
    return 0


def os_error_line(exc: OSError) -> str:
    """``PATH: No space left on device (ENOSPC)``."""
    import errno
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    name = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    message = exc.strerror or str(exc) or type(exc).__name__
    text = f"{' -> '.join(paths)}: {message}" if paths else message
    return " ".join((f"{text} ({name})" if name else text).split())


class _StderrLines(logging.Handler):
    """The library's log records as stderr lines (WARNING and up as ``factcheck CMD: note``);
    ``sys.stderr`` is looked up per line (tests swap it)."""

    def __init__(self, command: str):
        super().__init__(logging.INFO)
        self.command = command

    def emit(self, record):
        try:
            text = record.getMessage()
            if record.levelno >= logging.WARNING:
                text = f"factcheck {self.command}: {text}"
            print(escaped(text), file=sys.stderr)
        except Exception:  # as logging.StreamHandler: a broken record must not stop the command
            self.handleError(record)


@contextlib.contextmanager
def _library_log(command: str, quiet: bool = False):
    """The library's records as stderr lines; ``quiet`` (``--quiet``): warnings and up only."""
    logger, handler = logging.getLogger("factcheck"), _StderrLines(command)
    if quiet:
        handler.setLevel(logging.WARNING)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # shown once, here, not again by a root handler
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _route_warnings(command: str) -> None:
    """Our own warnings become one plain line; library warnings are silenced (-W still wins)."""
    original = warnings.showwarning
    shown = set()  # one line per message: several steps may warn about the same thing (a label set)

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FactcheckWarning):
            if str(message) not in shown:
                shown.add(str(message))
                print(f"factcheck {command}: warning: {escaped(str(message))}", file=sys.stderr)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    if not sys.warnoptions:
        warnings.simplefilter("ignore")
        warnings.simplefilter("default", FactcheckWarning)
