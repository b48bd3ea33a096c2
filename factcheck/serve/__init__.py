"""The explain app (``factcheck serve``): checks, dev predictions, metrics and plots of a run."""
