"""Started by every Python process whose PYTHONPATH holds this folder
(:func:`harness.crashpoints.crash_env`): installs the crash hook there."""

import os

if os.environ.get("FACTCHECK_CRASH_AT"):
    from harness.crashpoints import install

    install()
