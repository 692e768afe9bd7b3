"""The output records of `normalize`, built in one place so the CLI and the REST API agree."""

from __future__ import annotations

from collections.abc import Sequence

from babelink.link.ngram_search import LinkedPart
from babelink.retrieve.candidate import Candidate

#: Header of `normalize --format tsv`: one row per candidate.
TSV_HEADER = "mention\trank\tid\tname\tmatched_name\tscore\n"


def normalize_record(mention: str, candidates: Sequence[Candidate], *, searched: str | None = None,
                     parts: Sequence[LinkedPart] | None = None) -> dict:
    """One normalised mention: `{"mention", "candidates": [Candidate.to_dict(), …]}`, plus the
    string `searched` when it was not the mention (an abbreviation's long form) and the mention's
    linked n-gram `parts` when the n-gram search loop ran."""
    record = {"mention": mention, "candidates": [candidate.to_dict() for candidate in candidates]}
    if searched is not None and searched != mention:
        record["searched"] = searched
    if parts is not None:
        record["parts"] = [part.to_dict() for part in parts]
    return record


def tsv_rows(mention: str, candidates: Sequence[Candidate]) -> str:
    """`normalize --format tsv` lines of one mention (see `TSV_HEADER`)."""
    return "".join(f"{mention}\t{rank}\t{c.concept_id}\t{c.name}\t{c.matched_name}\t{c.score:.6f}\n"
                   for rank, c in enumerate(candidates, start=1))
