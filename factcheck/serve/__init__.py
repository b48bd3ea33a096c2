"""The explain app: ``factcheck serve`` shows why each passage was picked.

A small FastAPI app over a trained system (tag index + model directory, usually the
output of ``factcheck run``): check a claim and see its verdict and the retrieved
passages with the shared tags highlighted; browse the run's dev predictions (hits and
misses against the gold evidence); read the run's metrics and plots. Everything is
loaded once at start-up; a request only retrieves and classifies.
"""
