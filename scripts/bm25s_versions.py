"""Run the BM25 reference test against several bm25s releases, each in a throwaway venv.

Our Lucene BM25 (``factcheck/scoring/bm25.py``) is checked against bm25s's scores by
``tests/unit/test_bm25_reference.py`` (a relative 1e-6). bm25s is a test reference, not a
dependency, so any release should do; this runs the test once per release. Each venv
holds that bm25s alone (``--no-deps``) and sees this environment's packages through a
``.pth`` line, so only bm25s differs between the runs::

    python -m scripts.bm25s_versions                                   # the default releases
    python -m scripts.bm25s_versions --versions 0.3.11,latest

Prints one line per release (passed or failed, with pytest's summary); exit status 1 when
any release fails, 2 when one cannot be installed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/unit/test_bm25_reference.py"
DEFAULT = "0.1.10,0.2.0,0.2.14,0.3.0,0.3.11,latest"


def run(version: str, scratch: Path) -> tuple[str, str]:
    venv = scratch / f"venv-{version}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    # this environment's packages (and its .pth files: the editable factcheck) after the venv's own
    (site / "_project.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    spec = "bm25s" if version == "latest" else f"bm25s=={version}"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", spec], capture_output=True, text=True)
    if pip.returncode:
        return "not installed", (pip.stderr.strip().splitlines() or ["?"])[-1]
    found = subprocess.run([str(py), "-c", "import bm25s; print(bm25s.__version__)"], capture_output=True, text=True)
    tests = subprocess.run([str(py), "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"], cwd=ROOT,
                           capture_output=True, text=True)
    summary = (tests.stdout.strip().splitlines() or ["?"])[-1]
    return ("passed" if tests.returncode == 0 else "FAILED"), f"bm25s {found.stdout.strip()}: {summary}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default=DEFAULT, help=f"comma-separated releases, or latest (default {DEFAULT})")
    args = ap.parse_args(argv)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="bm25s-versions-") as scratch:
        for version in args.versions.split(","):
            state, detail = run(version.strip(), Path(scratch))
            outcomes.append(state)
            print(f"{version:>8}  {state:<13} {detail}", flush=True)
    if "not installed" in outcomes:
        return 2
    return 1 if "FAILED" in outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
