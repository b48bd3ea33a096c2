"""The explain app (``factcheck serve``): check a claim and see why each passage was picked,
browse a run's dev predictions, read its metrics and plots. Everything loads at start-up."""
