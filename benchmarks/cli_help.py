"""Time ``python -m factcheck --help``: the start-up every command pays before its work.

The CLI builds every sub-command's parser for ``--help``; sub-command modules import
library code (numpy, scikit-learn, FastAPI) only when they run, so this stays close to
the interpreter's own start-up. Prints the median of ``--repeats`` runs next to a
reference ``python -c pass`` measured in the same run (the target: under 0.5 s).

    python -m benchmarks.cli_help [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT_S = 0.5


def wall_times(cmd: list[str], repeats: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs of each command (default: 5)")
    args = parser.parse_args()
    baseline = statistics.median(wall_times([sys.executable, "-c", "pass"], args.repeats))
    help_s = statistics.median(wall_times([sys.executable, "-m", "factcheck", "--help"], args.repeats))
    print(f"python -c pass:            {baseline:.3f} s (median of {args.repeats})")
    print(f"python -m factcheck --help: {help_s:.3f} s (median of {args.repeats}); "
          f"limit {LIMIT_S} s: {'ok' if help_s < LIMIT_S else 'TOO SLOW'}")
    return 0 if help_s < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
