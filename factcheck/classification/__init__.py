"""Claim classification: features, the model, cross-validation and
calibration (choosing among candidates is :mod:`factcheck.training`'s job)."""
