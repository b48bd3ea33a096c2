"""What a run reports: ``report`` (``report.md`` and the configuration tables) and
``plots`` (sweeps, confusion matrices, the interval chart)."""
