"""Corpus-scale linking: resumable output and the Ray engine."""
