"""What retrieval returns, and the one interface every retriever implements.

Retrievers take mention strings already passed through `text.normalize_name` (their argument is
named `normalized`): the `Linker` and the document linker normalise once, at their entry.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from babelink.errors import InvalidInputError
from babelink.text import normalize_name

#: Candidates per mention anyone may ask for: generators search several times as many name strings
#: per mention, so an unbounded `top_k` is an unbounded allocation, and past a hundred the ranks
#: carry no information.
MAX_TOP_K = 100


def check_top_k(top_k: int) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise InvalidInputError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    return top_k


@dataclass(frozen=True, slots=True)
class Candidate:
    concept_id: str
    name: str  # the concept's preferred name
    matched_name: str  # the KB name that matched the mention
    score: float
    sparse_score: float | None = None  # the retrievers' own scores, where the score fuses them
    dense_score: float | None = None
    index: str = "kb"  # "spans" when found in the labeled-span index (`SwitchingGenerator`)
    translated: str | None = None  # the English rendering that found it (`TranslatingGenerator`)
    probability: float | None = None  # calibrated probability that it is the right concept (`retrieve.calibration`)
    codes: tuple[tuple[str, str], ...] = ()  # (vocabulary, code) of the concept (`concept_codes`)
    matched_string: str = ""  # `matched_name` normalised (`text.normalize_name`): the string the mention met

    def to_dict(self) -> dict:
        fields = {
            "id": self.concept_id,
            "name": self.name,
            "matched_name": self.matched_name,
            "score": round(self.score, 6),
        }
        if self.probability is not None:
            fields["probability"] = round(self.probability, 4)
        if self.index != "kb":
            fields["index"] = self.index
        for key, value in (("sparse_score", self.sparse_score), ("dense_score", self.dense_score)):
            if value is not None:
                fields[key] = round(value, 6)
        if self.translated is not None:
            fields["translated"] = self.translated
        if self.codes:
            fields["codes"] = dict(self.codes)
        return fields

    def in_vocabularies(self, vocabularies: Collection[str]) -> Candidate:
        """This candidate with only its codes in `vocabularies` (`--codes`)."""
        return replace(self, codes=tuple((vocabulary, code) for vocabulary, code in self.codes
                                         if vocabulary in vocabularies))

    @classmethod
    def from_dict(cls, fields: dict) -> Candidate:
        """The inverse of `to_dict` (scores as rounded there)."""
        return cls(fields["id"], fields["name"], fields["matched_name"], fields["score"], fields.get("sparse_score"),
                   fields.get("dense_score"), fields.get("index", "kb"), fields.get("translated"),
                   fields.get("probability"), tuple(fields.get("codes", {}).items()),
                   normalize_name(fields["matched_name"]))


_CUI = re.compile(r"C\d{7}")

#: Spellings of one vocabulary that sources use side by side (HPO's xrefs hold both "ICD-10:"
#: and "ICD10:", "SNOMED_CT:" and "SNOMEDCT_US:"; MeSH is "MESH:" in CTD's ids, "MSH:" in HPO's
#: xrefs and UMLS's SAB), and the name `codes` gives it. Other UMLS source abbreviations
#: (MSHSPA, …) stay as UMLS writes them.
VOCABULARY_NAMES = {"ICD-10": "ICD10", "ICD-9": "ICD9", "SNOMED_CT": "SNOMEDCT_US", "MSH": "MESH"}
#: Cross-reference prefixes that cite literature rather than name the concept in a vocabulary.
NOT_VOCABULARIES = frozenset({"PMID", "PMCID", "DOI", "ISBN", "HTTP", "HTTPS"})


def vocabulary_name(prefix: str) -> str:
    """The name `codes` gives the vocabulary a prefix or UMLS SAB spells `prefix`."""
    return VOCABULARY_NAMES.get(prefix.upper(), prefix)


def concept_codes(concept_id: str, xrefs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The concept's codes by vocabulary (`vocabulary_name`): its own id under its prefix, written
    as the vocabulary writes it (`MESH:D006973` → MESH: D006973, a bare CUI → UMLS; a code that is
    a bare number keeps its prefix, as OBO ontologies write theirs: HP: HP:0000822), then its
    cross-references as their source wrote them (`UMLS:C0020538` → UMLS: C0020538, MRCONSO atoms' `MSH:D006973`
    → MESH: D006973, …; several codes of one vocabulary joined by "|"). Literature references
    (`PMID:…`) are not codes."""
    codes: dict[str, list[str]] = {}
    own, separator, own_code = concept_id.partition(":")
    if not separator:
        own, own_code = ("UMLS" if _CUI.fullmatch(concept_id) else "ID"), concept_id
    elif own_code.isdigit():
        own_code = concept_id
    for prefix, code in ((own, own_code), *(xref.partition(":")[::2] for xref in xrefs)):
        if not (prefix and code) or prefix.upper() in NOT_VOCABULARIES:
            continue
        found = codes.setdefault(vocabulary_name(prefix), [])
        if code not in found:
            found.append(code)
    return tuple((vocabulary, "|".join(found)) for vocabulary, found in codes.items())


def code_vocabularies(concept_ids: Sequence[str], xrefs: Sequence[Sequence[str] | None]) -> frozenset[str]:
    """Every vocabulary `concept_codes` can name for these concepts (a KB's `concept_id` and `xrefs` columns)."""
    return frozenset(vocabulary for concept_id, refs in zip(concept_ids, xrefs)
                     for vocabulary, _ in concept_codes(concept_id, refs or ()))


class CandidateGenerator(Protocol):
    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        """For each normalised mention, at most `top_k` concepts, best first. `capitals[i]` says
        whether mention i holds a word written in capitals (`text.holds_capitals`; None: all do):
        a KB name written only in short capitals ("IS", "AS") matches only such mentions.
        `langs[i]` is mention i's language where known (ISO 639-1; None: unknown); only a
        generator that translates (`retrieve.translation`) uses it."""
        ...


def deciding_at(generator: CandidateGenerator, threshold: float) -> CandidateGenerator:
    """`generator` for a caller that keeps only answers scoring `threshold` or more (`link`): a
    generator whose shortcuts depend on that threshold (a translating one skips renderings of
    confident mentions) defines `deciding_at(threshold)`, and one with a cheaper search whose best
    score never exceeds its own defines `screening()` (`ScreenedGenerator`); any other is used as it is."""
    adjust = getattr(generator, "deciding_at", None)
    decided = generator if adjust is None else adjust(threshold)
    screen = screening_of(generator)
    return decided if screen is None else ScreenedGenerator(deciding_at(screen, threshold), decided, threshold)


def screening_of(generator: CandidateGenerator) -> CandidateGenerator | None:
    """`generator`'s cheaper screening search (`ScreenedGenerator`), None where it has none."""
    screening = getattr(generator, "screening", None)
    return None if screening is None else screening()


class ScreenedGenerator:
    """Mentions searched by `screen` first, and only those it answers at `threshold` or more by
    `full`: a caller that keeps only such answers gets `full`'s, searched for far fewer mentions.

    `screen` is `full` with a narrower search (`HybridGenerator.screening`: where each name is
    encoded on first need, the encoder's cost is the names it scores), whose names are among those
    `full` scores. Every answer kept is exactly `full`'s; a mention is lost only where `full` alone
    reaches the threshold (none of 5,701 dev mentions, benchmarks/log/notes.md). A mention the screen
    leaves below the threshold gets the screen's best candidate alone."""

    def __init__(self, screen: CandidateGenerator, full: CandidateGenerator, threshold: float):
        self.screen, self.full, self.threshold = screen, full, threshold

    def generate(self, normalized: Sequence[str], top_k: int, capitals: Sequence[bool] | None = None,
                 langs: Sequence[str | None] | None = None) -> list[list[Candidate]]:
        found = self.screen.generate(normalized, 1, capitals, langs)
        sure = [position for position, candidates in enumerate(found)
                if candidates and candidates[0].score >= self.threshold]
        if sure:
            answers = self.full.generate([normalized[position] for position in sure], top_k,
                                         None if capitals is None else [capitals[position] for position in sure],
                                         None if langs is None else [langs[position] for position in sure])
            for position, candidates in zip(sure, answers):
                found[position] = candidates
        return found
