"""Performance benchmarks: `python -m benchmarks.run` (see run.py). Not part of the app."""
