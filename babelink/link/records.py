"""The output records of `normalize`, built in one place so the CLI and the REST API agree."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from babelink.errors import InputFormatError, InvalidInputError
from babelink.link.ngram_search import LinkedPart
from babelink.retrieve.candidate import Candidate
from babelink.text import normalized_mention

#: Columns of `normalize --format tsv`, one row per candidate; a column per `--codes` vocabulary follows.
TSV_COLUMNS = ("mention", "rank", "id", "name", "matched_name", "score")


def tsv_header(vocabularies: Sequence[str] = ()) -> str:
    return "\t".join([*TSV_COLUMNS, *vocabularies]) + "\n"


def normalize_record(mention: str, candidates: Sequence[Candidate], provenance: dict, *,
                     searched: str | None = None, parts: Sequence[LinkedPart] | None = None) -> dict:
    """One normalised mention: `{"mention", "candidates": [Candidate.to_dict(), …], "provenance"}`
    (`Bundle.provenance`), plus the string `searched` when it was not the mention (an
    abbreviation's long form) and the mention's linked n-gram `parts` when the n-gram search loop
    ran."""
    record = {"mention": mention, "candidates": [candidate.to_dict() for candidate in candidates]}
    if searched is not None and searched != mention:
        record["searched"] = searched
    if parts is not None:
        record["parts"] = [part.to_dict() for part in parts]
    record["provenance"] = provenance
    return record


def tsv_rows(mention: str, candidates: Sequence[Candidate], vocabularies: Sequence[str] = ()) -> str:
    """`normalize --format tsv` lines of one mention (see `tsv_header`): a concept without a code
    in a vocabulary has an empty cell."""
    lines = []
    for rank, c in enumerate(candidates, start=1):
        codes = dict(c.codes)
        cells = [mention, str(rank), c.concept_id, c.name, c.matched_name, f"{c.score:.6f}"]
        lines.append("\t".join(cells + [codes.get(vocabulary, "") for vocabulary in vocabularies]) + "\n")
    return "".join(lines)


@dataclass(frozen=True)
class Normalized:
    """One input line of `normalize`: its candidates, or why the mention could not be searched."""

    line: int
    mention: str
    searched: str
    candidates: list[Candidate]
    error: str | None = None

    def record(self, provenance: dict, parts: Sequence[LinkedPart] | None = None) -> dict:
        if self.error is not None:
            return {"mention": self.mention, "line": self.line, "error": self.error}
        return normalize_record(self.mention, self.candidates, provenance, searched=self.searched, parts=parts)


def normalize_lines(linker, lines: Iterable[tuple[int, str, str]], top_k: int, source: str,
                    skip_invalid: bool = False, lang: str | None = None,
                    min_probability: float = 0.0) -> Iterator[Normalized]:
    """`(line, mention, text to search)` items → `Normalized`, in input order, streamed in the
    linker's batches. An unusable mention is an `InputFormatError` naming `source` and its line, or
    with `skip_invalid` a `Normalized` carrying the error, and the run goes on."""
    pending: deque[Normalized] = deque()  # read, not yet answered

    def searchable() -> Iterator[str]:
        for line, mention, text in lines:
            try:
                normalized_mention(text)
            except InvalidInputError as error:
                if not skip_invalid:
                    raise InputFormatError(source, line, f"{error} (--skip-invalid to go on)") from None
                pending.append(Normalized(line, mention, text, [], str(error)))
                continue
            pending.append(Normalized(line, mention, text, []))
            yield text

    for _, candidates in linker.normalize_stream(searchable(), top_k, lang, min_probability):
        while pending[0].error is not None:
            yield pending.popleft()
        item = pending.popleft()
        yield Normalized(item.line, item.mention, item.searched, candidates)
    yield from pending  # errors after the last searchable line
