"""The JSON objects every interface returns, built in one place so the CLI and the REST API agree."""

from __future__ import annotations

from collections.abc import Sequence

from babelink.link.candidates import Candidate


def normalize_record(mention: str, candidates: Sequence[Candidate]) -> dict:
    """One normalised mention: `{"mention": …, "candidates": [Candidate.to_dict(), …]}`."""
    return {"mention": mention, "candidates": [candidate.to_dict() for candidate in candidates]}
