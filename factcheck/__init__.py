"""factcheck: explainable evidence retrieval and claim classification.

The package follows the pipeline: ``text`` (analysis) -> ``tagging`` (offline job)
-> ``retrieval`` -> ``classification`` -> ``evaluation`` -> ``pipeline`` (the main job),
with ``formats`` holding every reader and writer of files users hand us.
"""

__version__ = "0.1.0"
