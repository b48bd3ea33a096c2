"""Started by every Python process whose PYTHONPATH holds this folder
(:func:`harness.crashpoints.crash_env`, :func:`~harness.crashpoints.fault_env`): installs
the crash (or full-disk) hook there."""

import os

if any(os.environ.get(f"FACTCHECK_{what}_AT") for what in ("CRASH", "ENOSPC", "SIGINT")):
    from harness.crashpoints import install

    install()
