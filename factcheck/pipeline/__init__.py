"""The main job and its pieces: the fixed training split, tuning, and `factcheck run`."""
