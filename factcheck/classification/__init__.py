"""Claim classification: features, the model, cross-validation, the stance candidate and
calibration (choosing among candidates is :mod:`factcheck.training`'s job)."""
