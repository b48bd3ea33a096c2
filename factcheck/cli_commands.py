"""Sub-commands beyond tagging register here (retrieval, evaluation, classification, app)."""
