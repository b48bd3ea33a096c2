"""The main job and its pieces: tuning, retriever and classifier selection, and `factcheck run`."""
