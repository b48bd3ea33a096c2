"""Started by every Python process whose PYTHONPATH holds this folder
(:func:`harness.crashpoints.crash_env`, :func:`~harness.crashpoints.fault_env`): installs
the crash (or full-disk) hook there."""

import os

if os.environ.get("FACTCHECK_CRASH_AT") or os.environ.get("FACTCHECK_ENOSPC_AT"):
    from harness.crashpoints import install

    install()
