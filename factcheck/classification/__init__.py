"""Claim classification: a scikit-learn model reading a claim and its evidence passages.

``features`` (claim/evidence text views -> sparse features), ``model`` (the pipeline,
saving and loading), ``cv`` (repeated stratified cross-validation and the one-SE rule),
``stance`` (the per-passage stance model, a candidate the CV can pick) and
``calibration`` (temperature scaling). Choosing among candidates is
:mod:`factcheck.training`'s job.
"""
