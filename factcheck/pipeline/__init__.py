"""The main job (``factcheck run``), the batch checker and the retrieval workbench."""
