"""Hypothesis fuzzing of the engine ingest path and the relay frame parser (seed corpus in corpus/)."""
