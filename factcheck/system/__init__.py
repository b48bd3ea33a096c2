"""A trained system: :class:`~factcheck.system.checker.FactChecker` (retriever + reader +
classifier over a tag index) and the model directory it is saved as
(:mod:`factcheck.system.model_dir`)."""
