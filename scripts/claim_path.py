"""The factcheck modules a claim's path crosses in ``factcheck run`` (docs/architecture.md).

Runs the demo's ``factcheck run`` in this process under ``sys.setprofile`` (call events only)
and lists the distinct ``factcheck`` modules whose functions are called while a claim passes
through: reading a claims file (:func:`factcheck.formats.claims.read_claims`), checking the
claims (:meth:`factcheck.system.checker.FactChecker.check`) and writing their predictions
(:func:`factcheck.system.checker.write_verdicts`). Training, scoring and reporting are not the
claim's path and are not counted. ::

    python -m scripts.claim_path            # the count, then one module a line
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

# The functions whose calls are a claim's path: (module, function name).
ENTRIES = {("factcheck.formats.claims", "read_claims"), ("factcheck.system.checker", "check"),
           ("factcheck.system.checker", "write_verdicts")}


def claim_path_modules(data_dir: str = "data/demo") -> list[str]:
    """The sorted factcheck modules entered on a claim's path in a run of ``data_dir``."""
    from factcheck.pipeline.run import RunConfig, run_pipeline
    seen: set[str] = set()
    inside = []  # the entry frames open now

    def profile(frame, event, _arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if (module, frame.f_code.co_name) in ENTRIES:
                inside.append(frame)
            if inside and module.startswith("factcheck"):
                seen.add(module)
        elif event == "return" and inside and frame is inside[-1]:
            inside.pop()

    with tempfile.TemporaryDirectory() as tmp:
        sys.setprofile(profile)
        try:
            run_pipeline(data_dir, Path(tmp) / "run", RunConfig(progress=False, jobs=1))
        finally:
            sys.setprofile(None)
    return sorted(seen)


if __name__ == "__main__":
    modules = claim_path_modules()
    print(len(modules))
    print("\n".join(modules))
