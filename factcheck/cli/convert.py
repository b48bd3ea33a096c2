"""``factcheck convert claims|evidence|predictions``: between formats, with one ``note:`` line
for each kind of thing the target cannot hold (:mod:`factcheck.formats.convert`)."""

from __future__ import annotations

import sys
from pathlib import Path

from factcheck.cli.options import (CLAIM_FORMATS, PREDICTION_FORMATS, add_claims_args, add_reader_args,
                                   check_outputs, claims_options, source_options)
from factcheck.formats.convert import EVIDENCE_TARGETS

__all__ = ["add_convert"]

ONE_LINE_HELP = ("passage X is line 0 of its own FEVER page X (id X:0), and back: the layout for course ids, "
                 "which have no page and line")


def _kind(kinds, name: str, targets, what: str, help: str, description: str):
    """The sub-command converting a ``name`` file: what every kind takes."""
    p = kinds.add_parser(name, help=help, description=description)
    p.add_argument(name, type=Path, help=f"{what} to read")
    p.add_argument("--to", required=True, choices=targets, help="format to write")
    p.add_argument("--out", type=Path, required=True, help="file to write")
    p.add_argument("--one-line-pages", action="store_true", help=ONE_LINE_HELP)
    return p


def add_convert(p):
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND",
                             help="what the file holds: claims, evidence (a knowledge source) or predictions")
    c = _kind(kinds, "claims", CLAIM_FORMATS, "claims file", "a claims file (course JSON, JSONL, CSV, FEVER, "
              "Climate-FEVER)", "Convert a claims file.")
    c.add_argument("--evidence", type=Path, default=None,
                   help="--to climate-fever: the knowledge source whose sentences and titles fill each evidence")
    add_claims_args(c)
    add_reader_args(c, indexing=False)

    e = _kind(kinds, "evidence", EVIDENCE_TARGETS, "knowledge source",
              "a knowledge source (to course JSON, JSONL or FEVER wiki pages)", "Convert a knowledge source.")
    add_reader_args(e, indexing=False)

    r = _kind(kinds, "predictions", PREDICTION_FORMATS, "predictions file",
              "predictions (course JSON <-> FEVER predictions JSONL)", "Convert a predictions file.")
    r.add_argument("--claims", type=Path, default=None,
                   help="the claims predicted (any claims format): their order and texts, which FEVER predictions "
                        "lack")
    add_claims_args(r)

    def run(args):
        from factcheck.formats import convert
        if args.kind == "claims":
            check_outputs([args.out], [args.claims, args.evidence])
            notes = convert.convert_claims(args.claims, args.out, args.to, one_line_pages=args.one_line_pages,
                                           evidence=args.evidence, **claims_options(args), **source_options(args))
        elif args.kind == "evidence":
            check_outputs([args.out], [args.evidence])
            notes = convert.convert_evidence(args.evidence, args.out, args.to, one_line_pages=args.one_line_pages,
                                             **source_options(args))
        else:
            check_outputs([args.out], [args.predictions, args.claims])
            notes = convert.convert_predictions(args.predictions, args.out, args.to,
                                                one_line_pages=args.one_line_pages, claims=args.claims,
                                                **claims_options(args))
        for note in notes:
            print(f"factcheck convert: note: {note}", file=sys.stderr)
        print(f"{args.out}: {args.kind} written as {args.to}")
    return run
