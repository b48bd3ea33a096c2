"""Claim classification: a scikit-learn model reading a claim and its evidence passages."""
