"""The output records of `normalize`, built in one place so the CLI and the REST API agree."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from babelink.errors import InputFormatError, InvalidInputError
from babelink.link.ngram_search import LinkedPart
from babelink.retrieve.candidate import Candidate
from babelink.text import normalized_mention

#: Columns of `normalize --format tsv`, one row per candidate; a column per `--codes` vocabulary follows.
TSV_COLUMNS = ("mention", "rank", "id", "name", "matched_name", "score", "probability")


def tsv_header(vocabularies: Sequence[str] = ()) -> str:
    return "\t".join([*TSV_COLUMNS, *vocabularies]) + "\n"


def normalize_record(mention: str, candidates: Sequence[Candidate], provenance: dict, *,
                     searched: str | None = None, parts: Sequence[LinkedPart] | None = None) -> dict:
    """One normalised mention: `{"mention", "candidates": [Candidate.to_dict(), …], "provenance"}`
    (`Bundle.provenance`), plus the string `searched` when it was not the mention (an
    abbreviation's long form) and the mention's linked n-gram `parts` when the n-gram search loop
    ran (their offsets index `searched` where there is one: the string they were found in)."""
    record = {"mention": mention, "candidates": [candidate.to_dict() for candidate in candidates]}
    if searched is not None and searched != mention:
        record["searched"] = searched
    if parts is not None:
        record["parts"] = [part.to_dict() for part in parts]
    record["provenance"] = provenance
    return record


def tsv_rows(mention: str, candidates: Sequence[Candidate], vocabularies: Sequence[str] = ()) -> str:
    """`normalize --format tsv` lines of one mention (see `tsv_header`): a concept without a code
    in a vocabulary has an empty cell; a tab or line break in a mention or name is escaped. A
    mention without candidates (NIL, or not searchable) gets a row with its mention alone, so
    the rows' mentions are the input's, in order."""
    if not candidates:
        return "\t".join([_tsv_cell(mention)] + [""] * (len(TSV_COLUMNS) - 1 + len(vocabularies))) + "\n"
    lines = []
    for rank, c in enumerate(candidates, start=1):
        codes = dict(c.codes)
        probability = "" if c.probability is None else f"{c.probability:.4f}"  # none from an uncalibrated bundle
        cells = [mention, str(rank), c.concept_id, c.name, c.matched_name, f"{c.score:.6f}", probability]
        lines.append("\t".join(map(_tsv_cell, cells + [codes.get(vocabulary, "") for vocabulary in vocabularies]))
                     + "\n")
    return "".join(lines)


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _tsv_cell(value: str) -> str:
    r"""A cell that stays one cell of UTF-8: a backslash, tab and line breaks are written `\\`, `\t`,
    `\n`, `\r`, a lone surrogate `\udc80`."""
    escaped = value.translate(_TSV_ESCAPES)
    try:
        escaped.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate of an unsearchable mention
        return escaped.encode("utf-8", "backslashreplace").decode("utf-8")
    return escaped


@dataclass(frozen=True)
class NormalizedMention:
    """One mention's answer (`Linker.normalize_each`): its candidates and, when the n-gram search
    loop ran, its linked parts; or why it could not be searched."""

    mention: str
    candidates: list[Candidate]
    parts: list[LinkedPart] | None = None
    error: str | None = None


@dataclass(frozen=True)
class Normalized:
    """One input line of `normalize`: the mention as written on it, and its answer."""

    line: int
    mention: str
    result: NormalizedMention

    def record(self, provenance: dict) -> dict:
        if self.result.error is not None:
            return {"mention": self.mention, "line": self.line, "error": self.result.error}
        return normalize_record(self.mention, self.result.candidates, provenance, searched=self.result.mention,
                                parts=self.result.parts)


def normalize_lines(linker, lines: Iterable[tuple[int, str, str]], top_k: int, source: str,
                    skip_invalid: bool = False, lang: str | None = None, min_probability: float = 0.0,
                    ngram_threshold: float | None = None) -> Iterator[Normalized]:
    """`(line, mention, text to search)` items → `Normalized`, in input order, streamed in the
    linker's batches. An unusable mention is an `InputFormatError` naming `source` and its line,
    raised as it is read (before its batch is searched), or with `skip_invalid` a `Normalized`
    carrying the error, and the run goes on."""
    read, searched = itertools.tee(lines if skip_invalid else _usable(lines, source))
    results = linker.normalize_each((text for _, _, text in searched), top_k, lang, min_probability, ngram_threshold)
    for (line, mention, _), result in zip(read, results):
        yield Normalized(line, mention, result)


def _usable(lines: Iterable[tuple[int, str, str]], source: str) -> Iterator[tuple[int, str, str]]:
    for line, mention, text in lines:
        try:
            normalized_mention(text)
        except InvalidInputError as error:
            raise InputFormatError(source, line, f"{error} (--skip-invalid to go on)") from None
        yield line, mention, text
