"""Teacher models other than the default voice's Piper teacher (see `training/synthesize.py`)."""
