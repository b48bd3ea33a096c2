"""Choosing and training a system on the training claims only."""
